"""What the fixers share: a parsed file with positions, and lookups by a finding's place and class."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cached_property

import libcst as cst

from reslint.findings import Finding
from reslint.static.positions import NEWLINE, CodeRanges, _RangeState
from reslint.static.unvalidated_parse import parse_module

# The node kinds that only lie inside a statement's own lines (never in the blank and comment lines
# between statements): the kinds a lookup may answer from the one top-level statement at a line.
PLACED_KINDS = (cst.BaseExpression, cst.BaseStatement, cst.BaseSmallStatement)


class Source:
    """One file's libcst tree with the position of every node (line 1-based, column 0-based), as libcst's
    PositionProvider gives them.

    A fixer looks at one class or function: positions and parents are worked out for the top-level
    statements it asks about (`Statements`), and for the whole module (one pass over the whole tree)
    only where that cannot answer."""

    def __init__(self, text: str, module: cst.Module | None = None, tree=None):
        self.text = text
        self.module = module if module is not None else parse_module(text)  # `module`: text's, parsed already
        self.tree = tree  # CPython's AST of the text, parsed already (or None)
        self._of_kind: dict[type, list[cst.CSTNode]] = {}
        self._statements: Statements | None | bool = False  # False: not made yet
        self.statement_parents: dict[int, dict[cst.CSTNode, cst.CSTNode]] = {}  # see ScopedParents
        # fixed text -> the top-level statements replaced in it and their new code, in order (see fixed_module)
        self.splices: dict[str, tuple[tuple[cst.CSTNode, str], ...]] = {}

    @cached_property
    def positions(self) -> CodeRanges:
        return CodeRanges(self.module)  # PositionProvider's places from one codegen pass, without its visit

    @property
    def statements(self) -> Statements | None:
        """The module's places statement by statement; None: only the whole module's (see Statements)."""
        if self._statements is False:
            self._statements = Statements.of(self)
        statements = self._statements
        return statements if statements is not None and not statements.unplaceable else None

    @cached_property
    def whole_parents(self) -> dict[cst.CSTNode, cst.CSTNode]:
        from reslint.static.walk import parents  # ParentNodeProvider's map, without its rebuilding visit

        return parents(self.module)

    @property
    def parents(self) -> ScopedParents:
        return ScopedParents(self)  # made per question, holding the Source: no cycle for the collector to find

    def start(self, node: cst.CSTNode) -> tuple[int, int]:
        placed = self._placed(node)
        if placed is not None:
            return placed.line_column(placed.start_offset(node))
        return self.positions.line_column(self.positions.start_offset(node))

    def end(self, node: cst.CSTNode) -> tuple[int, int]:
        placed = self._placed(node)
        if placed is not None:
            return placed.line_column(placed.end_offset(node))
        return self.positions.line_column(self.positions.end_offset(node))

    def lines(self, node: cst.CSTNode) -> range:
        return range(self.start(node)[0], self.end(node)[0] + 1)

    def nodes(self, kind: type = cst.CSTNode) -> Iterator[cst.CSTNode]:
        found = self._of_kind.get(kind)
        if found is None:
            found = self._of_kind[kind] = [node for node in self.positions if isinstance(node, kind)]
        return iter(found)

    def around(self, line: int, kind: type) -> list[cst.CSTNode]:
        """Nodes of `kind` that may span `line`: those of the top-level statement holding it (a superset of the
        nodes whose `lines` hold it, in `nodes`' order)."""
        statements = self.statements if issubclass(kind, PLACED_KINDS) and "positions" not in self.__dict__ else None
        if statements is not None:
            statement = statements.at_line(line)
            found = statements.nodes(statement, kind) if statement is not None else []
            if found is not None:
                return found
        return list(self.nodes(kind))

    def in_order(self, kind: type) -> Iterator[cst.CSTNode]:
        """Nodes of `kind` in source order (by start), placed statement by statement as they are reached."""
        statements = self.statements if issubclass(kind, PLACED_KINDS) and "positions" not in self.__dict__ else None
        last = -1
        if statements is not None:
            for statement in self.module.body:
                found = statements.nodes(statement, kind)
                if found is None:
                    break
                placed = statements.placed_already(statement)
                for node in sorted(found, key=placed.start_offset):
                    last = placed.start_offset(node)
                    yield node
            else:
                return
        positions = self.positions  # the rest, from the whole module's places
        yield from (node for node in sorted(self.nodes(kind), key=positions.start_offset)
                    if positions.start_offset(node) > last)

    def at(self, finding: Finding, kind: type = cst.CSTNode) -> list[cst.CSTNode]:
        """Nodes of `kind` that start at the finding's place, outermost first."""
        place = (finding.line, finding.column - 1)
        found = [node for node in self.around(finding.line, kind) if self.start(node) == place]
        return sorted(found, key=lambda node: -len(self.lines(node)) * 10_000 - self.width(node))

    def width(self, node: cst.CSTNode) -> int:
        start, end = self.start(node), self.end(node)
        return end[1] if end[0] == start[0] else 10_000

    def within(self, outer: cst.CSTNode, kind: type = cst.CSTNode) -> list[cst.CSTNode]:
        """Nodes of `kind` inside `outer` (itself included), in source order."""
        placed = self._placed(outer) if issubclass(kind, PLACED_KINDS) else None
        candidates = self.statements.nodes(placed.statement, kind) if placed is not None else None
        if candidates is None:
            placed, candidates = None, self.nodes(kind)
        positions = placed or self.positions
        first, last = positions.start_offset(outer), positions.end_offset(outer)
        inside = [node for node in candidates
                  if first <= positions.start_offset(node) and positions.end_offset(node) <= last]
        return sorted(inside, key=positions.start_offset)

    def _placed(self, node: cst.CSTNode) -> Placed | None:
        """The places of the top-level statement holding `node`; None: ask the whole module's."""
        statements = self.statements if "positions" not in self.__dict__ else None  # else those answer
        return statements.placed(node) if statements is not None else None

    def class_def(self, name: str) -> cst.ClassDef | None:
        return next((node for node in self.module.body if isinstance(node, cst.ClassDef) and node.name.value == name), None)

    def replaced(self, old: cst.CSTNode, new: cst.CSTNode) -> str:
        """The module's code with `old` replaced by `new`. A top-level statement (a class, a function) is
        replaced in the text by its new code alone: rebuilding and generating the whole module is most of
        a fixer's time on a large file."""
        spliced = self.replaced_statements({old: new})
        return spliced if spliced is not None else self.module.deep_replace(old, new).code

    def replaced_statements(self, replacements: dict[cst.CSTNode, cst.CSTNode]) -> str | None:
        """The module's code with top-level statements replaced, each by its new code in the text; None
        unless every node replaced is a top-level statement (and, in a file without a final newline, not
        the last one, whose newline the module's code drops), and the text is the module's code (no BOM)."""
        body = self.module.body
        top_level = {id(statement) for statement in body}
        if not all(id(old) in top_level for old in replacements) or (
                not self.module.has_trailing_newline and any(old is body[-1] for old in replacements)):
            return None
        spans = {old: self._code_span(old) for old in replacements}
        if any(span is None for span in spans.values()):
            return None
        pieces, at, splices = [], 0, []
        for old in sorted(replacements, key=lambda node: spans[node][0]):
            start, end = spans[old]
            splices.append((old, self.module.code_for_node(replacements[old])))
            pieces += [self.text[at:start], splices[-1][1]]
            at = end
        fixed = "".join(pieces) + self.text[at:]
        self.splices[fixed] = tuple(splices)
        return fixed

    def fixed_module(self, fixed: str) -> cst.Module | None:
        """libcst's module of a text `replaced_statements` made, without parsing all of it: the statements it
        replaced are parsed from their new code, the others are this module's own (libcst trees are immutable).
        None when it did not make `fixed`, or a new statement's code does not parse as it would in the module."""
        splices = self.splices.get(fixed)
        if splices is None:
            return None
        replaced: dict[int, list[cst.BaseStatement]] = {}
        for old, code in splices:
            try:
                part = cst.parse_module(code, config=self.module.config_for_parsing)
            except (cst.ParserSyntaxError, RecursionError):
                return None
            if not part.body or part.footer or part.header and old is self.module.body[0]:
                return None  # a comment after it, or above the first statement (the module's header): parse it all
            statements = list(part.body)
            # the blank and comment lines above a statement are its own in the whole module, the part's header here
            statements[0] = statements[0].with_changes(leading_lines=[*part.header, *statements[0].leading_lines])
            replaced[id(old)] = statements
        body = [new for statement in self.module.body for new in replaced.get(id(statement), (statement,))]
        return self.module.with_changes(body=body)

    def _code_span(self, statement: cst.CSTNode) -> tuple[int, int] | None:
        """Where a top-level statement's code lies in the text; None: the text is not the module's code."""
        placed = self._placed(statement)
        if placed is not None:  # placed where its own code is in the text (Statements checks it)
            return placed.code_span(statement)
        return self.positions.code_span(statement) if self.positions.code == self.text else None


class Placed:
    """One top-level statement's nodes with their places in the text: its code generated alone (as CodeRanges
    generates the whole module's) and shifted to where CPython's AST puts it."""

    def __init__(self, statement: cst.CSTNode, state: _RangeState, base: int, line_offsets: list[int]):
        self.statement = statement
        self._state = state
        self._base = base
        self._line_offsets = line_offsets

    def __contains__(self, node: object) -> bool:
        return node in self._state.order

    def __iter__(self):
        return iter(self._state.order)

    def start_offset(self, node: cst.CSTNode) -> int:
        if node not in self._state.order:
            raise KeyError(node)
        return self._base + self._state.start_of(node)

    def end_offset(self, node: cst.CSTNode) -> int:
        if node not in self._state.order:
            raise KeyError(node)
        return self._base + self._state.end_of(node)

    def code_span(self, node: cst.CSTNode) -> tuple[int, int]:
        start, end = self._state.ranges[id(node)]
        return self._base + start, self._base + end

    def line_column(self, offset: int) -> tuple[int, int]:
        from bisect import bisect_right

        line = bisect_right(self._line_offsets, offset)
        return line, offset - self._line_offsets[line - 1]


class Statements:
    """A module's top-level statements, each placed (`Placed`) when a fixer first asks about a node in it.

    Each statement's first line comes from CPython's AST of the text (its first decorator's, else its own); a
    node of a PLACED_KINDS kind starting on a line belongs to the last statement starting at or before it. The
    whole module's places are used instead when the AST and the module disagree, when a statement's code is
    not in the text where the AST puts it, or in a file without a final newline (whose module code, as
    CodeRanges counts it, is not the text)."""

    def __init__(self, source: Source, starts: list[tuple[int, int, cst.CSTNode]]):
        import weakref

        self._source = weakref.ref(source)  # no cycle: a Source with its module is freed as soon as it is dropped
        self.unplaceable = False
        self._starts = starts  # (first line, line of the statement's own start, statement), in order
        self._first_lines = [first for first, _, _ in starts]
        self._anchor = {id(statement): line for _, line, statement in starts}
        self._line_offsets = [0] + [match.end() for match in NEWLINE.finditer(source.text)]
        self._placed: dict[int, Placed] = {}  # id(statement) -> its places
        self._of_kind: dict[tuple[int, type], list[cst.CSTNode]] = {}

    @classmethod
    def of(cls, source: Source) -> Statements | None:
        import ast
        import warnings

        module = source.module
        if not module.has_trailing_newline:
            return None
        tree = source.tree
        try:
            if tree is None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    tree = ast.parse(source.text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        starts, at = [], 0
        for statement in module.body:
            if at >= len(tree.body):
                return None
            node = tree.body[at]
            at += len(statement.body) if isinstance(statement, cst.SimpleStatementLine) else 1
            if isinstance(statement, (cst.ClassDef, cst.FunctionDef)) != isinstance(
                    node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) or node.col_offset != 0:
                return None
            first = min([node.lineno, *(decorator.lineno for decorator in getattr(node, "decorator_list", ()))])
            starts.append((first, node.lineno, statement))
        return cls(source, starts) if at == len(tree.body) else None

    def at_line(self, line: int) -> cst.CSTNode | None:
        from bisect import bisect_right

        index = bisect_right(self._first_lines, line)
        return self._starts[index - 1][2] if index else None

    def nodes(self, statement: cst.CSTNode, kind: type) -> list[cst.CSTNode] | None:
        """The statement's nodes of `kind`, in CodeRanges' order; None: it cannot be placed."""
        key = (id(statement), kind)
        found = self._of_kind.get(key)
        if found is None:
            placed = self._place(statement)
            if placed is None:
                return None
            found = self._of_kind[key] = [node for node in placed if isinstance(node, kind)]
        return found

    def placed(self, node: cst.CSTNode) -> Placed | None:
        """The places of the top-level statement holding `node`; None: not known statement by statement."""
        placed = self.placed_already(node)
        if placed is not None or node is self._source().module:
            return placed
        statement = self._statement_of(node)
        return self._place(statement) if statement is not None else None

    def placed_already(self, node: cst.CSTNode) -> Placed | None:
        return next((placed for placed in self._placed.values() if node in placed), None)

    def _statement_of(self, node: cst.CSTNode) -> cst.CSTNode | None:
        if id(node) in self._anchor:
            return node
        for _, _, statement in self._starts:  # a method of a top-level class: the usual case
            body = getattr(getattr(statement, "body", None), "body", ())
            if isinstance(body, (tuple, list)) and any(child is node for child in body):
                return statement
        source = self._source()
        parents = source.whole_parents
        while node in parents:
            parent = parents[node]
            if parent is source.module:
                return node if id(node) in self._anchor else None
            node = parent
        return None

    def _place(self, statement: cst.CSTNode) -> Placed | None:
        placed = self._placed.get(id(statement))
        if placed is not None or id(statement) not in self._anchor:
            return placed
        source = self._source()
        state = _RangeState(source.module)
        statement._codegen(state)
        code = "".join(state.tokens)
        line = self._anchor[id(statement)]
        if line > len(self._line_offsets):
            return self._unplaceable()
        base = self._line_offsets[line - 1] - state.start_of(statement)  # top level: column 0
        if base < 0 or source.text[base:base + len(code)] != code:
            return self._unplaceable()
        placed = self._placed[id(statement)] = Placed(statement, state, base, self._line_offsets)
        return placed

    def _unplaceable(self) -> None:
        self.unplaceable = True  # the whole module's places from now on
        return None


class ScopedParents:
    """Each node's parent (libcst's ParentNodeProvider's map), from the top-level statement holding it when that
    statement is placed, else from the whole module's map."""

    def __init__(self, source: Source):
        self._source = source

    def get(self, node: cst.CSTNode, default=None):
        statements = self._source.statements
        placed = None
        if statements is not None and "whole_parents" not in self._source.__dict__:  # else that map answers
            placed = statements.placed_already(node)
        if placed is None:
            return self._source.whole_parents.get(node, default)
        statement = placed.statement
        if node is statement:
            return self._source.module
        found = self._source.statement_parents.get(id(statement))
        if found is None:
            from reslint.static.walk import parents

            found = self._source.statement_parents[id(statement)] = parents(statement)
        return found.get(node, default)

    def __getitem__(self, node: cst.CSTNode):
        found = self.get(node, _MISSING)
        if found is _MISSING:
            raise KeyError(node)
        return found

    def __contains__(self, node: object) -> bool:
        return self.get(node, _MISSING) is not _MISSING


_MISSING = object()


def owner_class(finding: Finding) -> str:
    """The class a finding is about: its symbol, `Class` or `Class.attribute`."""
    return finding.symbol.split(".")[0]


def method(cls: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    return next((node for node in cls.body.body if isinstance(node, cst.FunctionDef) and node.name.value == name), None)


def dotted(node: cst.CSTNode) -> str:
    """`torch.nn.functional.gelu` for an attribute chain, `x` for a name, "" otherwise."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr.value}" if base else ""
    return ""


def code_of(node: cst.CSTNode) -> str:
    return cst.Module(body=()).code_for_node(node)


def self_attributes(cls: cst.ClassDef) -> dict[str, cst.Assign]:
    """`self.NAME = ...` assignments of `__init__`, by NAME."""
    init = method(cls, "__init__")
    found: dict[str, cst.Assign] = {}
    if init is None:
        return found
    for statement in init.body.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Assign) and len(small.targets) == 1:
                target = dotted(small.targets[0].target)
                if target.startswith("self.") and target.count(".") == 1:
                    found.setdefault(target[5:], small)
    return found


def module_alias(module: cst.Module, target: str) -> str | None:
    """The name the file binds the module `target` (e.g. "torch.nn.functional") to, if any."""
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Import):
                for alias in small.names:
                    name = dotted(alias.name)
                    if alias.asname is not None and name == target:
                        return dotted(alias.asname.name)
                    if alias.asname is None and name == target and "." not in target:
                        return target
            elif isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative \
                    and not isinstance(small.names, cst.ImportStar):
                for alias in small.names:
                    if f"{dotted(small.module)}.{dotted(alias.name)}" == target:
                        return dotted(alias.asname.name) if alias.asname is not None else dotted(alias.name)
    return None


def spelled(module: cst.Module, target: str) -> str | None:
    """How the file can write the dotted name `target` ("torch.nn.functional.gelu") with its own imports."""
    parts = target.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        alias = module_alias(module, ".".join(parts[:cut]))
        if alias is not None:
            return ".".join([alias, *parts[cut:]])
    return None


class InsertAfter(cst.CSTTransformer):
    """Insert `addition(statement)` after each statement of the original tree it returns one for."""

    def __init__(self, addition):
        super().__init__()
        self.addition = addition

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        body = []
        for old, new in zip(original.body, updated.body):
            body.append(new)
            extra = self.addition(old)
            if extra is not None:
                body.append(extra)
        return updated.with_changes(body=body)
