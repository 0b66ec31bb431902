"""The evals guide's example project runs as the guide shows it: its dataset (``evals/
refunds.yaml``), its registry module (``refund_agents.py``) and its pytest module, written out as
files, and its ``prism eval run`` commands run in a real subprocess — every case passes; the
failing variant the guide describes fails with the output it prints."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "operations" / "evals.md"
FENCE = re.compile(r"```(\w+)[^\n]*\n(.*?)```", re.DOTALL)
PRISM = "import sys; from prism.cli import main; sys.exit(main(sys.argv[1:]))"


def _blocks() -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(GUIDE.read_text(encoding="utf-8"))]


def _file(first_line: str) -> str:
    """The guide's block that opens with ``first_line`` (a file name comment)."""
    found = [code for _, code in _blocks() if code.startswith(first_line + "\n")]
    assert len(found) == 1, f"docs/operations/evals.md has {len(found)} blocks opening with {first_line!r}"
    return found[0]


def _commands() -> list[str]:
    """The ``sh`` block of ``prism eval run`` commands on the example project, one per command."""
    (block,) = [
        code for kind, code in _blocks()
        if kind == "sh" and "prism eval run evals/refunds.yaml --agents refund_agents" in code
    ]
    return [line for line in block.replace("\\\n", " ").splitlines() if line.strip()]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "refunds.yaml").write_text(_file("# evals/refunds.yaml"), "utf-8")
    (tmp_path / "refund_agents.py").write_text(_file("# refund_agents.py"), "utf-8")
    return tmp_path


def _prism(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PRISM, *argv],
        capture_output=True, text=True, timeout=120, cwd=cwd, env={**os.environ, "COLUMNS": "120"},
    )


def test_every_documented_command_passes_on_the_example_project(project: Path) -> None:
    commands = _commands()
    assert len(commands) == 4
    for command in commands:
        argv = shlex.split(command)
        redirect = argv.index(">") if ">" in argv else None
        target = argv[redirect + 1] if redirect is not None else None
        argv = argv[:redirect] if redirect is not None else argv
        assert argv[:3] == ["prism", "eval", "run"], command
        proc = _prism(argv[1:], project)
        assert proc.returncode == 0, f"{command}\n{proc.stdout}\n{proc.stderr}"
        if target is not None:
            (project / target).write_text(proc.stdout, encoding="utf-8")
        else:
            assert "2 cases: 2 pass, 0 fail, 0 flaky, 0 error;" in proc.stdout, proc.stdout
    assert '"passed": true' in (project / "report.json").read_text(encoding="utf-8")
    assert "<testsuite" in (project / "eval-results.xml").read_text(encoding="utf-8")
    assert (project / "evals.db").is_file()


def test_the_failing_variant_prints_what_the_guide_shows(project: Path) -> None:
    guide = GUIDE.read_text(encoding="utf-8")
    (shown,) = [
        code for kind, code in _blocks() if kind == "text" and "FAIL refund-status" in code
    ]
    changed = re.search(r"`expected_output` to `([^`]+)`", guide)
    assert changed is not None
    dataset = project / "evals" / "refunds.yaml"
    text = dataset.read_text(encoding="utf-8")
    assert "expected_output: Refund 4417 is approved." in text
    dataset.write_text(
        text.replace("expected_output: Refund 4417 is approved.",
                     f"expected_output: {changed.group(1)}"),
        encoding="utf-8",
    )
    proc = _prism(["eval", "run", "evals/refunds.yaml", "--agents", "refund_agents:REGISTRY"],
                  project)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = re.sub(r"run_[0-9a-f]+", "RUN", re.sub(r"; [0-9.]+s\n", "; Ts\n", proc.stdout))
    expected = re.sub(r"run_[0-9a-f]+", "RUN", re.sub(r"; [0-9.]+s\n", "; Ts\n", shown))
    assert out.endswith(expected), out


def test_the_guides_pytest_module_passes(project: Path) -> None:
    pytest.importorskip("pytest_asyncio")
    (project / "test_refunds.py").write_text(_file("# test_refunds.py"), "utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o",
         "asyncio_mode=auto", "test_refunds.py"],
        capture_output=True, text=True, timeout=120, cwd=project,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(project), os.environ.get("PYTHONPATH", "")]
        )},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed" in proc.stdout
