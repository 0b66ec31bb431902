"""Every Python example in the README and docs/ runs as written (STYLE §8: runnable examples)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def _examples() -> list[tuple[str, str]]:
    out = []
    for doc in DOCS:
        for i, match in enumerate(BLOCK.finditer(doc.read_text(encoding="utf-8"))):
            out.append((f"{doc.relative_to(ROOT)}#{i + 1}", match.group(1)))
    return out


@pytest.mark.parametrize(("where", "code"), _examples(), ids=[w for w, _ in _examples()])
def test_documented_example_runs(where: str, code: str, tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert proc.returncode == 0, f"{where} failed:\n{proc.stdout}\n{proc.stderr}"


def test_documented_examples_type_check_strictly(tmp_path: Path) -> None:
    """A host program written like the docs passes ``mypy --strict`` (the package ships py.typed)."""
    paths = []
    for i, (_, code) in enumerate(_examples()):
        path = tmp_path / f"example_{i}.py"
        path.write_text(code, encoding="utf-8")
        paths.append(str(path))
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", *paths],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
