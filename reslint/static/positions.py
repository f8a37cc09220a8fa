"""Where a module's nodes are and their source text, several times cheaper than libcst's
PositionProvider and `Module.code_for_node`.

PositionProvider regenerates the module's code and, for every token, splits it on newlines and
builds position objects, and enters a generator-based context manager for every node with a
syntactic position: on large files that was half of `--static`'s time; `code_for_node` then
generated each asked-for expression's code once more. This runs libcst's own codegen once (so
the same nodes get the same places) but only counts characters: a node's line and column come
from its offset, and its code is a slice of the module's code, when someone asks for them.
The tests compare the result with PositionProvider and code_for_node on every node of the fixtures.
"""

from __future__ import annotations

import re
from bisect import bisect_right

import libcst as cst
from libcst._nodes.internal import CodegenState

# The newlines libcst's PositionProvider counts.
NEWLINE = re.compile(r"\r\n?|\n")


class _SyntacticStart:
    """PositionProvider's record_syntactic_position, as a plain (cheap) context manager."""

    __slots__ = ("state", "node", "start_node", "start")

    def __init__(self, state: _OffsetState, node: cst.CSTNode, start_node: cst.CSTNode | None):
        self.state = state
        self.node = node
        self.start_node = start_node
        self.start = 0

    def __enter__(self) -> None:
        self.start = self.state.offset

    def __exit__(self, *exc_info: object) -> bool:
        state = self.state
        state.syntactic[self.node] = state.start_of(self.start_node) if self.start_node is not None else self.start
        return False


class _OffsetState(CodegenState):
    __slots__ = ("offset", "ranges", "syntactic", "pending")

    def __init__(self, module: cst.Module):
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.offset = 0
        self.ranges: dict[cst.CSTNode, tuple[int, int]] = {}  # node -> its code, whitespace it owns included
        self.syntactic: dict[cst.CSTNode, int] = {}  # node -> start without that whitespace, where it differs
        self.pending: list[int] = []

    def add_indent_tokens(self) -> None:
        self.tokens.extend(self.indent_tokens)
        for token in self.indent_tokens:
            self.offset += len(token)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self.offset += len(value)

    def before_codegen(self, node: cst.CSTNode) -> None:
        self.pending.append(self.offset)

    def after_codegen(self, node: cst.CSTNode) -> None:
        self.ranges[node] = (self.pending.pop(), self.offset)

    def start_of(self, node: cst.CSTNode) -> int:
        start = self.syntactic.get(node)
        return start if start is not None else self.ranges[node][0]

    def record_syntactic_position(self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None,
                                  end_node: cst.CSTNode | None = None) -> _SyntacticStart:
        return _SyntacticStart(self, node, start_node)


class SourceMap:
    """Where each node of one module starts, and its code."""

    def __init__(self, module: cst.Module):
        self._module = module
        self._state: _OffsetState | None = None  # computed on the first question: many files never ask
        self._code = ""
        self._line_offsets: list[int] = []

    def _mapped(self) -> _OffsetState:
        if self._state is None:
            state = _OffsetState(self._module)
            self._module._codegen(state)
            self._code = "".join(state.tokens)
            self._line_offsets = [0] + [match.end() for match in NEWLINE.finditer(self._code)]
            self._state = state
        return self._state

    def line_column(self, node: cst.CSTNode) -> tuple[int, int] | None:
        """(1-based line, 0-based column), like PositionProvider's `.start`; None for a node not in the module."""
        state = self._mapped()
        if node not in state.ranges:
            return None
        offset = state.start_of(node)
        line = bisect_right(self._line_offsets, offset)
        return line, offset - self._line_offsets[line - 1]

    def code(self, node: cst.CSTNode) -> str:
        """The node's code with the whitespace it owns, as `Module.code_for_node` gives it for an expression
        (a nested statement's lines keep their indentation here)."""
        span = self._mapped().ranges.get(node)
        if span is None:
            return self._module.code_for_node(node)
        return self._code[span[0]:span[1]]
