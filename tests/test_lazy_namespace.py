"""The ``prism`` namespace loads its names on first access (PEP 562) (ARCH-6, ARCH-8)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import prism


def test_every_public_name_has_one_source_module() -> None:
    """ARCH-6: ``__all__``, the lazy table and the static imports list the same names."""
    exports = prism._EXPORTS
    assert set(exports) == set(prism.__all__)
    tree = ast.parse(Path(prism.__file__).read_text(encoding="utf-8"))
    static: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom)
                for alias in stmt.names:
                    static[alias.name] = "." * stmt.level + (stmt.module or "")
    assert static == exports


def test_import_prism_loads_no_submodule() -> None:
    """ARCH-8: ``import prism`` alone imports no prism submodule; first use loads what it needs."""
    code = (
        "import sys, prism\n"
        "print(sorted(m for m in sys.modules if m.startswith('prism.')))\n"
        "from prism import Message\n"
        "print(Message.__module__, 'prism.types' in sys.modules, prism.Message is Message)\n"
        "print(prism.loops.__name__, 'create_agent' in dir(prism))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    assert lines[0] == "[]"
    assert lines[1] == "prism.types._messages True True"
    assert lines[2] == "prism.loops True"


def test_unknown_name_is_an_attribute_error() -> None:
    try:
        prism.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected AttributeError")
