"""The config classes of an imported config module, read with `ast` for their defaults only.

A model file reads `config.n_layer` from the config classes it imports (`ProjectIndex.imported_configs`):
only their fields, `__init__` defaults and the module's constants matter, which CPython's parser gives
several times faster than libcst's. `ConfigIndex` answers `FileIndex.config_field` as a libcst
`FileIndex` of the same file does (its class lookups are FileIndex's own): it collects what
`FileIndex` collects (a one-line `if x: a = 1` or `class A: x = 1` body is left out, as libcst gives it
no statement lines) and folds the same expressions to the same values (an implicitly concatenated
string, one node in the AST, stays unknown as libcst's ConcatenatedString does). A file CPython does not
parse is read by libcst as before (`ProjectIndex.imported_configs`).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize

from reslint.static.index import CONFIG_OBJECT_NAMES, UNKNOWN, ClassInfo, FileIndex, is_hashable, small_power

NEWLINE = re.compile(r"\r\n?|\n")  # the line ends CPython counts (not str.splitlines' form feeds)
OPERATIONS = {ast.Add: lambda left, right: left + right, ast.Sub: lambda left, right: left - right,
              ast.Mult: lambda left, right: left * right, ast.FloorDiv: lambda left, right: left // right,
              ast.Div: lambda left, right: left / right, ast.Pow: lambda left, right: left ** right}


class ConfigIndex(FileIndex):
    """A config module's aliases, classes (bases, methods, fields, `__init__` defaults) and constants, with
    `ast` expressions where a libcst FileIndex holds libcst ones; no source path: nothing further is read."""

    def __init__(self, tree: ast.Module, text: str):  # noqa: D107 - no libcst module: FileIndex's own is not run
        self.module = None
        self.source_path = None
        self._argument_defaults = {}
        self.aliases: dict[str, str] = {}
        self.classes: dict[str, ClassInfo] = {}
        self.functions: dict = {}
        self.constants: dict[str, ast.expr] = {}
        self.config_reads: list[str] = []
        self.config_sources: list[FileIndex] = []
        self.config_unread = False
        self._lines = [0] + [match.end() for match in NEWLINE.finditer(text)]
        self._text = text
        for statement in tree.body:
            self._collect_statement(statement)

    def _collect_statement(self, statement: ast.stmt) -> None:
        if isinstance(statement, ast.ClassDef):
            info = ClassInfo(statement.name, statement, tuple(self.qualified(base) or "" for base in statement.bases))
            for item in self._block(statement):
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    info.methods[item.name] = item
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.value:
                    info.class_fields[item.target.id] = item.value
                elif isinstance(item, ast.Assign) and len(item.targets) == 1 and isinstance(item.targets[0], ast.Name):
                    info.class_fields[item.targets[0].id] = item.value
            init = info.methods.get("__init__")
            if init is not None:
                info.init_defaults.update(parameter_defaults(init.args))
            self.classes[info.name] = info
        elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.functions[statement.name] = statement
        elif isinstance(statement, ast.Import):
            for alias in statement.names:
                if alias.asname is not None:
                    self.aliases[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    self.aliases[top] = top
        elif isinstance(statement, ast.ImportFrom) and statement.names[0].name != "*":
            base = "." * statement.level + (statement.module or "")
            for alias in statement.names:
                local = alias.asname or alias.name
                self.aliases[local] = f"{base}.{alias.name}" if not base.endswith(".") else base + alias.name
        elif isinstance(statement, ast.Assign):
            for target in statement.targets:
                if isinstance(target, ast.Name):
                    self.constants[target.id] = statement.value
        elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) and statement.value:
            self.constants[statement.target.id] = statement.value
        elif isinstance(statement, (ast.If, ast.Try)):
            for inner in self._block(statement):
                self._collect_statement(inner)

    def _block(self, statement: ast.stmt) -> list[ast.stmt]:
        """The statement's body, or nothing when it is written on the header's line (`if x: a = 1`: libcst's
        SimpleStatementSuite, whose small statements FileIndex does not look at)."""
        first = statement.body[0]
        start = self._lines[first.lineno - 1]
        before = self._text[start:start + first.col_offset]
        if not before.isascii():  # the column is in UTF-8 bytes
            before = self._text[start:].encode("utf-8")[:first.col_offset].decode("utf-8", errors="replace")
        return statement.body if not before.strip() else []

    def qualified(self, expr) -> str | None:
        if isinstance(expr, ast.Starred):  # `class A(*bases)`: libcst's Arg holds the name itself
            expr = expr.value
        if isinstance(expr, ast.Name):
            return self.aliases.get(expr.id, expr.id)
        if isinstance(expr, ast.Attribute):
            base = self.qualified(expr.value)
            return f"{base}.{expr.attr}" if base else None
        return None

    def argument_defaults(self) -> dict:
        return {}  # asked at depth 0 only, of the checked file's own index

    def fold(self, info: ClassInfo | None, expr: ast.expr | None, depth: int = 0):
        """FileIndex.fold of the same expression (`info` is None here: a config source is asked for a field)."""
        if expr is None or depth > 8:
            return UNKNOWN
        if isinstance(expr, ast.Constant):
            return self._constant(expr)
        if isinstance(expr, ast.Name):
            if expr.id in self.constants:
                return self.fold(None, self.constants[expr.id], depth + 1)
            return UNKNOWN
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
            value = self.fold(info, expr.operand, depth + 1)
            return -value if isinstance(value, (int, float)) else UNKNOWN
        if isinstance(expr, ast.BinOp):
            left = self.fold(info, expr.left, depth + 1)
            right = self.fold(info, expr.right, depth + 1)
            if not isinstance(left, (int, float)) or not isinstance(right, (int, float)):
                return UNKNOWN
            if isinstance(expr.op, ast.Pow) and not small_power(left, right):
                return UNKNOWN
            try:
                return OPERATIONS[type(expr.op)](left, right)
            except (KeyError, ZeroDivisionError, OverflowError):
                return UNKNOWN
        if isinstance(expr, ast.Attribute):
            return self.config_field(expr.attr, depth)
        if isinstance(expr, ast.Call):
            return self.fold_config_get(info, expr, depth)
        if isinstance(expr, ast.IfExp) and reads_config_default(expr.test):
            decided = self.fold(info, expr.test, depth + 1)
            return self.fold(info, expr.body if decided else expr.orelse, depth + 1) \
                if isinstance(decided, bool) else UNKNOWN
        if isinstance(expr, ast.Compare) and len(expr.ops) == 1:
            left = self.fold(info, expr.left, depth + 1)
            right = self.fold(info, expr.comparators[0], depth + 1)
            if left is UNKNOWN or right is UNKNOWN or not is_hashable(left) or not is_hashable(right):
                return UNKNOWN
            if isinstance(expr.ops[0], (ast.Eq, ast.Is)):
                return left == right
            if isinstance(expr.ops[0], (ast.NotEq, ast.IsNot)):
                return left != right
        return UNKNOWN

    def fold_config_get(self, info: ClassInfo | None, call: ast.Call, depth: int = 0):
        func = call.func
        args = [arg for arg in call.args if not isinstance(arg, ast.Starred)]
        if not (isinstance(func, ast.Attribute) and func.attr in ("get", "pop") and args and self._string(args[0])):
            return UNKNOWN
        base = func.value
        name = base.attr if is_self_attr(base) else base.id if isinstance(base, ast.Name) else None
        default = self.fold(info, args[1], depth + 1) if len(args) > 1 else None
        if name is None:
            return UNKNOWN
        if name.lower() in CONFIG_OBJECT_NAMES:
            value = self.config_field(args[0].value, depth)
            return default if value is UNKNOWN else value
        return UNKNOWN

    def _constant(self, expr: ast.Constant):
        """What libcst's literal gives: numbers and single (not implicitly concatenated) strings; True, False, None."""
        value = expr.value
        if value is None or isinstance(value, (bool, int, float)):
            return value
        return value if self._string(expr) else UNKNOWN

    def _string(self, expr: ast.expr) -> bool:
        """Whether the expression is one string (or bytes) literal: libcst's SimpleString."""
        if not isinstance(expr, ast.Constant) or not isinstance(expr.value, (str, bytes)):
            return False
        segment = ast.get_source_segment(self._text, expr)
        try:
            tokens = [token for token in tokenize.generate_tokens(io.StringIO(f"({segment})").readline)
                      if token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.ENDMARKER)]
        except (tokenize.TokenError, SyntaxError):
            return False
        return len(tokens) == 3 and tokens[1].type == tokenize.STRING


def parameter_defaults(arguments: ast.arguments) -> dict[str, ast.expr | None]:
    """A def's parameters -> their defaults (None: none), as FileIndex reads `__init__`'s."""
    positional = [*arguments.posonlyargs, *arguments.args]
    defaults = [None] * (len(positional) - len(arguments.defaults)) + list(arguments.defaults)
    found = dict(zip((argument.arg for argument in positional), defaults))
    found.update(zip((argument.arg for argument in arguments.kwonlyargs), arguments.kw_defaults))
    return found


def is_self_attr(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"


def reads_config_default(expr: ast.expr) -> bool:
    """index.reads_config_default of the same expression: a `.get(...)`/`.pop(...)` call anywhere in it."""
    return any(isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "pop")
               for node in ast.walk(expr))


def config_index(source: bytes) -> ConfigIndex | None:
    """The ConfigIndex of a file's source; None when CPython does not parse it as UTF-8 text."""
    import warnings

    try:
        text = source.decode("utf-8")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
    except (UnicodeDecodeError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    try:
        return ConfigIndex(tree, text)
    except RecursionError:
        return None
