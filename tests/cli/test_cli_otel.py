"""``prism run --otel``: the OpenTelemetry SDK set up from the OTEL_* environment variables,
console spans on standard error (``--json`` output stays clean), and the package to install named
when the SDK or an exporter is missing."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

from prism.cli import main
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.tracing import default_tracer
from prism.types import ProviderEvent, Usage

TOOL_THEN_ANSWER = [
    [provider_tool_call("c1", "calculator", {"expression": "6*7"}), provider_done(None, "tool_use")],
    [provider_text_delta("It is 42."), provider_done(Usage(input_tokens=30, output_tokens=4), "end_turn")],
]


def _script(tmp_path: Path, turns: Sequence[Sequence[ProviderEvent]]) -> str:
    path = tmp_path / "script.json"
    data = {"turns": [[event.to_dict() for event in turn] for turn in turns]}
    path.write_text(json.dumps(data), encoding="utf-8")
    return f"mock:{path}"


def _run(argv: Sequence[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def _console_spans(text: str) -> list[dict[str, Any]]:
    """The JSON objects the console exporter wrote (one indented object per span)."""
    decoder = json.JSONDecoder()
    spans, index = [], 0
    while True:
        start = text.find("{", index)
        if start < 0:
            return spans
        value, index = decoder.raw_decode(text, start)
        spans.append(value)


def test_otel_console_spans_go_to_stderr_and_json_stays_clean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "desk")
    model = _script(tmp_path, TOOL_THEN_ANSWER)
    code, out, err = _run(
        ["run", "what is 6*7?", "--model", model, "--tool", "calculator", "--json", "--otel"]
    )
    assert code == 0, err
    lines = out.splitlines()
    assert all(json.loads(line)["type"] for line in lines)  # only events and the summary
    assert json.loads(lines[-1])["type"] == "run_result"
    spans = _console_spans(err)
    names = [span["name"] for span in spans]
    assert sorted(n.split()[0] for n in names) == [
        "chat", "chat", "execute_tool", "invoke_agent"
    ], names
    (invoke,) = [s for s in spans if s["name"].startswith("invoke_agent")]
    (tool,) = [s for s in spans if s["name"] == "execute_tool calculator"]
    assert tool["parent_id"] == invoke["context"]["span_id"]
    assert invoke["attributes"]["prism.run.status"] == "succeeded"
    assert invoke["attributes"]["gen_ai.usage.output_tokens"] == 4
    assert invoke["resource"]["attributes"]["service.name"] == "desk"
    assert default_tracer() is None  # turned off again when the command ends


def test_otel_names_the_exporter_package_when_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if any(e.name == "otlp" for e in entry_points(group="opentelemetry_traces_exporter")):
        pytest.skip("an OTLP exporter is installed here")
    monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)  # the default is otlp
    model = _script(tmp_path, TOOL_THEN_ANSWER)
    code, out, err = _run(["run", "hi", "--model", model, "--otel"])
    assert code == 2 and out == ""
    assert "pip install opentelemetry-exporter-otlp" in err


def test_otel_names_the_sdk_when_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # import fails
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    model = _script(tmp_path, TOOL_THEN_ANSWER)
    code, out, err = _run(["run", "hi", "--model", model, "--otel"])
    assert code == 2 and out == ""
    assert "opentelemetry-sdk" in err and "prism-runtime[otel]" in err
