"""The static engine's fast walk (reslint.static.walk) reaches every code node libcst's own visit
reaches: every name, attribute, call, subscript, parameter, lambda and comprehension of the
fixtures, the examples and a sample of transformers' model files, and it honours a visitor's
`False` (skip the children) as libcst does."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import libcst as cst
import pytest

from cli_support import repository_sources
from reslint.static.walk import walk

REPO_ROOT = Path(__file__).resolve().parent.parent
KINDS = ("Name", "Attribute", "Call", "Subscript", "Param", "Lambda", "ListComp", "GeneratorExp", "Integer",
         "SimpleString", "FormattedStringExpression", "Decorator", "Annotation", "Arg", "NamedExpr", "Await")


class Recorder(cst.CSTVisitor):
    """Counts the nodes of KINDS it is shown (the same objects: libcst's visit shows a visitor the tree's own nodes)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: Counter = Counter()

    def on_visit(self, node: cst.CSTNode) -> bool:
        if type(node).__name__ in KINDS:
            self.seen[type(node).__name__, id(node)] += 1
        return True


class WalkRecorder(Recorder):
    """The same, through `visit_<Kind>` methods, which is what `walk` calls."""


for _kind in KINDS:
    setattr(WalkRecorder, f"visit_{_kind}", lambda self, node: Recorder.on_visit(self, node))


class SkipsFunctions(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)


def sources() -> list[Path]:
    return repository_sources(("modeling_*.py", 60))


def parsed(path: Path) -> cst.Module | None:
    try:
        return cst.parse_module(path.read_bytes())
    except (cst.ParserSyntaxError, UnicodeDecodeError):  # the RL901 fixtures
        return None


def test_walk_reaches_the_code_nodes_libcst_visits_in_every_sample_file() -> None:
    compared = 0
    for path in sources():
        module = parsed(path)
        if module is None:
            continue
        expected, walked = Recorder(), WalkRecorder()
        module.visit(expected)
        walk(module, walked)
        assert walked.seen == expected.seen, path
        compared += sum(expected.seen.values())
    assert compared > 20_000


@pytest.mark.parametrize("code", [
    "def f(a):\n    return b\nclass C:\n    def g(self):\n        return d\n    e = 1\n",
    "@deco(x)\nasync def f(a: T = y) -> R:\n    await z\nlambda q: w\n",
])
def test_a_visit_returning_false_skips_the_children_as_in_libcst(code: str) -> None:
    module = cst.parse_module(code)
    expected, walked = SkipsFunctions(), SkipsFunctions()
    module.visit(expected)
    walk(module, walked)
    assert walked.names == expected.names
    assert "b" not in walked.names


def test_parents_match_libcst_parent_node_provider_on_every_node_of_the_sample() -> None:
    from libcst.metadata import MetadataWrapper, ParentNodeProvider

    from reslint.static.walk import parents

    compared = 0
    for path in sources():
        module = parsed(path)
        if module is None:
            continue
        expected = dict(MetadataWrapper(module, unsafe_skip_copy=True).resolve(ParentNodeProvider))
        assert parents(module) == expected, path
        compared += len(expected)
    assert compared > 100_000


# ----- the nodes the index gathers of each class body once, for every look at them -----

class KindCollector(cst.CSTVisitor):
    """The nodes of each kind under a root, as libcst's own visit shows them (ids: the tree's own nodes)."""

    def __init__(self) -> None:
        super().__init__()
        self.found: dict[str, set[int]] = {"Name": set(), "Call": set(), "Attribute": set(), "Assign": set()}

    def on_visit(self, node: cst.CSTNode) -> bool:
        kind = type(node).__name__
        if kind in self.found:
            self.found[kind].add(id(node))
        return True


def visited(root: cst.CSTNode) -> dict[str, set[int]]:
    collector = KindCollector()
    root.visit(collector)
    return collector.found


def ids(nodes) -> set[int]:
    listed = [id(node) for node in nodes]
    assert len(listed) == len(set(listed))  # each node gathered once
    return set(listed)


def test_the_gathered_body_nodes_are_the_nodes_libcst_visits_in_each_class_and_constructor() -> None:
    from reslint.static.index import FileIndex

    compared = 0
    for path in sources():
        module = parsed(path)
        if module is None:
            continue
        index = FileIndex(module)
        for info in index.classes.values():
            nodes, body = index.body_nodes(info), visited(info.node.body)
            assert (ids(nodes.names), ids(nodes.calls), ids(nodes.attributes)) == (
                body["Name"], body["Call"], body["Attribute"]), (path, info.name)
            init = info.methods.get("__init__")
            in_init = visited(init.body) if init is not None else {"Call": set(), "Assign": set()}
            assert (ids(nodes.init_calls), ids(nodes.init_assignments)) == (in_init["Call"], in_init["Assign"]), (
                path, info.name)
            compared += len(body["Name"]) + len(in_init["Assign"])
    assert compared > 20_000


ARGUMENT_CALLS = '''
import argparse

parser = argparse.ArgumentParser()
parser.add_argument("--top", default=1)

def options(p):
    p.add_argument("--in-function", default=2)
    class Local:
        def __init__(self):
            p.add_argument("--in-local-class", default=3)

class Cli:
    def __init__(self, p):
        p.add_argument("--in-init", default=4)

    def more(self, p):
        p.add_argument("--in-method", default=5)

@register(parser.add_argument("--in-decorator", default=6))
class Shadowed:
    def build(self, p): p.add_argument("--in-a-shadowed-class", default=7)

class Shadowed(Base):
    pass

if __name__ == "__main__":
    parser.add_argument("--under-main", default=8)
'''


def test_argument_calls_are_every_add_argument_call_of_the_module() -> None:
    from reslint.static.index import FileIndex

    sources_with_calls = [ARGUMENT_CALLS.encode(), *(path.read_bytes() for path in REPO_ROOT.glob("fixtures/**/*.py")
                                                     if b"add_argument" in path.read_bytes())]
    assert len(sources_with_calls) >= 3
    for source in sources_with_calls:
        module = cst.parse_module(source)
        calls = _CallList()
        module.visit(calls)
        expected = {id(node) for node in calls.found
                    if isinstance(node.func, cst.Attribute) and node.func.attr.value == "add_argument"}
        assert ids(FileIndex(module).argument_calls()) == expected
    index = FileIndex(cst.parse_module(ARGUMENT_CALLS))
    assert sorted(index.argument_defaults()) == ["in_a_shadowed_class", "in_decorator", "in_function", "in_init",
                                                 "in_local_class", "in_method", "top", "under_main"]


class _CallList(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[cst.Call] = []

    def visit_Call(self, node: cst.Call) -> None:
        self.found.append(node)


def test_walk_with_parents_lists_ast_walks_nodes_and_the_parents_iter_child_nodes_gives() -> None:
    import ast

    from reslint.static.construction_sites import walk_with_parents

    compared = 0
    for path in sources():
        try:
            tree = ast.parse(path.read_bytes())
        except (SyntaxError, ValueError):  # the RL901 fixtures
            continue
        expected_parents = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                expected_parents[child] = node
        nodes, parents = walk_with_parents(tree)
        assert [id(node) for node in nodes] == [id(node) for node in ast.walk(tree)], path
        assert list(parents.items()) == list(expected_parents.items()), path
        compared += len(nodes)
    assert compared > 100_000


def test_a_leaf_has_no_field_to_look_into() -> None:
    """The walks skip the text fields of names, numbers and strings (a `getattr` per leaf for no node)."""
    from reslint.static.walk import child_fields

    assert [child_fields(kind) for kind in (cst.Name, cst.Integer, cst.SimpleString)] == [(), (), ()]
    assert child_fields(cst.Attribute) == ("value", "attr")


class _Appender:
    def __init__(self, kinds: tuple[type, ...], skipped: cst.CSTNode | None) -> None:
        self.found: dict[type, list] = {kind: [] for kind in kinds}
        self.skipped = skipped
        for kind in kinds:
            setattr(self, f"visit_{kind.__name__}", self.found[kind].append)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> bool:
        return node is not self.skipped


def test_gather_lists_the_nodes_walk_shows_in_walks_order_and_skips_the_block_it_is_told() -> None:
    """`gather` is `walk` with list appends for visit methods: the same nodes in the same order (the engine's
    answers may follow the order), the skipped block (a constructor's body) and what is under it left out."""
    from reslint.static.walk import gather

    compared = 0
    for path in sources()[:20]:
        module = parsed(path)
        if module is None:
            continue
        for statement in module.body:
            if not isinstance(statement, cst.ClassDef):
                continue
            init = next((item for item in statement.body.body if isinstance(item, cst.FunctionDef)
                         and item.name.value == "__init__"), None)
            skipped = init.body if init is not None else None
            kinds = (cst.Name, cst.Call, cst.Attribute, cst.Assign)
            walked = _Appender(kinds, skipped)
            walk(statement.body, walked)
            found: dict[type, list] = {kind: [] for kind in kinds}
            gather(statement.body, found, skipped=skipped)
            assert [list(map(id, found[kind])) for kind in kinds] == [list(map(id, walked.found[kind])) for kind in kinds]
            if init is not None:
                inside = {kind: [] for kind in kinds}
                gather(init.body, inside)
                assert not {id(node) for nodes in found.values() for node in nodes} & {
                    id(node) for nodes in inside.values() for node in nodes}
                compared += sum(map(len, inside.values()))
    assert compared > 1_000
