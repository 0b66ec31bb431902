"""The package's shape: module sizes, import layering, private state and the documented run path.

These checks keep ``docs/architecture.md`` true: the package map there says what each module may
import, and the path of one run names the modules a reader follows, in order.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import prism
from prism._moved import MOVED

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
PACKAGE = SRC / "prism"
ARCHITECTURE = ROOT / "docs" / "architecture.md"

MAX_MODULE_LINES = 1000
EXPLAINED_MODULE_LINES = 800
SMALL_MODULE_LINES = 150
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


def line_count(name: str) -> int:
    return len(MODULES[name].read_text(encoding="utf-8").splitlines())


def test_one_concept_per_module_no_module_over_1000_lines() -> None:
    """ARCH-6 as revised: the rule is one concept per module, not a line wall. No module is over
    1,000 lines, and one over 800 opens its docstring with why it is one concept."""
    too_long = {name: n for name in MODULES if (n := line_count(name)) > MAX_MODULE_LINES}
    assert too_long == {}
    unexplained = []
    for name in MODULES:
        if line_count(name) <= EXPLAINED_MODULE_LINES:
            continue
        doc = ast.get_docstring(parse(name)) or ""
        first_paragraph = doc.split("\n\n", 1)[0]
        if "one concept" not in first_paragraph:
            unexplained.append(name)
    assert unexplained == []


def documented_small_modules() -> dict[str, str]:
    """The table of docs/architecture.md's "Small modules": module -> the concept it holds."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("## Small modules", 1)[1].split("\n## ", 1)[0]
    listed: dict[str, str] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`prism"):
            listed[cells[0].strip("`")] = cells[1]
    return listed


def importers_of(name: str) -> set[str]:
    return {other for other, imported in GRAPH.items() if name in imported}


def test_no_small_private_module_has_a_single_importer_unless_listed() -> None:
    """A private module under 150 lines whose only importer is another module (not its own
    package's ``__init__``) is merged into that importer, unless the page lists its concept."""
    listed = documented_small_modules()
    for module, concept in listed.items():
        assert module in MODULES, f"{module} is listed in docs/architecture.md but does not exist"
        assert concept, f"{module} is listed without the concept it holds"
    fragments = []
    for name, path in MODULES.items():
        if path.name == "__init__.py" or not name.rpartition(".")[2].startswith("_"):
            continue
        if line_count(name) >= SMALL_MODULE_LINES or name in listed:
            continue
        importers = importers_of(name)
        package = name.rpartition(".")[0]
        if len(importers) == 1 and importers != {package}:
            fragments.append(f"{name} ({line_count(name)} lines) <- {sorted(importers)[0]}")
    assert fragments == []


def in_room(name: str, room: str) -> bool:
    return name == room or name.startswith(room + ".")


def test_the_run_path_never_imports_durable_runs_or_agents() -> None:
    """``runtime/run`` opens one door to durable runs (``prism.runtime.run.seam``) and never
    imports ``runtime/durable`` or ``runtime/agents``; durable runs never import the agents."""
    offences = []
    for name, imported in GRAPH.items():
        for target in imported:
            if in_room(name, "prism.runtime.run") and (
                in_room(target, "prism.runtime.durable") or in_room(target, "prism.runtime.agents")
            ):
                offences.append(f"{name} imports {target}")
            if in_room(name, "prism.runtime.durable") and in_room(target, "prism.runtime.agents"):
                offences.append(f"{name} imports {target}")
    assert offences == []


def test_stores_and_testing_do_not_import_the_runtime() -> None:
    offences = [
        f"{name} imports {target}"
        for name, imported in GRAPH.items()
        if in_room(name, "prism.stores") or in_room(name, "prism.testing")
        for target in imported
        if in_room(target, "prism.runtime")
    ]
    assert offences == []


def test_nothing_in_the_package_imports_an_earlier_runtime_path() -> None:
    """The earlier paths (``prism.runtime.agent``, ``.session``, …) are for host code; prism's
    own modules import the rooms."""
    aliases = {
        name
        for name, path in MODULES.items()
        if name.startswith("prism.runtime.")
        and name.count(".") == 2
        and "sys.modules[__name__]" in path.read_text(encoding="utf-8")
    }
    assert aliases, "the earlier runtime paths are modules that alias their new home"
    offences = [
        f"{name} imports {target}"
        for name, imported in GRAPH.items()
        for target in imported & aliases
        if name not in aliases
    ]
    assert offences == []


_DOTTED = re.compile(r"(?<![\w./\"'-])(prism(?:\.[A-Za-z_][A-Za-z0-9_]*)+)(?![\w\"'-])")


def resolves(dotted: str) -> bool:
    """Whether ``dotted`` names a prism module, or an attribute defined in one (a top-level name
    of ``prism``, or one that left it and names its new module, counts)."""
    if dotted in MODULES or dotted.removeprefix("prism.") in (*prism.__all__, *MOVED):
        return True
    module, _, attribute = dotted.rpartition(".")
    while module:
        if module in MODULES:
            tree = parse(module)
            head = attribute.split(".", 1)[0]
            return head in owned_private_names(tree) or head in imported_names(tree)
        module, _, rest = module.rpartition(".")
        attribute = f"{rest}.{attribute}"
    return False


def imported_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def prose(name: str) -> Iterator[str]:
    """The docstrings and comments of module ``name``."""
    tree = parse(name)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc:
                yield doc
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            if isinstance(node.value.value, str):  # attribute docstrings
                yield node.value.value
    source = MODULES[name].read_text(encoding="utf-8")
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.string


def test_every_dotted_prism_name_in_docstrings_and_comments_exists() -> None:
    """A docstring or comment that names ``prism.x.y`` names a module or an attribute that
    exists, so the text cannot point at a module that moved or never was."""
    stale = set()
    for name in MODULES:
        for found in (hit for text in prose(name) for hit in _DOTTED.findall(text)):
            dotted = found.rstrip(".")
            if ".".join(dotted.split(".")[:2]) not in MODULES and dotted.count(".") > 1:
                continue  # not a module path: a namespace, a step or an attribute name
            if dotted.count(".") == 1 and dotted not in MODULES and not resolves(dotted):
                continue  # e.g. ``prism.run_id``, a span attribute
                stale.add(f"{name}: {dotted}")
    assert sorted(stale) == []


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
