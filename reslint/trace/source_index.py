"""Where things are written in the checked file, from `ast`: add expressions and their operands per
line, calls per line, and the `self.attr = ...` assignments and constructor calls of each class."""

from __future__ import annotations

import ast
import re

from reslint.file_gate import MAX_SOURCE_BYTES, cached_as_read, read_project_file

# Lines as the Python parser splits them (no form feeds), ends kept: what ast.get_source_segment uses.
PARSER_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def source_segments(text: str):
    """`segment(node)`, ast.get_source_segment over `text` with its lines split once: the ast function
    splits the whole text again, character by character, on every call (3.6 CPU-s on modeling_bert.py)."""
    lines = PARSER_LINES.findall(text)

    def segment(node) -> str | None:
        try:
            if node.end_lineno is None or node.end_col_offset is None:
                return None
            first, last = node.lineno - 1, node.end_lineno - 1
            start, end = node.col_offset, node.end_col_offset
        except AttributeError:
            return None
        if first == last:
            return lines[first].encode()[start:end].decode()
        return "".join([lines[first].encode()[start:].decode(), *lines[first + 1:last],
                        lines[last].encode()[:end].decode()])

    return segment


class SourceIndex:
    """Columns of add expressions per line and `self.attr = ...` lines per class, from `ast`."""

    def __init__(self, text: str):
        self.lines = text.splitlines()
        self.adds: dict[int, list[int]] = {}
        self.terms: dict[int, list[tuple[str, str]]] = {}
        self.calls: dict[int, list[tuple[str, int]]] = {}
        self.constructions: dict[tuple[str, str], tuple[int, int]] = {}
        self.attributes: dict[tuple[str, str], int] = {}
        self.loops: list[tuple[int, int, int, str]] = []  # `for` statements: first and last line, column, iterable
        tree = ast.parse(text)
        segment = source_segments(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.For):
                self.loops.append((node.lineno, node.end_lineno or node.lineno, node.col_offset + 1,
                                   segment(node.iter) or ""))
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) or isinstance(node, ast.AugAssign) \
                    and isinstance(node.op, ast.Add):
                self.adds.setdefault(node.lineno, []).append(node.col_offset + 1)
                left = node.left if isinstance(node, ast.BinOp) else node.target
                right = node.right if isinstance(node, ast.BinOp) else node.value
                self.terms.setdefault(node.lineno, []).append(
                    (segment(left) or "", segment(right) or ""))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                    "add", "add_"):
                self.adds.setdefault(node.lineno, []).append(node.col_offset + 1)
            if isinstance(node, ast.Call):
                func = segment(node.func) or ""
                self.calls.setdefault(node.lineno, []).append((func, node.col_offset + 1))
            if isinstance(node, ast.ClassDef):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Call):
                        callee = getattr(inner.func, "attr", getattr(inner.func, "id", ""))
                        self.constructions.setdefault((node.name, callee), (inner.lineno, inner.col_offset + 1))
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Assign):
                        for target in inner.targets:
                            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                                    and target.value.id == "self":
                                self.attributes.setdefault((node.name, target.attr),
                                                           (inner.value.lineno, inner.value.col_offset + 1))

    @staticmethod
    def of(path: str) -> SourceIndex | None:
        return source_index(path)

    def column(self, line: int, kind: str) -> int:
        if kind == "add" and line in self.adds:
            return min(self.adds[line])
        if 0 < line <= len(self.lines):
            text = self.lines[line - 1]
            return len(text) - len(text.lstrip()) + 1
        return 1

    def call_column(self, line: int, attr: str) -> int:
        """Column of the call on `line` whose callee mentions `attr` (`self.blocks[i](x)`)."""
        for func, column in sorted(self.calls.get(line, []), key=lambda c: -c[1]):
            if attr and attr in func:
                return column
        return self.column(line, "")

    def loop_over(self, line: int, attr: str) -> tuple[int, int] | None:
        """(line, column) of the innermost `for` around `line` whose iterable names `attr` (`self.layers`)."""
        around = [(first, column) for first, last, column, iterable in self.loops
                  if first <= line <= last and attr and attr in iterable]
        return max(around) if around else None

    def add_terms(self, line: int) -> tuple[str, str] | None:
        """(left, right) source text of the one `a + b` on the line (the outermost when chained)."""
        found = self.terms.get(line) or []
        return found[0] if found else None

    def attribute_line(self, owner: str, attr: str) -> int | None:
        found = self.attributes.get((owner, attr))
        return found[0] if found else None

    def attribute_column(self, owner: str, attr: str) -> int:
        found = self.attributes.get((owner, attr))
        return found[1] if found else 1


@cached_as_read
def source_index(path: str) -> SourceIndex | None:
    try:
        return SourceIndex(read_project_file(path, None, MAX_SOURCE_BYTES).decode("utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
