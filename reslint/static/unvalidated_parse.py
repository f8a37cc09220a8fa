"""libcst's parse without its validation of the nodes its own parser makes.

Every libcst node validates itself when it is made (`CSTNode.__post_init__` calls `_validate`: a whitespace
node matches its text against a regular expression, a name checks it is an identifier, parentheses that
they pair). For a node the parser makes from source that parsed, the checks cannot fail; they were 6 to 11 %
of the parse of transformers' model files (libcst's own comment on `__post_init__` suggests skipping them
when parsing a file). Here they are skipped for the thread that is parsing, and only while it parses: a
node made anywhere else, by a fix or by another library in the same process, is validated as libcst
validates it.
"""

from __future__ import annotations

import os
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

    CSTNode.__post_init__ = _validated_unless_parsing  # the same function each time: no lock needed
    ident = threading.get_ident()
    nested = ident in _parsing
    _parsing.add(ident)
    try:
        return libcst.parse_module(source)
    finally:
        if not nested:
            _parsing.discard(ident)
