"""The stop reasons and error codes that the ``prism`` help, the README and the guides name are
the ones runs report (issue 21, item 21): the names are extracted from the texts and checked
against the code's literals (``RunStopReason``, the ``ERR_PRISM_*`` codes of ``prism.errors`` and
``prism.mcp``),
and the one stop the help describes is checked against a real run of the command."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest

from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.types import RunStopReason

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = (
    (), ("run",), ("resume",), ("runs",), ("runs", "resolve"), ("sessions",),
    ("sessions", "list"), ("sessions", "show"), ("worker",),
)
STOP_REASONS = frozenset(get_args(RunStopReason))
SRC = ROOT / "src" / "prism"


def _code_literals() -> frozenset[str]:
    """Every ``"ERR_PRISM_…"`` string literal of the package (``prism.errors``, ``prism.mcp`` …)."""
    found: set[str] = set()
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if re.fullmatch(r"ERR_PRISM_[A-Z0-9_]+", node.value):
                    found.add(node.value)
    return frozenset(found)


ERROR_CODES = _code_literals()
# "stop reason tool_round_limit", stop_reason="host_policy", stop_reason == "turn_limit" — not the
# provider's stop reason (provider_stop_reason, "provider stop reason")
_NAMED_STOP = re.compile(
    r"(?<!provider_)(?<!provider )\bstop[ _]reason(?:\s+|\s*==?\s*[\"'`]?)([a-z]+(?:_[a-z]+)+)"
)
_LIMIT_WORD = re.compile(r"(?<![\w.\-])([a-z]+(?:_[a-z]+)*_limit)\b")
_ERROR_CODE = re.compile(r"\bERR_PRISM_[A-Z0-9_]*[A-Z0-9]\b(?![_{])")


def _prism(*argv: str) -> tuple[int, str, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "prism", *argv],
        capture_output=True, text=True, timeout=120, check=False,
    )
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture(scope="module")
def helps() -> dict[str, str]:
    """``prism … --help`` of every command, from the real command."""
    out: dict[str, str] = {}
    for command in COMMANDS:
        code, text, err = _prism(*command, "--help")
        assert code == 0, err
        out[" ".join(("prism", *command))] = text
    return out


def _documents() -> dict[str, str]:
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in paths}


def test_every_stop_reason_the_help_and_docs_name_is_one_runs_report_i21_f(
    helps: dict[str, str],
) -> None:
    texts = {**helps, **_documents()}
    wrong = {
        (where, name)
        for where, text in texts.items()
        for pattern in (_NAMED_STOP, _LIMIT_WORD)
        for name in pattern.findall(text)
        if name not in STOP_REASONS
    }
    assert not wrong, f"stop reasons no run reports (RunStopReason: {sorted(STOP_REASONS)})"
    named = {n for text in texts.values() for n in _NAMED_STOP.findall(text)}
    assert {"host_policy", "tool_round_limit", "turn_limit"} <= named  # the extraction works


def test_every_error_code_the_help_and_docs_name_exists_i21_f(helps: dict[str, str]) -> None:
    texts = {**helps, **_documents()}
    found = {(where, code) for where, text in texts.items() for code in _ERROR_CODE.findall(text)}
    wrong = {item for item in found if item[1] not in ERROR_CODES}
    assert not wrong, "error codes no prism module defines"
    assert {code for _, code in found} >= {"ERR_PRISM_RUN_ABORTED", "ERR_PRISM_CONFIG"}


def test_the_stop_the_help_describes_is_the_one_the_run_reports_i21_f(
    tmp_path: Path, helps: dict[str, str]
) -> None:
    """``--max-tool-rounds``: the help's stop reason, and the README's ``run_result`` keys, are
    what ``prism run --json`` prints."""
    help_text = " ".join(helps["prism run"].split())
    option = help_text[help_text.index("--max-tool-rounds N ") :]
    described = _NAMED_STOP.findall(option)[0]
    call = {"expression": "1+1"}
    turns = [
        [provider_tool_call("c1", "calculator", call), provider_done()],
        [provider_tool_call("c2", "calculator", call), provider_done()],
        [provider_text_delta("2"), provider_done()],
    ]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [[e.to_dict() for e in t] for t in turns]}), "utf-8")
    code, out, err = _prism(
        "run", "1+1?", "--model", f"mock:{script}", "--tool", "calculator",
        "--max-tool-rounds", "1", "--json",
    )
    assert code == 0, err
    summary = json.loads(out.splitlines()[-1])
    assert summary["type"] == "run_result" and summary["stop_reason"] == described
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    listed = re.search(r'\{"type": "run_result", ([^}]*)\}', readme)
    assert listed is not None
    keys = {"type", *re.findall(r'"(\w+)"', listed.group(1))}
    assert keys == set(summary) - {"stop_detail", "error"}
