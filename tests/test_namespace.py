"""The ``prism`` namespace: a table of contents of explicit re-exports, and names that moved.

``src/prism/__init__.py`` is grouped ``from .module import Name as Name`` lines, seen by type
checkers only, plus ``__all__``; at run time each name's module is imported on first use, from the
table in ``prism._moved``. A name that left the top level raises an ``AttributeError`` naming the
module it moved to; ``import prism`` performs no I/O (ARCH-6, ARCH-8).
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import prism
from prism._moved import HOMES, MOVED

INIT = Path(prism.__file__)


def _type_checking_imports() -> list[tuple[str, str]]:
    """``(module, name)`` of each import in the ``TYPE_CHECKING`` block of ``prism/__init__.py``,
    in order; every statement there re-exports ``Name as Name`` from a submodule."""
    source = INIT.read_text(encoding="utf-8")
    assert source.count("\n") <= 200
    blocks = [
        stmt
        for stmt in ast.parse(source).body
        if isinstance(stmt, ast.If) and ast.unparse(stmt.test) == "_moved.TYPE_CHECKING"
    ]
    assert len(blocks) == 1, "one `if _moved.TYPE_CHECKING:` block of re-exports"
    found: list[tuple[str, str]] = []
    for stmt in blocks[0].body:
        assert isinstance(stmt, ast.ImportFrom), ast.unparse(stmt)
        assert stmt.level == 1 and stmt.module, ast.unparse(stmt)
        for alias in stmt.names:
            assert alias.asname == alias.name, ast.unparse(stmt)
            found.append((stmt.module, alias.name))
    return found


def test_init_is_a_short_table_of_explicit_re_exports() -> None:
    """``prism/__init__.py`` binds no name at import: its re-exports are ``Name as Name`` imports
    under ``TYPE_CHECKING``, the names imported are exactly ``__all__``, and besides that block
    the only import is ``prism._moved`` (the lazy loader)."""
    reexported = [name for _, name in _type_checking_imports()]
    assert len(reexported) == len(set(reexported))
    assert reexported == prism.__all__, "__all__ lists the names in the order of the imports"
    for stmt in ast.parse(INIT.read_text(encoding="utf-8")).body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            assert ast.unparse(stmt) == "from . import _moved", ast.unparse(stmt)


def test_lazy_table_matches_the_type_checking_imports() -> None:
    """``prism._moved.HOMES`` (what ``__getattr__`` imports at run time) and the ``TYPE_CHECKING``
    imports (what type checkers and readers see) name the same modules for the same names."""
    from_imports = sorted(_type_checking_imports())
    from_table = sorted((module, name) for module, names in HOMES.items() for name in names.split())
    assert from_table == from_imports


def test_top_level_names_bind_on_first_use_to_their_home_objects() -> None:
    """Each name is the object its home module defines; after the first read it is a plain
    attribute of the namespace (no second ``__getattr__`` call)."""
    for module, names in HOMES.items():
        home = importlib.import_module(f"prism.{module}")
        for name in names.split():
            assert getattr(prism, name) is getattr(home, name)
            assert vars(prism)[name] is getattr(home, name)


_LAZY_PROBE = """
import json, sys
import prism
before = sorted(m for m in sys.modules if m.startswith("prism"))
from prism import *
star = sorted(n for n in prism.__all__ if n in globals())
sys.stdout.write(json.dumps([before, star, "prism.runtime.agents.agent" in sys.modules]))
"""


def test_star_import_resolves_every_name_lazily() -> None:
    """``from prism import *`` binds every name of ``__all__``, importing the modules then."""
    out = subprocess.run(
        [sys.executable, "-c", _LAZY_PROBE], capture_output=True, text=True, check=True
    )
    before, star, loaded = json.loads(out.stdout)
    assert before == ["prism", "prism._moved"]
    assert star == sorted(prism.__all__)
    assert loaded


def test_public_surface_size() -> None:
    """About 95 names: what a host uses, with room for the names later work adds."""
    assert len(prism.__all__) <= 110


@pytest.mark.parametrize("name", sorted(MOVED))
def test_moved_name_raises_attribute_error_naming_its_module(name: str) -> None:
    modules = MOVED[name]
    assert name not in prism.__all__
    with pytest.raises(AttributeError) as excinfo:
        getattr(prism, name)
    assert str(excinfo.value) == f"prism.{name} moved: import it from {' or '.join(modules)}"
    assert not hasattr(prism, name)
    for module in modules:
        assert hasattr(importlib.import_module(module), name), f"{module} has no {name}"


def test_moved_message_example() -> None:
    expected = r"^prism\.ToolRegistry moved: import it from prism\.tools$"
    with pytest.raises(AttributeError, match=expected):
        prism.ToolRegistry  # type: ignore[attr-defined]  # noqa: B018


def test_internals_are_not_at_the_top_level() -> None:
    internals = ("RunLimitTracker", "UsageAccumulator", "generate_with_retry", "dispatch_tool_call")
    for name in internals:
        assert not hasattr(prism, name)


def test_provider_author_names_and_test_doubles_live_in_their_namespaces() -> None:
    import prism.providers
    import prism.testing

    for name in ("AIProvider", "ProviderEvent", "ProviderRequest", "provider_text_delta"):
        assert name in prism.providers.__all__ and name not in prism.__all__
    for name in ("MockProvider", "create_mock_provider", "MemorySessionStore"):
        assert name in prism.testing.__all__
        assert name not in prism.__all__ and name not in prism.providers.__all__


def test_unknown_name_is_a_plain_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        prism.no_such_name  # type: ignore[attr-defined]  # noqa: B018


def test_submodule_is_reachable_as_an_attribute() -> None:
    """``prism.<submodule>`` works without importing the submodule first, as before."""
    code = "import prism\nprint(prism.artifacts.__name__, prism.loops.__name__)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["prism.artifacts", "prism.loops"]


_NO_IO_PROBE = """
import json, sys
events = []
def hook(event, args):
    if event == "open":
        path = str(args[0])
        if not path.endswith((".py", ".pyc", ".so")):
            events.append([event, path])
    elif event.startswith(("socket.", "subprocess.", "sqlite3.", "os.system", "os.exec")):
        events.append([event, repr(args)[:80]])
sys.addaudithook(hook)
import prism
sys.stdout.write(json.dumps(events))
"""


def test_import_prism_performs_no_io() -> None:
    """ARCH-8: importing ``prism`` reads only its own modules: no other file, socket, process or
    database (checked with an audit hook in a fresh interpreter)."""
    out = subprocess.run(
        [sys.executable, "-c", _NO_IO_PROBE], capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == []
