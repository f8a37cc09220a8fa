"""Where a module's nodes are and their source text, several times cheaper than libcst's
PositionProvider and `Module.code_for_node`.

PositionProvider regenerates the module's code and, for every token, splits it on newlines and
builds position objects, and enters a generator-based context manager for every node with a
syntactic position: on large files that was half of `--static`'s time; `code_for_node` then
generated each asked-for expression's code once more. This runs libcst's own codegen (so the
same nodes get the same places) but only counts characters: a node's line and column come from
its offset, and its code is a slice of the module's code, when someone asks for them.

Given the file's text and CPython's AST of it, a SourceMap generates code only for the statements
someone asks about: each statement of a module, class or function body is placed by the line and
column CPython's AST gives it, generated alone (with the indentation of the blocks around it), and
checked against the text at that place; a def or class is generated up to its body, whose
statements are places of their own. Any disagreement (or a node outside those statements) falls
back to generating the whole module. Most of a model file is never asked about. Which statement a node
belongs to is found by walking the statements: the function a caller names (`within`, the one it evaluates)
first, every statement only when the node is not there.
The tests compare the result with PositionProvider and code_for_node on every node of the fixtures.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_right

import libcst as cst
from libcst._nodes.internal import CodegenState

from reslint.static.walk import _child_fields, _is_node, child_fields, is_node

# The newlines libcst's PositionProvider counts (and CPython's tokenizer).
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
        state.syntactic[id(self.node)] = state.start_of(self.start_node) if self.start_node is not None else self.start
        return False


class _OffsetState(CodegenState):
    __slots__ = ("offset", "ranges", "syntactic", "pending", "stop")

    def __init__(self, module: cst.Module, indents: tuple[str, ...] = (), stop: cst.CSTNode | None = None):
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.indent_tokens.extend(indents)
        self.offset = 0
        # Keyed by the nodes' ids (the module holds the nodes): a libcst node's `__hash__` is a Python call.
        self.ranges: dict[int, tuple[int, int]] = {}  # id of a node -> its code, whitespace it owns included
        self.syntactic: dict[int, int] = {}  # id of a node -> start without that whitespace, where it differs
        self.pending: list[int] = []
        self.stop = stop  # generate up to this node (a def's body), not further

    def add_indent_tokens(self) -> None:
        self.tokens.extend(self.indent_tokens)
        for token in self.indent_tokens:
            self.offset += len(token)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self.offset += len(value)

    def before_codegen(self, node: cst.CSTNode) -> None:
        if node is self.stop:
            raise _Stopped
        self.pending.append(self.offset)

    def after_codegen(self, node: cst.CSTNode) -> None:
        self.ranges[id(node)] = (self.pending.pop(), self.offset)

    def start_of(self, node: cst.CSTNode) -> int:
        start = self.syntactic.get(id(node))
        return start if start is not None else self.ranges[id(node)][0]

    def record_syntactic_position(self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None,
                                  end_node: cst.CSTNode | None = None) -> _SyntacticStart:
        return _SyntacticStart(self, node, start_node)


class _Stopped(Exception):
    """The generation of a def or class reached its body."""


class _Unplaceable(Exception):
    """A statement's generated code is not in the text where CPython's AST places it."""


class SourceMap:
    """Where each node of one module starts, and its code.

    `text` and `tree` (the module's source and CPython's AST of it): place only the statements asked
    about; without them, the whole module's code is generated on the first question."""

    def __init__(self, module: cst.Module, text: str | None = None, tree: ast.Module | None = None):
        self._module = module
        self.text = text
        self._state: _OffsetState | None = None  # computed on the first question: many files never ask
        self._code = ""
        self._line_offsets: list[int] = []
        # Statement by statement: each body statement -> (indentation around it, its line, its column in bytes)
        self._anchors: dict[cst.CSTNode, tuple[tuple[str, ...], int, int]] | None = None
        self._anchor_ids: set[int] = set()
        if text is not None and isinstance(tree, ast.Module):
            anchors: dict = {}
            if _pair(module.body, tree.body, (), module.default_indent, anchors):
                self._anchors = anchors
                self._anchor_ids = {id(statement) for statement in anchors}
                self._code = text
                self._line_offsets = [0] + [match.end() for match in NEWLINE.finditer(text)]
        self._unit_of: dict[int, cst.CSTNode] = {}  # id of a node -> the statement it is placed with (walked so far)
        self._walked: set[int] = set()  # ids of the statements whose nodes are in _unit_of
        self._all_walked = False
        self._starts: dict[int, int] = {}  # placed so far: id of a node -> start offset
        self._spans: dict[int, tuple[int, int]] = {}  # id of a node -> its code's span in the text
        self._placed: set[cst.CSTNode] = set()  # statements placed (def and class: up to their body)
        self._whole: set[cst.CSTNode] = set()  # def and class statements placed with their body

    def source_text(self) -> str:
        """The file's text: as read, else generated from the module (a map built without the text)."""
        return self.text if self.text is not None else self._module.code

    @property
    def whole_module_generated(self) -> bool:
        """Whether the whole module's code was generated (no text and AST given, or they disagreed)."""
        return self._state is not None

    def _mapped(self) -> _OffsetState:
        if self._state is None:
            state = _OffsetState(self._module)
            self._module._codegen(state)
            self._code = "".join(state.tokens)
            self._line_offsets = [0] + [match.end() for match in NEWLINE.finditer(self._code)]
            self._state = state
            self._anchors = None
        return self._state

    def line_column(self, node: cst.CSTNode, within: cst.CSTNode | None = None) -> tuple[int, int] | None:
        """(1-based line, 0-based column), like PositionProvider's `.start`; None for a node not in the module.
        `within`: a def or class the node is likely under (only statements under it are walked first)."""
        if self._anchors is not None:
            offset = self._starts.get(id(node))
            if offset is None and self._place(node, within=within):
                offset = self._starts.get(id(node))
            if self._anchors is not None:
                if offset is None:
                    return None
                line = bisect_right(self._line_offsets, offset)
                return line, offset - self._line_offsets[line - 1]
        state = self._mapped()
        if id(node) not in state.ranges:
            return None
        offset = state.start_of(node)
        line = bisect_right(self._line_offsets, offset)
        return line, offset - self._line_offsets[line - 1]

    def code(self, node: cst.CSTNode, within: cst.CSTNode | None = None) -> str:
        """The node's code with the whitespace it owns, as `Module.code_for_node` gives it for an expression
        (a nested statement's lines keep their indentation here). `within`: as for `line_column`."""
        if self._anchors is not None:
            span = self._spans.get(id(node))
            if span is None and self._place(node, whole=True, within=within):
                span = self._spans.get(id(node))
            if self._anchors is not None:
                return self._code[span[0]:span[1]] if span is not None else self._module.code_for_node(node)
        span = self._mapped().ranges.get(id(node))
        if span is None:
            return self._module.code_for_node(node)
        return self._code[span[0]:span[1]]

    # ----- placing statement by statement -------------------------------------------------------

    def _place(self, node: cst.CSTNode, whole: bool = False, within: cst.CSTNode | None = None) -> bool:
        """Place the statement `node` belongs to; False when it was placed already, or when the whole
        module is generated instead (`node` belongs to no statement, or the text disagrees)."""
        unit = self._unit(node, within)
        if unit is None:  # whitespace, a block, a node of another module: the whole module says
            self._mapped()
            return False
        whole = whole and node is unit and isinstance(unit, (cst.FunctionDef, cst.ClassDef))
        if unit in (self._whole if whole else self._placed):
            return False
        try:
            self._generate(unit, whole)
        except _Unplaceable:
            self._mapped()
            return False
        return True

    def _unit(self, node: cst.CSTNode, within: cst.CSTNode | None) -> cst.CSTNode | None:
        """The statement `node` is placed with: a statement is its own; else the statements under `within`
        are walked first, until one owns the node, and every statement only when none does (each statement's
        nodes are walked once)."""
        unit_of = self._unit_of
        unit = unit_of.get(id(node))
        if unit is not None or self._all_walked:
            return unit
        anchor_ids = self._anchor_ids
        if id(node) in anchor_ids:
            return node
        if within is not None and id(within) in anchor_ids:
            pending = [within]
            while pending:  # `within` and the statements of its body, of theirs...
                statement = pending.pop()
                if id(statement) not in self._walked:
                    self._walk_unit(statement)
                    unit = unit_of.get(id(node))
                    if unit is not None:
                        return unit
                body = getattr(statement, "body", None)
                if isinstance(statement, (cst.FunctionDef, cst.ClassDef)) and isinstance(body, cst.IndentedBlock):
                    pending.extend(reversed(body.body))  # in the source's order
        for statement in self._anchors:
            self._walk_unit(statement)
        self._all_walked = True
        return unit_of.get(id(node))

    def _walk_unit(self, unit: cst.CSTNode) -> None:
        if id(unit) not in self._walked:
            self._walked.add(id(unit))
            _unit_nodes(unit, self._unit_of)

    def _generate(self, unit: cst.CSTNode, whole: bool) -> None:
        indents, line, column = self._anchors[unit]
        body = getattr(unit, "body", None)
        stop = body if not whole and isinstance(unit, (cst.FunctionDef, cst.ClassDef)) \
            and isinstance(body, cst.IndentedBlock) else None
        state = _OffsetState(self._module, indents, stop)
        try:
            unit._codegen(state)
        except _Stopped:
            pass
        code = "".join(state.tokens)
        if line > len(self._line_offsets):
            raise _Unplaceable
        line_start = self._line_offsets[line - 1]
        prefix = self._code[line_start:line_start + column]
        if not prefix.isascii():  # the column is in UTF-8 bytes
            prefix = self._code[line_start:].encode("utf-8")[:column].decode("utf-8", errors="replace")
        base = line_start + len(prefix) - state.start_of(unit)
        found = self._code[base:base + len(code)]
        # the module's last newline, which the file may lack: libcst drops it after generating it
        if base < 0 or found != code and not (base + len(found) == len(self._code)
                                               and code == found + self._module.default_newline):
            raise _Unplaceable
        starts, spans, syntactic = self._starts, self._spans, state.syntactic
        for key, (start, end) in state.ranges.items():
            spans[key] = (base + start, base + end)
            starts[key] = base + syntactic.get(key, start)
        for key, start in syntactic.items():
            starts[key] = base + start
        self._placed.add(unit)
        if whole:
            self._whole.add(unit)


def _pair(statements, nodes: list[ast.stmt], indents: tuple[str, ...], default_indent: str, anchors: dict) -> bool:
    """Each libcst statement of a body -> where CPython's AST places it (False: the two disagree)."""
    at = 0
    for statement in statements:
        if at >= len(nodes):
            return False
        node = nodes[at]
        anchors[statement] = (indents, node.lineno, node.col_offset)
        if isinstance(statement, cst.SimpleStatementLine):
            at += len(statement.body)
            continue
        at += 1
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            expected = ast.ClassDef if isinstance(statement, cst.ClassDef) else (ast.FunctionDef, ast.AsyncFunctionDef)
            if not isinstance(node, expected):
                return False
            body = statement.body
            if isinstance(body, cst.IndentedBlock):
                inner = indents + (default_indent if body.indent is None else body.indent,)
                if not _pair(body.body, node.body, inner, default_indent, anchors):
                    return False
        elif not isinstance(node, ast.stmt) or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return False
    return at == len(nodes)


def _units(module: cst.Module, anchors: dict) -> dict[int, cst.CSTNode]:
    """The id of each node under a placed statement -> the innermost such statement (a def or class owns its
    header; its body's statements own themselves)."""
    unit_of: dict[int, cst.CSTNode] = {}
    for unit in anchors:
        _unit_nodes(unit, unit_of)
    return unit_of


def _unit_nodes(unit: cst.CSTNode, unit_of: dict[int, cst.CSTNode]) -> None:
    """Write down `unit` as the statement of each node it owns (a def or class: up to its body)."""
    unit_of[id(unit)] = unit
    pending = [unit]
    body = getattr(unit, "body", None)
    skip = body if isinstance(unit, (cst.FunctionDef, cst.ClassDef)) and isinstance(body, cst.IndentedBlock) else None
    while pending:  # walk.walk's loop, writing down each node's statement
        node = pending.pop()
        kind = type(node)
        try:  # a leaf's fields are (), which `.get(kind) or ...` would look up again
            fields = _child_fields[kind]
        except KeyError:
            fields = child_fields(kind)
        for name in fields:
            value = getattr(node, name)
            value_kind = type(value)
            if value_kind is tuple or value_kind is list:
                for item in value:
                    known = _is_node.get(type(item))
                    if known or (known is None and is_node(type(item))):
                        unit_of[id(item)] = unit
                        pending.append(item)
            elif value is not skip:
                known = _is_node.get(value_kind)
                if known or (known is None and is_node(value_kind)):
                    unit_of[id(value)] = unit
                    pending.append(value)


class _SyntacticRange(_SyntacticStart):
    """PositionProvider's record_syntactic_position with its end too."""

    __slots__ = ("end_node",)

    def __init__(self, state: _RangeState, node: cst.CSTNode, start_node: cst.CSTNode | None,
                 end_node: cst.CSTNode | None):
        super().__init__(state, node, start_node)
        self.end_node = end_node

    def __exit__(self, *exc_info: object) -> bool:
        state = self.state
        key = id(self.node)
        state.syntactic[key] = state.start_of(self.start_node) if self.start_node is not None else self.start
        state.syntactic_end[key] = state.end_of(self.end_node) if self.end_node is not None else state.offset
        state.order.setdefault(self.node)
        return False


class _RangeState(_OffsetState):
    __slots__ = ("syntactic_end", "order", "dropped")

    def __init__(self, module: cst.Module):
        super().__init__(module)
        self.syntactic_end: dict[int, int] = {}  # id of a node -> its end without trailing whitespace
        self.order: dict[cst.CSTNode, None] = {}  # PositionProvider's order: a node when its range is known
        self.dropped = ""  # the last newline of a file without one: still counted, as PositionProvider does

    def pop_trailing_newline(self) -> None:
        if self.tokens:
            self.dropped = self.tokens.pop()

    def after_codegen(self, node: cst.CSTNode) -> None:
        self.ranges[id(node)] = (self.pending.pop(), self.offset)
        self.order.setdefault(node)

    def end_of(self, node: cst.CSTNode) -> int:
        end = self.syntactic_end.get(id(node))
        return end if end is not None else self.ranges[id(node)][1]

    def record_syntactic_position(self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None,
                                  end_node: cst.CSTNode | None = None) -> _SyntacticRange:
        return _SyntacticRange(self, node, start_node, end_node)


class CodeRanges:
    """PositionProvider's start and end of every node of a module, in its order, from one codegen pass that
    counts characters (the fixers' positions). Offsets order nodes as (line, column) pairs do."""

    def __init__(self, module: cst.Module):
        state = _RangeState(module)
        module._codegen(state)
        self._state = state
        code = self.code = "".join(state.tokens) + state.dropped  # the module's code (its text, a BOM aside)
        self._line_offsets = [0] + [match.end() for match in NEWLINE.finditer(code)]

    def __iter__(self):
        return iter(self._state.order)

    def __contains__(self, node: object) -> bool:
        return node in self._state.order

    def start_offset(self, node: cst.CSTNode) -> int:
        """Raises KeyError for a node not in the module."""
        if node not in self._state.order:
            raise KeyError(node)
        return self._state.start_of(node)

    def end_offset(self, node: cst.CSTNode) -> int:
        if node not in self._state.order:
            raise KeyError(node)
        return self._state.end_of(node)

    def code_span(self, node: cst.CSTNode) -> tuple[int, int]:
        """Where the code generated for the node lies, the whitespace it owns (a statement's leading lines)
        included: the text `code_for_node` gives it in place."""
        return self._state.ranges[id(node)]

    def line_column(self, offset: int) -> tuple[int, int]:
        """(1-based line, 0-based column) of an offset."""
        line = bisect_right(self._line_offsets, offset)
        return line, offset - self._line_offsets[line - 1]
