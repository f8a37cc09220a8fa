"""The static engine's fast walk (reslint.static.walk) reaches every code node libcst's own visit
reaches: every name, attribute, call, subscript, parameter, lambda and comprehension of the
fixtures, the examples and a sample of transformers' model files, and it honours a visitor's
`False` (skip the children) as libcst does."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import libcst as cst
import pytest

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
    paths = sorted(path for path in REPO_ROOT.glob("fixtures/**/*.py") if "hostile" not in path.parts)
    paths += sorted(REPO_ROOT.glob("examples/**/*.py"))
    try:
        import transformers
    except ImportError:
        return paths
    models = sorted(Path(transformers.__file__).parent.glob("models/*/modeling_*.py"))
    return paths + models[::60]


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
