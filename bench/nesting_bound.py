"""Checks the bounds the nesting check skips statements and headers by (reslint.analysis.levels_within,
header_levels) on real code.

    python bench/nesting_bound.py [DIR ...]

For every statement of every Python file under the directories (by default the standard library and
transformers' models/), the levels of its AST subtree below it must not exceed the characters from the start
of its first line to its end by more than LEVELS_BEYOND_CHARACTERS, nor the levels under a compound statement
outside its blocks the characters up to its first block's first statement. Prints the largest excesses seen (and
where), and the share of statements the check would skip at their depth. Exit status 1 when a bound fails.
"""

from __future__ import annotations

import ast
import sys
import sysconfig
import warnings
from pathlib import Path

from reslint.analysis import (BLOCK_FIELDS, LEVELS_BEYOND_CHARACTERS, MAX_NESTING, header_levels, levels_within,
                              source_line_starts)

sys.setrecursionlimit(100_000)


def default_trees() -> list[Path]:
    trees = [Path(sysconfig.get_paths()["stdlib"])]
    try:
        import transformers
    except ImportError:
        return trees
    return trees + [Path(transformers.__file__).parent / "models"]


def heights(tree) -> dict[int, tuple[int, int]]:
    """id(node) -> (the levels of the node's subtree below it, those outside its blocks), for every statement."""
    found: dict[int, tuple[int, int]] = {}

    def height(node) -> int:
        below = header = 0
        for name in node._fields:
            value = getattr(node, name, None)
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, ast.AST):
                    levels = height(child) + 1
                    below = max(below, levels)
                    if name not in BLOCK_FIELDS:
                        header = max(header, levels)
        if isinstance(node, ast.stmt):
            found[id(node)] = below, header
        return below

    height(tree)
    return found


def statements_with_depth(tree):
    pending = [(tree, 1)]
    while pending:
        node, depth = pending.pop()
        if isinstance(node, ast.stmt):
            yield node, depth
        pending.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


def check(paths) -> tuple[int, int, int, tuple, int, tuple]:
    """(statements, statements skipped at their depth, largest excess, where, largest excess of a header, where)."""
    statements = skipped = 0
    worst, where = -sys.maxsize, ()
    worst_header, where_header = -sys.maxsize, ()
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(text)
        except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError):
            continue
        starts = source_line_starts(text)
        below = heights(tree)
        for node, depth in statements_with_depth(tree):
            levels, header = below[id(node)]
            characters = levels_within(node, starts) - LEVELS_BEYOND_CHARACTERS
            statements += 1
            skipped += depth + characters + LEVELS_BEYOND_CHARACTERS <= MAX_NESTING
            if levels - characters > worst:
                worst, where = levels - characters, (str(path), node.lineno, type(node).__name__, levels, characters)
            bound = header_levels(node, starts)
            if bound < sys.maxsize and header - (bound - LEVELS_BEYOND_CHARACTERS) > worst_header:
                worst_header = header - (bound - LEVELS_BEYOND_CHARACTERS)
                where_header = (str(path), node.lineno, type(node).__name__, header, bound - LEVELS_BEYOND_CHARACTERS)
    return statements, skipped, worst, where, worst_header, where_header


def main() -> int:
    trees = [Path(arg) for arg in sys.argv[1:]] or default_trees()
    failed = False
    for tree in trees:
        statements, skipped, worst, where, worst_header, where_header = check(sorted(tree.rglob("*.py")))
        print(f"{tree}: {statements} statements, {skipped / max(statements, 1):.1%} skipped at their depth; "
              f"largest excess of levels over characters {worst} (allowed {LEVELS_BEYOND_CHARACTERS}) at {where}; "
              f"of a header {worst_header} at {where_header}")
        failed |= max(worst, worst_header) > LEVELS_BEYOND_CHARACTERS
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
