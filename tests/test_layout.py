"""The package's layout: no import cycles inside reslint/, and a rule declared in few places.

Every import counts, at module level or inside a function (a deferred import only hides a cycle
until the function runs); imports under `if TYPE_CHECKING:` do not, since they never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import reslint
from reslint.catalog import RULES
from reslint.rules import FACT_RULES, PROJECT_RULES

PACKAGE = Path(reslint.__file__).resolve().parent
RULE_DOCS = PACKAGE.parent / "rules"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    return skipped


def imported_modules(path: Path, modules: set[str]) -> set[str]:
    """The reslint modules `path` imports (`from reslint.x import name`: reslint.x.name if that is a
    module, else reslint.x)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = type_checking_nodes(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            found.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names)
    resolved = set()
    for target in found:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != name:
            resolved.add(target)
    return resolved


def import_graph() -> dict[str, set[str]]:
    paths = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    return {name: imported_modules(path, set(paths)) for name, path in paths.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (a list of modules, the first repeated at the end), or None."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = "open"
        stack.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                return stack[stack.index(target):] + [target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        stack.pop()
        state[module] = "done"
        return None

    for module in sorted(graph):
        if module not in state:
            cycle = visit(module)
            if cycle:
                return cycle
    return None


def test_no_import_cycles_inside_reslint():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_cycle_finder_sees_a_deferred_import_and_ignores_type_checking():
    # The finder itself: a cycle closed by a function-level import is found; one under TYPE_CHECKING is not.
    graph = import_graph()
    assert "reslint.report" in graph["reslint.runner"] and "reslint.analysis" in graph["reslint.project"]
    assert "reslint.report" not in graph["reslint.reporters.text"]  # only under TYPE_CHECKING
    assert "reslint.reporters" in graph["reslint.report"]  # Report.write's deferred import
    cycle = find_cycle({**graph, "reslint.report": graph["reslint.report"] | {"reslint.runner"}})
    assert cycle is not None and set(cycle) == {"reslint.report", "reslint.runner"}


def test_every_rule_is_declared_by_its_module_its_catalog_entry_and_its_page():
    modules = {path.stem[:5].upper(): path for path in (PACKAGE / "rules").glob("rl[0-9]*.py")}
    assert set(FACT_RULES) | set(PROJECT_RULES) == set(modules)
    assert set(modules) <= set(RULES)
    assert {path.stem for path in RULE_DOCS.glob("RL*.md")} == set(RULES)
