"""libcst's parse without its validation of the nodes its own parser makes.

Every libcst node validates itself when it is made (`CSTNode.__post_init__` calls `_validate`: a whitespace
node matches its text against a regular expression, a name checks it is an identifier, parentheses that
they pair). For a node the parser makes from source that parsed, the checks cannot fail; they were 6 to 11 %
of the parse of transformers' model files (libcst's own comment on `__post_init__` suggests skipping them
when parsing a file). Here they are skipped for the thread that is parsing, and only while it parses: a
node made anywhere else, by a fix or by another library in the same process, is validated as libcst
validates it.

In a process of reslint's own (the console script, a pool worker: `reslint.runner.own_process`) no other
thread makes libcst nodes while one parses (the main thread waits for the deep-stack thread that parses), so
there the check per node is not even asked: during the parse `__post_init__` is object's C-level `__init__`, a
Python call less per node (about 5 % of the parse of transformers' model files).
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

_parsing: set[int] = set()  # idents of the threads inside parse_module now
# A forked child has only the thread that forked: another's ident, reused by a thread of the child, must not skip.
os.register_at_fork(after_in_child=lambda: _parsing.intersection_update({threading.get_ident()}))


def _validated_unless_parsing(node: Any, _parsing: set[int] = _parsing, _ident=threading.get_ident) -> None:
    if _ident() not in _parsing:
        node._validate()


def parse_module(source: str | bytes) -> Any:
    """`libcst.parse_module(source)`, its nodes unvalidated."""
    import libcst
    from libcst._nodes.base import CSTNode

    ident = threading.get_ident()
    nested = ident in _parsing
    _parsing.add(ident)
    try:
        CSTNode.__post_init__ = object.__init__ if _alone() else _validated_unless_parsing
        return libcst.parse_module(source)
    finally:
        if not nested:
            _parsing.discard(ident)
            CSTNode.__post_init__ = _validated_unless_parsing  # the same function each time: no lock needed


def _alone() -> bool:
    """Whether this is a process of reslint's own (read from the runner without importing it: a parse for a
    library caller never loads it)."""
    runner = sys.modules.get("reslint.runner")
    return bool(getattr(runner, "own_process", False))
