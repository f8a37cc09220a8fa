"""What the fixers share: a parsed file with positions, and lookups by a finding's place and class."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cached_property

import libcst as cst

from reslint.findings import Finding
from reslint.static.positions import CodeRanges


class Source:
    """One file's libcst tree with the position of every node (line 1-based, column 0-based), as libcst's
    PositionProvider gives them.

    Positions and parents are each a pass over the whole tree, resolved when a fixer first asks:
    most fixers refuse most findings after looking at one class."""

    def __init__(self, text: str, module: cst.Module | None = None):
        self.text = text
        self.module = module if module is not None else cst.parse_module(text)  # `module`: text's, parsed already
        self._of_kind: dict[type, list[cst.CSTNode]] = {}

    @cached_property
    def positions(self) -> CodeRanges:
        return CodeRanges(self.module)  # PositionProvider's places from one codegen pass, without its visit

    @cached_property
    def parents(self) -> dict[cst.CSTNode, cst.CSTNode]:
        from reslint.static.walk import parents  # ParentNodeProvider's map, without its rebuilding visit

        return parents(self.module)

    def start(self, node: cst.CSTNode) -> tuple[int, int]:
        return self.positions.line_column(self.positions.start_offset(node))

    def end(self, node: cst.CSTNode) -> tuple[int, int]:
        return self.positions.line_column(self.positions.end_offset(node))

    def lines(self, node: cst.CSTNode) -> range:
        return range(self.start(node)[0], self.end(node)[0] + 1)

    def nodes(self, kind: type = cst.CSTNode) -> Iterator[cst.CSTNode]:
        found = self._of_kind.get(kind)
        if found is None:
            found = self._of_kind[kind] = [node for node in self.positions if isinstance(node, kind)]
        return iter(found)

    def at(self, finding: Finding, kind: type = cst.CSTNode) -> list[cst.CSTNode]:
        """Nodes of `kind` that start at the finding's place, outermost first."""
        place = (finding.line, finding.column - 1)
        found = [node for node in self.nodes(kind) if self.start(node) == place]
        return sorted(found, key=lambda node: -len(self.lines(node)) * 10_000 - self.width(node))

    def width(self, node: cst.CSTNode) -> int:
        start, end = self.start(node), self.end(node)
        return end[1] if end[0] == start[0] else 10_000

    def within(self, outer: cst.CSTNode, kind: type = cst.CSTNode) -> list[cst.CSTNode]:
        """Nodes of `kind` inside `outer` (itself included), in source order."""
        positions = self.positions
        first, last = positions.start_offset(outer), positions.end_offset(outer)
        inside = [node for node in self.nodes(kind)
                  if first <= positions.start_offset(node) and positions.end_offset(node) <= last]
        return sorted(inside, key=positions.start_offset)

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
                not self.module.has_trailing_newline and any(old is body[-1] for old in replacements)) \
                or self.positions.code != self.text:
            return None
        pieces, at = [], 0
        for old in sorted(replacements, key=lambda node: self.positions.code_span(node)[0]):
            start, end = self.positions.code_span(old)
            pieces += [self.text[at:start], self.module.code_for_node(replacements[old])]
            at = end
        return "".join(pieces) + self.text[at:]


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
