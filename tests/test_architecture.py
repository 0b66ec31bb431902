"""The package's shape: module sizes, import layering, private state and the documented run path.

These checks keep ``docs/architecture.md`` true: the package map there says what each module may
import, and the path of one run names the modules a reader follows, in order.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import prism

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
PACKAGE = SRC / "prism"
ARCHITECTURE = ROOT / "docs" / "architecture.md"

MAX_MODULE_LINES = 600
MAX_INIT_LINES = 200
MAX_TOP_LEVEL_NAMES = 110

# Private attributes of the standard library or of dependencies that prism code may use.
FOREIGN_PRIVATE = frozenset({"_replace", "_asdict", "_fields", "_field_defaults", "_make"})
FOREIGN_OWNERS = frozenset({"sys", "os", "asyncio", "threading", "inspect", "types", "typing"})


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def parse(name: str) -> ast.Module:
    return ast.parse(MODULES[name].read_text(encoding="utf-8"))


def imported_modules(name: str) -> set[str]:
    """Every prism module ``name`` imports, anywhere in the file (type-only and local imports too).

    Importing ``a.b.c`` runs the ``__init__`` of ``a.b`` first, so that package counts as imported
    too (the top-level ``prism`` package excepted: every module is inside it).
    """
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(parse(name)):
        targets: list[str] = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                if node.level > 1:
                    base = base[: -(node.level - 1)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            targets = [module, *(f"{module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        for target in targets:
            if target not in MODULES:
                continue
            parts = target.split(".")
            for end in range(2, len(parts) + 1):
                candidate = ".".join(parts[:end])
                if candidate in MODULES and not name.startswith(candidate + ".") and candidate != name:
                    found.add(candidate)
    return found


GRAPH = {name: imported_modules(name) for name in MODULES}


def cycles() -> Iterator[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()

    def visit(node: str) -> Iterator[list[str]]:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(GRAPH[node]):
            if nxt not in index:
                yield from visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                yield sorted(component)

    for name in sorted(GRAPH):
        if name not in index:
            yield from visit(name)


def test_no_module_is_over_600_lines() -> None:
    too_long = {
        name: lines
        for name, path in MODULES.items()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert too_long == {}


def test_no_import_cycles_including_type_only_and_local_imports() -> None:
    assert list(cycles()) == []


def test_top_level_namespace_is_a_short_table_of_contents() -> None:
    init_lines = len((PACKAGE / "__init__.py").read_text(encoding="utf-8").splitlines())
    assert init_lines <= MAX_INIT_LINES
    assert len(prism.__all__) <= MAX_TOP_LEVEL_NAMES


def owned_private_names(tree: ast.Module) -> set[str]:
    """Private attribute names a module defines: assigned on self, in slots, or in a class body."""
    owned: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            owned.add(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            owned.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    owned.add(target.id)
                    if target.id == "__slots__" and isinstance(node.value, (ast.Tuple, ast.List)):
                        owned.update(
                            elt.value
                            for elt in node.value.elts
                            if isinstance(elt, ast.Constant) and isinstance(elt.value, str)
                        )
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            owned.add(node.target.id)
    return owned


def test_no_module_reads_another_modules_private_attributes() -> None:
    offences = []
    for name in MODULES:
        tree = parse(name)
        owned = owned_private_names(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            attr = node.attr
            if not attr.startswith("_") or attr.startswith("__") or attr in FOREIGN_PRIVATE:
                continue
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in {"self", "cls", *FOREIGN_OWNERS}:
                continue
            if attr in owned:
                continue
            offences.append(f"{name}:{node.lineno} reads .{attr} of {ast.unparse(owner)}")
    assert offences == []


LOOP_NAMES = frozenset({"single-shot", "generate-validate-revise"})


def test_runtime_never_compares_a_loop_name_to_a_string() -> None:
    offences = []
    for name in MODULES:
        if name.startswith("prism.loops"):
            continue  # the loops themselves and loop resolution own the strategy names
        tree = parse(name)
        aliases = {
            target.id
            for node in tree.body
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and node.value.value in LOOP_NAMES
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for node in ast.walk(tree):
            if not isinstance(node, ast.Compare):
                continue
            parts = (node.left, *node.comparators)
            if any(
                (isinstance(part, ast.Constant) and part.value in LOOP_NAMES)
                or (isinstance(part, ast.Name) and part.id in aliases)
                for part in parts
            ):
                offences.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    assert offences == []


def documented_run_path() -> list[str]:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("## The path of one run", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\d+\.\s+`(prism[\w.]*)`", section, flags=re.MULTILINE)


def test_the_documented_run_path_has_at_most_four_modules_importing_only_downward() -> None:
    path = documented_run_path()
    assert 2 <= len(path) <= 4
    for module in path:
        assert module in MODULES, f"{module} named in docs/architecture.md does not exist"
    for position, module in enumerate(path):
        earlier = set(path[:position])
        assert not (GRAPH[module] & earlier), f"{module} imports back up the run path"


def documented_package_map() -> dict[str, list[str]]:
    """The table rows of docs/architecture.md's package map: module -> what it may import."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("## Package map", 1)[1].split("\n## ", 1)[0]
    rules: dict[str, list[str]] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`prism"):
            continue
        allowed = re.findall(r"`(prism[\w.]*)`", cells[2])
        for module in re.findall(r"`(prism[\w.]*)`", cells[0]):
            rules[module] = allowed
    return rules


def covered_by(module: str, prefixes: list[str]) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes)


def test_every_module_is_in_the_package_map_and_imports_only_what_it_may() -> None:
    rules = documented_package_map()
    offences = []
    for name, imported in GRAPH.items():
        if name == "prism":
            continue
        entry = max((key for key in rules if covered_by(name, [key])), key=len, default=None)
        if entry is None:
            offences.append(f"{name} is not in the package map")
            continue
        allowed = [*rules[entry], entry]
        for target in sorted(imported):
            if not covered_by(target, allowed) and not covered_by(target, [name]):
                offences.append(f"{name} imports {target}, which {entry} may not import")
    assert offences == []
