"""``prism run --tool MODULE:ATTR``: the host's own tools, and the two tool-round options in
``--help``."""

from __future__ import annotations

import io
import json
import sys
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from prism.cli import main
from prism.cli._host_tools import HostToolError, load_host_tool
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.tools.function_tool import FunctionTool
from prism.types import ProviderEvent, ToolDefinition

pytest.importorskip("pydantic")

TOOLS_MODULE = '''
import prism


@prism.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


class Box:
    @staticmethod
    def twice(n: int) -> int:
        return 2 * n


box = Box()
NOT_A_TOOL = 42


def untyped(x):
    return x
'''


@pytest.fixture
def tools_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A working directory holding ``hosttools_<n>.py``; the module is forgotten afterwards."""
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "hosttools.py").write_text(textwrap.dedent(TOOLS_MODULE), encoding="utf-8")
    (folder / "brokentools.py").write_text("raise RuntimeError('boom at import')\n", "utf-8")
    monkeypatch.chdir(folder)
    before = list(sys.path)
    yield folder
    for name in ("hosttools", "brokentools"):
        sys.modules.pop(name, None)
    sys.path[:] = before


def _script(tmp_path: Path, turns: Sequence[Sequence[ProviderEvent]]) -> str:
    path = tmp_path / "script.json"
    path.write_text(
        json.dumps({"turns": [[event.to_dict() for event in turn] for turn in turns]}),
        encoding="utf-8",
    )
    return f"mock:{path}"


def _run(argv: Sequence[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err, stdin=io.StringIO())
    return code, out.getvalue(), err.getvalue()


def _tool_results(out: str) -> list[Any]:
    events = [json.loads(line) for line in out.splitlines()]
    return [e["result"]["value"] for e in events if e["type"] == "tool_execution_finished"]


def test_a_prism_tool_object_is_loaded_and_run(tmp_path: Path, tools_dir: Path) -> None:
    model = _script(
        tmp_path,
        [
            [provider_tool_call("c1", "add", {"a": 2, "b": 3}), provider_done()],
            [provider_text_delta("5"), provider_done()],
        ],
    )
    code, out, err = _run(["run", "2+3?", "--model", model, "--tool", "hosttools:add", "--json"])
    assert code == 0, err
    assert _tool_results(out) == [5]
    assert json.loads(out.splitlines()[-1])["status"] == "succeeded"


def test_a_plain_function_is_wrapped_with_prism_tool(tmp_path: Path, tools_dir: Path) -> None:
    model = _script(
        tmp_path,
        [
            [provider_tool_call("c1", "shout", {"text": "hi"}), provider_done()],
            [provider_tool_call("c2", "twice", {"n": 4}), provider_done()],
            [provider_text_delta("done"), provider_done()],
        ],
    )
    code, out, err = _run(
        [
            "run", "go", "--model", model, "--json",
            "--tool", "hosttools:shout", "-t", "hosttools:box.twice", "--tool", "calculator",
        ]
    )
    assert code == 0, err
    assert _tool_results(out) == ["HI", 8]


def test_a_session_continued_later_loads_the_host_tool_again(
    tmp_path: Path, tools_dir: Path
) -> None:
    """The spec is stored with the session; ``run --session`` imports it again."""
    first = _script(
        tmp_path,
        [
            [provider_tool_call("c1", "add", {"a": 1, "b": 1}), provider_done()],
            [provider_text_delta("2"), provider_done()],
        ],
    )
    code, out, err = _run(["run", "1+1?", "--model", first, "--tool", "hosttools:add", "--json"])
    assert code == 0, err
    session_id = json.loads(out.splitlines()[-1])["session_id"]
    sys.modules.pop("hosttools", None)  # as in a new process
    _script(
        tmp_path,
        [
            [provider_tool_call("c2", "add", {"a": 2, "b": 2}), provider_done()],
            [provider_text_delta("4"), provider_done()],
        ],
    )
    code, out, err = _run(["run", "2+2?", "--session", session_id, "--json"])
    assert code == 0, err
    assert _tool_results(out) == [4]


def test_load_host_tool_returns_definitions(tools_dir: Path) -> None:
    add = load_host_tool("hosttools:add")
    assert isinstance(add, FunctionTool) and add(2, 2) == 4
    shout = load_host_tool("hosttools:shout")
    assert isinstance(shout, ToolDefinition) and shout.name == "shout"
    assert shout.description == "Upper-case the text."


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nosuchmodule:add", "no module named 'nosuchmodule'"),
        ("hosttools:missing", "hosttools has no attribute 'missing'"),
        ("hosttools:NOT_A_TOOL", "int is neither a tool definition (@prism.tool) nor a function"),
        ("hosttools:untyped", "parameter 'x' has no annotation"),
        ("brokentools:add", "importing brokentools failed: RuntimeError: boom at import"),
        ("hosttools:", "expected MODULE:ATTR"),
        ("host-tools:add", "expected MODULE:ATTR"),
    ],
)
def test_a_host_tool_that_cannot_be_loaded_is_a_usage_error_before_anything_is_stored(
    spec: str, message: str, tools_dir: Path, _private_store: Path
) -> None:
    with pytest.raises(HostToolError, match="^--tool "):
        load_host_tool(spec)
    code, out, err = _run(["run", "hi", "--model", "mock:unused.json", "--tool", spec])
    assert code == 2
    assert message in err
    assert out == ""
    assert not _private_store.exists()


def test_an_unknown_builtin_name_lists_the_choices() -> None:
    code, _, err = _run(["run", "x", "--tool", "shell"])
    assert code == 2
    assert "invalid choice: 'shell'" in err
    assert "calculator, clock" in err and "MODULE:ATTR" in err


def test_help_explains_both_tool_round_options_side_by_side() -> None:
    code, out, _ = _run(["run", "--help"])
    assert code == 0
    section = out[out.index("tool rounds:") :]
    assert section.index("--tool-rounds N") < section.index("--max-tool-rounds N")
    assert "--tool-rounds steers" in section and "stops: tool calls beyond N rounds" in section
    assert "--tool NAME|MODULE:ATTR" in out
