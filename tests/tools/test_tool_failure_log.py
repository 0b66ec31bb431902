"""A tool's exception is logged on ``prism.tools`` as redacted traceback text, besides the error
result the model sees."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from tools_support import Recorder, dispatch, make_call

from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.redaction import create_secret_redactor
from prism.runtime.agent import create_agent
from prism.tools.failure_log import MAX_LOGGED_TRACEBACK_CHARS, format_tool_traceback
from prism.types import ModelConfig, ToolDefinition, ToolResultContent

SECRET = "sk-live-0123456789"


def _failing_lookup(arguments: dict[str, Any], context: Any) -> Any:
    return _connect(f"https://api.example.test/?key={SECRET}")


def _connect(url: str) -> Any:
    raise ConnectionError(f"cannot reach {url}")


def _records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "prism.tools"]


async def test_a_failing_tool_logs_its_traceback_as_redacted_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="prism.tools")
    tool = ToolDefinition(name="lookup", execute=_failing_lookup)
    rec = Recorder()
    result = await dispatch(
        make_call("lookup", {}, id="call_7"),
        [tool],
        rec,
        redactor=create_secret_redactor([SECRET]),
    )
    # the model still gets its error result
    assert result.error is not None and result.error.name == "ConnectionError"
    assert "tool_execution_error" in rec.types
    (record,) = _records(caplog)
    assert record.levelno == logging.ERROR
    assert record.exc_info is None and record.exc_text is None  # text only, no live frames
    message = record.getMessage()
    assert message.startswith("tool lookup raised ConnectionError (call call_7, run ")
    assert "Traceback (most recent call last)" in message
    assert "_failing_lookup" in message and "_connect" in message  # the frames, as text
    assert SECRET not in message and "[REDACTED]" in message


async def test_extra_secrets_given_to_dispatch_are_redacted_too(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="prism.tools")
    await dispatch(
        make_call("lookup", {}),
        [ToolDefinition(name="lookup", execute=_failing_lookup)],
        secrets=(SECRET,),
    )
    (record,) = _records(caplog)
    assert SECRET not in record.getMessage()


async def test_an_async_tool_failure_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="prism.tools")

    async def broken(arguments: dict[str, Any], context: Any) -> Any:
        raise ValueError("bad input")

    result = await dispatch(make_call("broken", {}), [ToolDefinition(name="broken", execute=broken)])
    assert result.error is not None
    (record,) = _records(caplog)
    assert "ValueError: bad input" in record.getMessage()


async def test_blocked_calls_and_successes_log_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="prism.tools")
    tool = ToolDefinition(name="ok", execute=lambda arguments, context: 1)
    await dispatch(make_call("ok", {}), [tool])
    await dispatch(make_call("missing", {}), [tool])
    assert _records(caplog) == []


async def test_an_agent_run_logs_with_the_runs_redactor(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="prism.tools")
    provider = create_mock_provider(
        turns=[
            [provider_tool_call("c1", "lookup", {}), provider_done()],
            [provider_text_delta("sorry"), provider_done()],
        ]
    )
    agent = create_agent(
        model=ModelConfig(provider="mock", model="m"),
        provider=provider,
        tools=[ToolDefinition(name="lookup", execute=_failing_lookup)],
        redactor=create_secret_redactor([SECRET]),
    )
    result = await agent.create_session().run("look it up")
    assert result.status == "succeeded"
    rows = [p for m in result.messages for p in m.content if isinstance(p, ToolResultContent)]
    assert len(rows) == 1 and rows[0].error is not None
    (record,) = _records(caplog)
    message = record.getMessage()
    assert f"run {result.run_id}" in message
    assert SECRET not in message and "_failing_lookup" in message


def test_a_long_traceback_keeps_its_end() -> None:
    try:
        raise RuntimeError("x" * (MAX_LOGGED_TRACEBACK_CHARS * 2) + " END")
    except RuntimeError as exc:
        text = format_tool_traceback(exc, lambda text: text)
    assert text.startswith("[") and "characters cut]" in text.splitlines()[0]
    assert text.endswith(" END")
    assert len(text) <= MAX_LOGGED_TRACEBACK_CHARS + 40
