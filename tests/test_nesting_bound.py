"""The nesting check walks only the statements (and headers of compound statements) whose source could hold a
node past MAX_NESTING (reslint.analysis.levels_within, header_levels): its RL901 must stay what the walk of the whole tree says, on hostile
files just past the limit, and it must stay silent just under it."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from reslint.analysis import (BLOCK_FIELDS, MAX_NESTING, analyze_file, header_levels, levels_within, nesting,
                              source_line_starts)
from reslint.settings import Settings

sys.path.insert(0, str(Path(__file__).parent))
from cli_support import repository_sources  # noqa: E402
from test_static_speed import sample, whole_walk  # noqa: E402

STATIC = Settings(static=True)


def parsed_sample(paths=None):
    """(path, text, CPython's tree) of each file of `paths` (test_static_speed's sample) that parses."""
    for path in sample() if paths is None else paths:
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            yield path, text, ast.parse(text)
        except (SyntaxError, ValueError):
            continue


DEEP_EXPRESSIONS = {
    "unary": lambda n: "-" * n + "y",
    "not": lambda n: "not " * n + "y",
    "binop-chain": lambda n: "+".join(["a"] * n),  # left-deep BinOps
    "power": lambda n: "y" + " ** 2" * n,
    "subscripts": lambda n: "y" + "[0]" * n,
    "attributes": lambda n: "y" + ".a" * n,
    "calls": lambda n: "f" + "()" * n,
    "lambdas": lambda n: "lambda: " * n + "y",
    "conditionals": lambda n: "a if b else " * n + "y",
    "parentheses": lambda n: "(" * 150 + "-" * n + "y" + ")" * 150,
    "lists-dicts-calls": lambda n: "[{1: f(" * 40 + "-" * n + "y" + ")}]" * 40,
    "f-string": lambda n: 'f"{' + "-" * n + 'y}"',
}


def module(kind: str, expression: str) -> str:
    if kind == "statement":
        return f"import torch\n\nx = {expression}\n"
    if kind == "expression":  # the tightest: an `Expr` takes no character of its own
        return f"import torch\n{expression}\n"
    if kind == "blocks":  # a deep expression inside deep blocks
        blocks = "".join("    " * level + f"if c{level}:\n" for level in range(90))
        return "import torch\n" + blocks + "    " * 90 + f"x = {expression}\n"
    if kind == "decorator":
        return f"import torch\n\n\n@decorate({expression})\ndef f():\n    pass\n"
    if kind == "one-line":  # many statements on one very long line
        return "import torch\n" + "a = 1; " * 3_000 + f"x = {expression}; b = 2\n"
    if kind == "signature":  # headers: what precedes a compound statement's first block
        return f"import torch\n\n\ndef f(a: int = {expression}) -> None:\n    return a\n"
    if kind == "condition":
        return f"import torch\nif {expression}:\n    x = 1\nelse:\n    x = 2\n"
    if kind == "loop":
        return f"import torch\nfor x in {expression}:\n    pass\nelse:\n    y = 2\n"
    if kind == "with":
        return f"import torch\nwith {expression} as y: pass\n"
    if kind == "bases":
        return f"import torch\n\n\nclass A({expression}):\n    x = 1\n"
    if kind == "else":  # the other blocks stay walked under a header too short to matter
        return f"import torch\nif c:\n    pass\nelse:\n    x = {expression}\n"
    if kind == "handler":
        return f"import torch\ntry:\n    pass\nexcept ValueError:\n    x = {expression}\n"
    if kind == "finally":
        return f"import torch\ntry:\n    pass\nfinally:\n    x = {expression}\n"
    if kind == "class-body":
        return f"import torch\n\n\nclass A:\n    def f(self):\n        return {expression}\n\n    x = 1\n"
    raise AssertionError(kind)


def past_the_limit(make, kind: str) -> int:
    """The least n for which the module's whole walk is deeper than MAX_NESTING."""
    low, high = 1, MAX_NESTING + 20  # every expression above nests at least one level per n
    while low < high:
        middle = (low + high) // 2
        if whole_walk(ast.parse(module(kind, make(middle))))[0] > MAX_NESTING:
            high = middle
        else:
            low = middle + 1
    return low


KINDS = ("statement", "expression", "blocks", "decorator", "one-line", "signature", "condition", "loop", "with", "bases",
         "else", "handler", "finally", "class-body")
CASES = [(name, kind) for name in DEEP_EXPRESSIONS for kind in KINDS]


@pytest.mark.parametrize(("name", "kind"), CASES, ids=[f"{name}-{kind}" for name, kind in CASES])
def test_just_past_the_limit_is_the_whole_walks_rl901_and_just_under_it_is_silent(name, kind):
    make = DEEP_EXPRESSIONS[name]
    n = past_the_limit(make, kind)
    past, under = module(kind, make(n)), module(kind, make(n - 1))
    depth, line, column = whole_walk(ast.parse(past))
    assert depth == MAX_NESTING + 1 or name in ("lambdas", "conditionals", "f-string")  # a step of two levels
    assert nesting(ast.parse(past), past, MAX_NESTING) == (depth, line, column)
    assert nesting(ast.parse(under), under, MAX_NESTING)[0] <= MAX_NESTING == whole_walk(ast.parse(under))[0] \
        or name in ("lambdas", "conditionals", "f-string")
    result = analyze_file("hostile.py", past.encode(), STATIC)
    assert [(f.code, f.line, f.column, f.message) for f in result.findings] == [
        ("RL901", line, column, f"cannot analyse: code nested {depth} levels deep (the limit is {MAX_NESTING})")]


def test_rl901_messages_of_hostile_files_are_exact():
    # Module, Assign, 997 UnaryOps, Name, Load: 1001 levels, placed at the Name (a Load has no place)
    unary = "import torch\nx = " + "-" * 997 + "y\n"
    decorated = "import torch\n\n\n@d(" + "-" * 997 + "y)\ndef f():\n    pass\n"
    lines = "import torch\n" + "a = 1; " * 3_000 + "x = " + "y" + "[0]" * 997 + "\n"
    expected = [
        (unary, ("RL901", 2, 1002, f"cannot analyse: code nested 1001 levels deep (the limit is {MAX_NESTING})")),
        (decorated, ("RL901", 4, 1001, f"cannot analyse: code nested 1002 levels deep (the limit is {MAX_NESTING})")),
        (lines, ("RL901", 2, 21005, f"cannot analyse: code nested 1001 levels deep (the limit is {MAX_NESTING})")),
        ("import torch\nx = " + "-" * 996 + "y\n", None),  # 1000 levels: analysed
    ]
    for source, finding in expected:
        found = [(f.code, f.line, f.column, f.message) for f in analyze_file("h.py", source.encode(), STATIC).findings
                 if f.code == "RL901"]
        assert found == ([finding] if finding else []), source[:40]


def test_the_bound_holds_on_every_statement_of_real_code():
    checked = 0
    for path, text, tree in parsed_sample():
        starts = source_line_starts(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.stmt):
                assert whole_walk(node)[0] - 1 <= levels_within(node, starts), (str(path), node.lineno)
                header = [child for name in node._fields if name not in BLOCK_FIELDS
                          for child in (lambda value: value if isinstance(value, list) else [value])(getattr(node, name))
                          if isinstance(child, ast.AST)]
                assert max((whole_walk(child)[0] for child in header), default=0) <= header_levels(node, starts), \
                    (str(path), node.lineno)
                checked += 1
    assert checked > 5_000


@pytest.mark.parametrize("limit", [3, 6, 10, 16])
def test_with_small_limits_real_code_gets_the_whole_walks_answer_when_past_them(limit):
    # Every 9th modeling file: about one in five nests past 16, so a new transformers release that shifts the
    # sample still leaves several past the largest limit (every 45th left two in 5.25).
    past = 0
    for path, text, tree in parsed_sample(repository_sources(("modeling_*.py", 9))):
        exact = whole_walk(tree)
        bounded = nesting(tree, text, limit)
        if exact[0] > limit:
            assert bounded == exact, str(path)
            past += 1
        else:
            assert bounded[0] <= limit
    assert past >= 4


def test_lines_are_counted_as_cpythons_parser_counts_them():
    # A lone "\r" ends a line for CPython: counted as part of the line, the deep first line of the statement
    # would be taken for the short lines after it.
    text = "a\r" + "x = " + "-" * 997 + "y + (\n0)\n" + "z\n" * 5
    tree = ast.parse(text)
    assert [node.lineno for node in tree.body][:2] == [1, 2]
    assert nesting(tree, text, MAX_NESTING) == whole_walk(tree) == (1002, 2, 1002)
