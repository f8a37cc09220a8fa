"""The static engine's SourceMap gives every node the place libcst's PositionProvider gives it,
and every expression the code `Module.code_for_node` gives it (a multi-line expression keeps the
indentation of its continuation lines, which code_for_node drops)."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from reslint.static.positions import SourceMap
from reslint.static.walk import parents

REPO_ROOT = Path(__file__).resolve().parent.parent

TRICKY = {
    "crlf": "import torch\r\n\r\nclass A(torch.nn.Module):\r\n    def forward(self, x):\r\n        return x + 1\r\n",
    "old mac newlines": "x = 1\ry = (x +\r     2)\r",
    "tabs and continuation": "class A:\n\tdef f(self, x):\n\t\treturn (x +\n\t\t        \\\n\t\t  1)\n",
    "unicode": "ä = 'ü'  # ö\nclass Ä:\n    def f(self, β):\n        return β * ä  # π\n",
    "decorators and comments": (
        "# header\n\n@dataclass\n# between\n@other(\n    1,\n)\nclass C:\n    # lead\n\n    x: int = 3  # t\n"
    ),
    "multi-line strings": 'def f():\n    s = """a\nb\n"""; t = f"{s!r:>{3}}"\n    return s\n',
    "no trailing newline": "class A:\n    def f(self):\n        return 1",
    "empty": "",
    "semicolons and suites": "if x: a = 1; b = 2\nelse: pass\nwhile y: break\n",
    "match and walrus": "match p:\n    case [1, *rest] if (n := len(rest)):\n        pass\n    case {'k': v}:\n        pass\n",
}


def squeezed(code: str) -> str:
    return "\n".join(line.strip() for line in code.splitlines())


def compare(module: cst.Module) -> int:
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    source_map = SourceMap(module)
    for node, code_range in expected.items():
        assert source_map.line_column(node) == (code_range.start.line, code_range.start.column), (
            type(node).__name__, module.code_for_node(node))
        if isinstance(node, cst.BaseExpression):
            assert squeezed(source_map.code(node)) == squeezed(module.code_for_node(node))
    return len(expected)


@pytest.mark.parametrize("name", sorted(TRICKY))
def test_tricky_sources_match_position_provider(name: str) -> None:
    compare(cst.parse_module(TRICKY[name]))


def test_every_node_of_the_fixtures_and_examples_matches_position_provider() -> None:
    # fixtures/hostile/ nests deeper than libcst's PositionProvider can walk on a default stack
    paths = sorted(path for path in REPO_ROOT.glob("fixtures/**/*.py")
                   if "hostile" not in path.relative_to(REPO_ROOT).parts)
    paths += sorted(REPO_ROOT.glob("examples/**/*.py"))
    checked = 0
    for path in paths:
        try:
            module = cst.parse_module(path.read_bytes())
        except (cst.ParserSyntaxError, UnicodeDecodeError):  # the RL901 fixtures
            continue
        checked += compare(module)
    assert checked > 10_000


def test_a_node_outside_the_module_has_no_place_but_has_code() -> None:
    source_map = SourceMap(cst.parse_module("x = 1\n"))
    stranger = cst.parse_expression("a + b")
    assert source_map.line_column(stranger) is None
    assert source_map.code(stranger) == "a + b"


def compare_placed_statement_by_statement(module: cst.Module, text: str) -> int:
    """A SourceMap given the text and CPython's AST places every node a statement owns as PositionProvider
    does, without generating the whole module; the other nodes (blocks, operators) still get their places."""
    import ast

    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    tree = ast.parse(text)
    placed = SourceMap(module, text, tree)
    statement_owned = _statement_owned(module, text, tree)
    owned = [node for node in expected if id(node) in statement_owned]  # `_units` maps the nodes' ids
    for node in owned:
        code_range = expected[node]
        assert placed.line_column(node) == (code_range.start.line, code_range.start.column), (
            type(node).__name__, module.code_for_node(node))
        if isinstance(node, cst.BaseExpression):
            assert squeezed(placed.code(node)) == squeezed(module.code_for_node(node))
    assert not placed.whole_module_generated
    # Told the def or class a node is written in (as the evaluator tells it), the same places.
    hinted = SourceMap(module, text, tree)
    parent = parents(module)
    for node in owned:
        within = node
        while within is not None and not isinstance(within, (cst.FunctionDef, cst.ClassDef)):
            within = parent.get(within)
        code_range = expected[node]
        assert hinted.line_column(node, within) == (code_range.start.line, code_range.start.column), (
            type(node).__name__, module.code_for_node(node))
    rest = SourceMap(module, text, tree)
    for node, code_range in expected.items():
        assert rest.line_column(node) == (code_range.start.line, code_range.start.column), type(node).__name__
    return len(owned)


def _statement_owned(module, text, tree) -> set:
    from reslint.static.positions import _units

    source_map = SourceMap(module, text, tree)
    return set(_units(module, source_map._anchors)) if source_map._anchors is not None else set()


@pytest.mark.parametrize("name", sorted(TRICKY))
def test_tricky_sources_placed_statement_by_statement(name: str) -> None:
    compare_placed_statement_by_statement(cst.parse_module(TRICKY[name]), TRICKY[name])


def test_every_fixture_placed_statement_by_statement_matches_position_provider() -> None:
    paths = sorted(path for path in REPO_ROOT.glob("fixtures/**/*.py")
                   if "hostile" not in path.relative_to(REPO_ROOT).parts)
    paths += sorted(REPO_ROOT.glob("examples/**/*.py"))
    checked = 0
    for path in paths:
        try:
            text = path.read_bytes().decode("utf-8")
            module = cst.parse_module(text)
        except (cst.ParserSyntaxError, UnicodeDecodeError, SyntaxError):
            continue
        try:
            compile(text, str(path), "exec", dont_inherit=True)
        except SyntaxError:
            continue
        checked += compare_placed_statement_by_statement(module, text)
    assert checked > 10_000


TWO_CLASSES = """\
import torch


class Attention(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.proj = torch.nn.Linear(d, d)

    def forward(self, x):
        return self.proj(x) * 2


class Block(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.attention = Attention(d)

    def forward(self, x):
        h = self.attention(x)
        return x + h
"""


def test_a_node_placed_within_its_function_walks_only_that_functions_statements() -> None:
    import ast

    module = cst.parse_module(TWO_CLASSES)
    attention, block = [statement for statement in module.body if isinstance(statement, cst.ClassDef)]
    forward = block.body.body[1]
    add = forward.body.body[1].body[0].value  # `x + h`
    placed = SourceMap(module, TWO_CLASSES, ast.parse(TWO_CLASSES))
    assert placed.line_column(add, forward) == (20, 15)
    assert placed.code(add, forward) == "x + h"
    # Block's forward was walked, not Attention (the whole module is walked only for a node the hint misses)
    assert not placed._all_walked
    assert id(forward.body.body[0]) in placed._unit_of
    assert id(attention.body.body[0]) not in placed._unit_of
    # A def or class is its own statement: nothing walked for it
    assert placed.line_column(attention, forward) == (4, 0)
    assert not placed._all_walked


def test_a_node_outside_the_function_named_is_still_placed() -> None:
    import ast

    module = cst.parse_module(TWO_CLASSES)
    attention, block = [statement for statement in module.body if isinstance(statement, cst.ClassDef)]
    proj = attention.body.body[0].body.body[1].body[0].value  # `torch.nn.Linear(d, d)` in Attention.__init__
    placed = SourceMap(module, TWO_CLASSES, ast.parse(TWO_CLASSES))
    assert placed.line_column(proj, block.body.body[1]) == (7, 20)
    assert placed._all_walked


def compare_ranges(module: cst.Module) -> int:
    """CodeRanges (the fixers' positions) gives PositionProvider's start and end of every node, in its order."""
    from reslint.static.positions import CodeRanges

    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    ranges = CodeRanges(module)
    assert list(ranges) == list(expected)
    for node, code_range in expected.items():
        assert ranges.line_column(ranges.start_offset(node)) == (code_range.start.line, code_range.start.column)
        assert ranges.line_column(ranges.end_offset(node)) == (code_range.end.line, code_range.end.column), (
            type(node).__name__, module.code_for_node(node))
    return len(expected)


@pytest.mark.parametrize("name", sorted(TRICKY))
def test_tricky_sources_ranges_match_position_provider(name: str) -> None:
    compare_ranges(cst.parse_module(TRICKY[name]))


def test_every_fixture_range_matches_position_provider() -> None:
    paths = sorted(path for path in REPO_ROOT.glob("fixtures/**/*.py")
                   if "hostile" not in path.relative_to(REPO_ROOT).parts)
    paths += sorted(REPO_ROOT.glob("examples/**/*.py"))
    checked = 0
    for path in paths:
        try:
            module = cst.parse_module(path.read_bytes())
        except (cst.ParserSyntaxError, UnicodeDecodeError):
            continue
        checked += compare_ranges(module)
    assert checked > 10_000
