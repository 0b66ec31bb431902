"""The public namespaces list exactly their public names (ARCH-6, STYLE §2)."""

from __future__ import annotations

import importlib
import subprocess
import sys
import types

import pytest

PUBLIC_MODULES = [
    "prism",
    "prism.providers",
    "prism.testing",
    "prism.runtime",
    "prism.types",
    "prism.errors",
    "prism.events",
    "prism.loops",
    "prism.artifacts",
    "prism.stores",
    "prism.evals",
]


REEXPORT_NAMESPACES = {
    "prism",
    "prism.providers",
    "prism.testing",
    "prism.runtime",
    "prism.types",
    "prism.events",
    "prism.loops",
    "prism.stores",
    "prism.evals",
}


def _public_names(module: types.ModuleType) -> set[str]:
    """Names a user sees: for re-export namespaces every public binding; for implementation
    modules the public classes and functions defined there."""
    names = set()
    for name, value in vars(module).items():
        if name.startswith("_") or isinstance(value, types.ModuleType):
            continue
        if name in {"annotations", "TYPE_CHECKING"}:
            continue
        if module.__name__ in REEXPORT_NAMESPACES:
            names.add(name)
        elif (isinstance(value, type) or callable(value)) and getattr(
            value, "__module__", None
        ) == module.__name__:
            names.add(name)
    return names


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_all_lists_exactly_the_public_names(name: str) -> None:
    """ARCH-6: each public module's ``__all__`` equals its public namespace."""
    module = importlib.import_module(name)
    exported = set(module.__all__)
    assert len(module.__all__) == len(exported), "duplicate names in __all__"
    missing = _public_names(module) - exported
    assert not missing, f"public but not in __all__: {sorted(missing)}"
    for export in exported:
        assert hasattr(module, export), f"{name}.__all__ names missing attribute {export}"


@pytest.mark.parametrize("name", ["prism", "prism.providers", "prism.testing", "prism.stores"])
def test_dir_shows_only_public_names_submodules_and_dunders(name: str) -> None:
    """ARCH-6: ``dir()`` of a namespace lists its public names (lazy ones included, e.g.
    ``PostgresStore``) and, besides submodules and dunders, no implementation bindings
    (``TYPE_CHECKING``, ``annotations``, ``Any``, ``TypeAlias``)."""
    module = importlib.import_module(name)
    listed = dir(module)
    assert set(module.__all__) <= set(listed)
    for name_ in listed:
        if name_.startswith("__") and name_.endswith("__"):
            continue
        value = getattr(module, name_)
        assert name_ in module.__all__ or isinstance(value, types.ModuleType), name_
    for hidden in ("TYPE_CHECKING", "annotations", "Any", "TypeAlias"):
        assert hidden not in listed


def test_every_error_class_is_importable_from_prism_and_errors() -> None:
    """ARCH-6 / ERR-1: error classes live in both ``prism`` and ``prism.errors``."""
    import prism
    import prism.errors

    for name in prism.errors.__all__:
        value = getattr(prism.errors, name)
        if isinstance(value, type) and issubclass(value, BaseException):
            assert name in prism.__all__
            assert getattr(prism, name) is value


def test_provider_namespace_names_the_same_objects_as_their_modules() -> None:
    import prism.providers
    import prism.providers.base
    import prism.providers.chain
    import prism.providers.defaults
    import prism.testing
    import prism.types

    homes = (prism.providers.base, prism.providers.chain, prism.providers.defaults, prism.types)
    for name in prism.providers.__all__:
        home = next(module for module in homes if hasattr(module, name))
        assert getattr(prism.providers, name) is getattr(home, name)
        if hasattr(prism.testing, name):
            assert getattr(prism.testing, name) is getattr(prism.providers, name)


def test_import_prism_loads_no_optional_extra() -> None:
    """ARCH-5 / ARCH-8: ``import prism`` (and its public namespaces) import no extra and not
    jsonschema; the provider adapters are not imported either."""
    code = (
        "import sys, prism, prism.testing, prism.providers, prism.runtime\n"
        "bad = [m for m in ('openai', 'anthropic', 'llama_cpp', 'psycopg', 'rich', 'pydantic',"
        " 'jsonschema', 'httpx', 'prism.providers.openai', 'prism.providers.anthropic',"
        " 'prism.providers.llama_cpp') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
