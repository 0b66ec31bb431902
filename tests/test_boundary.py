"""The host-domain-free boundary (ARCH-7, ARCH-5).

1. Every import in ``src/prism`` is the standard library, ``prism`` itself, or a package declared
   by the distribution (a core dependency or a runtime extra; the ``dev`` extra does not count).
2. No field or member of the ``Artifact*``, ``AgentLoop*`` and ``LoopContext`` contracts (and of the
   artifact events and loop options built on them) contains ``workflow``, ``node`` or ``step``.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.metadata
import re
import sys
import tomllib
import typing
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "prism"
FORBIDDEN = re.compile(r"workflow|node|step", re.IGNORECASE)


# ----------------------------------------------------------------------------- imports


def _declared_distributions() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    requirements = list(project.get("dependencies", []))
    for extra, reqs in project.get("optional-dependencies", {}).items():
        if extra != "dev":
            requirements += reqs
    names = set()
    for req in requirements:
        match = re.match(r"[A-Za-z0-9._-]+", req)
        assert match, req
        names.add(_normalise(match.group(0)))
    return names


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# Imported by prism without being declared, each with its reason.
UNDECLARED_IMPORTS = {
    # prism.evals.pytest_cases builds pytest params; it is called only by a test module that
    # pytest is collecting, so pytest is there whenever it runs (no extra installs it).
    "pytest",
}


def _allowed_top_level_modules() -> set[str]:
    declared = _declared_distributions()
    allowed = {"prism"} | set(sys.stdlib_module_names) | UNDECLARED_IMPORTS
    # installed declared distributions: their real top-level import names
    for module, dists in importlib.metadata.packages_distributions().items():
        if any(_normalise(d) in declared for d in dists):
            allowed.add(module)
    # declared but not installed here: the conventional import name
    allowed |= {d.replace("-", "_") for d in declared}
    return allowed


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text("utf-8"), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module.split(".")[0]))
        elif isinstance(node, ast.Call) and _is_dynamic_import(node):
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                found.append((node.lineno, arg.value.split(".")[0]))
    return found


def _is_dynamic_import(node: ast.Call) -> bool:
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return name in {"import_module", "__import__"} and bool(node.args)


def test_arch7_source_imports_only_stdlib_prism_and_declared_packages() -> None:
    allowed = _allowed_top_level_modules()
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {module}"
        for path in sorted(SRC.rglob("*.py"))
        for line, module in _imports(path)
        if module not in allowed
    ]
    assert offenders == []


def test_arch7_import_scan_can_fail() -> None:
    """The scanner itself flags an undeclared host package."""
    allowed = _allowed_top_level_modules()
    assert "acme_workflows" not in allowed
    assert "numpy" not in allowed or "numpy" in _declared_distributions()


# ----------------------------------------------------------------------------- field names


def _member_names(obj: object) -> set[str]:
    """Dataclass fields, Protocol/TypedDict members and public attributes of a contract."""
    names: set[str] = set()
    if dataclasses.is_dataclass(obj):
        names |= {f.name for f in dataclasses.fields(obj)}
    if isinstance(obj, type):
        for klass in obj.__mro__:
            if klass in (object, typing.Generic) or klass.__module__ in ("typing", "builtins"):
                continue
            names |= set(getattr(klass, "__annotations__", {}))
            names |= {n for n in vars(klass) if not n.startswith("_")}
    return names


def _contracts() -> dict[str, object]:
    found: dict[str, object] = {}
    for module_name in ("prism.loops.contracts", "prism.events", "prism.loops.gvr", "prism.artifacts"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # pragma: no cover - a module still being written
            continue
        for name in getattr(module, "__all__", []):
            if name.startswith(("Artifact", "AgentLoop", "LoopContext", "DurableLoop")) or name in {
                "SingleShotLoopOptions",
                "GenerateValidateReviseLoopOptions",
                "GenerateValidateReviseLoop",
            }:
                found[f"{module_name}.{name}"] = getattr(module, name)
    return found


def test_arch7_contracts_are_present() -> None:
    names = {key.rsplit(".", 1)[1] for key in _contracts()}
    assert {
        "ArtifactError",
        "ArtifactValidation",
        "ArtifactContext",
        "ArtifactParseResult",
        "ArtifactParser",
        "ArtifactValidator",
        "ArtifactRepairer",
        "AgentLoopStrategy",
        "AgentLoopOptions",
        "LoopContext",
    } <= names


@pytest.mark.parametrize("qualname", sorted(_contracts()))
def test_arch7_no_domain_vocabulary_in_contract_members(qualname: str) -> None:
    obj = _contracts()[qualname]
    members = _member_names(obj)
    assert not [m for m in members if FORBIDDEN.search(m)], qualname
    assert not FORBIDDEN.search(qualname.rsplit(".", 1)[1])


def test_arch7_member_check_can_fail() -> None:
    @dataclasses.dataclass
    class ArtifactBad:
        workflow_id: str
        next_step: int

    assert {m for m in _member_names(ArtifactBad) if FORBIDDEN.search(m)} == {
        "workflow_id",
        "next_step",
    }
