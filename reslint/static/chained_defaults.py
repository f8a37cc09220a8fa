"""The default of a required constructor argument, followed up the chain of constructors that pass it on.

pytorch-forecasting's TiDE `_ResidualBlock(..., use_layer_norm)` has no default; `_TideModule` passes its own
required `use_layer_norm` on, and `TiDEModel(use_layer_norm=False)` in another file holds the default. gluonts'
`PatchTSTModel(norm_first)` is built as `PatchTSTModel(**model_kwargs)` by a lightning module whose
`model_kwargs` the estimator passes as a dict literal, `"norm_first": self.norm_first`, set from the estimator's
`norm_first=False`. A configurable placement is judged by its default (issue 12), so the default is read
where the chain holds it: parameter -> the argument each construction site passes -> a literal, a constant,
the caller's own parameter (its default, or its callers', CHAIN_LENGTH constructors up at most), an attribute
the caller's `__init__` set, a local name (as the statements before the call leave it), a key of a dict literal
passed as `**kwargs`, a method's parameter (what the calls of the method in its class pass).

A class passed down by name is a value too (darts' TSMixer: `TSMixerModel(norm_type="LayerNorm")`, resolved by
`getattr(layer_norm_variants, norm_type)` two constructors down): an imported class, `getattr(module, <string
reaching it>)`, or a dict of classes indexed by such a string read as a NamedClass, the class's dotted name.

The sites that resolve must agree; a site passing what only running the project gives (a config object read
at run time) is left out; none resolving, or two disagreeing, is UNKNOWN. Read with `ast` through the
project index (nothing runs, torch is not imported), memoised per project run. Both engines ask here: the
static engine for a flag or a conditional submodule whose parameter has no default, the trace engine for
the value of a required flag it builds a discovered model with.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from pathlib import Path

import libcst as cst

from reslint.cross_file_reads import note
from reslint.static import torch_api
from reslint.static.construction_sites import bound_argument, parameter_default, parameter_of
from reslint.static.index import UNKNOWN, ModuleSpec, name_spec, parameter_test

CHAIN_LENGTH = 4  # constructors up from the one whose parameter is asked
MAX_SITES = 40  # construction sites read for one answer, the whole chain together
MAX_STEPS = 400  # expressions read for one answer (`x = x` at module level would never end)
LITERALS = (bool, str, int, float, type(None))


@dataclass(frozen=True)
class NamedClass:
    """A class the chain names: its dotted name as imported from the project root (`torch.nn.LayerNorm`,
    `darts.models.components.layer_norm_variants.LayerNorm`)."""

    qualified: str

    @property
    def name(self) -> str:
        return self.qualified.rpartition(".")[2]


def chained_default(path: str | os.PathLike, owner: str, parameter: str) -> tuple[object, tuple[str, ...]]:
    """(the default of `parameter` of the class or top-level function `owner` of the file `path`, the files
    read for it). UNKNOWN when nothing in the chain fixes it."""
    from reslint.project_index import ProjectIndex

    file = Path(os.path.abspath(path))
    project = ProjectIndex.for_file(file)
    key = ("chained-default", ProjectIndex.current_run(), file, owner, parameter)
    found = project.memo(key, lambda: _Chain(project).answer(file, owner, parameter))
    if found is None:
        return UNKNOWN, ()
    note(found[1])  # memoised: a second asker depends on the chain's files as much as the first
    return found


class _Chain:
    def __init__(self, project) -> None:
        self.project = project
        self.sites_left = MAX_SITES
        self.steps_left = MAX_STEPS
        self.reads: dict[str, None] = {}
        self.bound: dict[tuple[int, str], object] = {}  # (function, name) -> its value where a walk stands
        self.pending: set[tuple[int, tuple]] = set()  # assignments being read

    def answer(self, file: Path, owner: str, parameter: str) -> tuple[object, tuple[str, ...]]:
        value = self.parameter_value(file, owner, parameter, (), 0)
        return value, tuple(self.reads)

    # ----- a parameter: its default, else what its construction sites pass -----------------------------

    def parameter_value(self, file: Path, owner: str, name: str, keys: tuple, hops: int, method=None):
        """The parameter `name` of the constructor of `owner`, or of `method` of the class `owner` (its callers
        are the calls `self.method(...)` in that class: no constructor, no hop)."""
        tree = self.tree(file)
        definition = top_level(tree, owner) if tree is not None else None
        function = method if method is not None else constructor(definition)
        if function is None:
            return UNKNOWN
        parameter = parameter_of(function, name)
        if parameter is None:
            # `**kwargs` takes it: the key `name` of what the callers pass as kwargs
            if function.args.kwarg is None or keys:
                return UNKNOWN
            parameter, keys = function.args.kwarg, (name,)
        else:
            default = parameter_default(function, parameter)
            if default is not None:
                return self.value(file, tree, function, definition, default, keys, hops)
        if method is not None:
            calls = [(file, tree, call, enclosing, definition) for call, enclosing in method_calls(definition, method)]
            step = 0
        else:
            if hops >= CHAIN_LENGTH:
                return UNKNOWN
            calls = self.construction_calls(file, owner)
            step = 1
        found = []
        for site_file, site_tree, call, enclosing, cls in calls:
            if self.sites_left <= 0:
                return UNKNOWN
            self.sites_left -= 1
            if parameter is function.args.kwarg:
                named = [item.value for item in call.keywords if item.arg == keys[0]]
                expr, inner = (named[0], keys[1:]) if named else (_spread(call), keys)
            else:
                expr, inner = _passed(function, parameter, call, keys)
            if expr is not None:
                found.append(self.value(site_file, site_tree, enclosing, cls, expr, inner, hops + step))
        values = {_identity(value): value for value in found if value is not UNKNOWN}
        return next(iter(values.values())) if len(values) == 1 else UNKNOWN

    def construction_calls(self, file: Path, owner: str):
        sites = self.project.memo(("chain-sites", type(self.project).current_run(), file, owner),
                                  lambda: self.project.construction_sites(file, owner)) or ()
        for site in sites:
            caller_tree = self.tree(site.path)
            scope = top_level(caller_tree, site.scope) if caller_tree is not None and site.scope else caller_tree
            for call, enclosing, cls in calls_at(scope, site.line, owner):
                yield site.path, caller_tree, call, enclosing, cls

    # ----- an expression in a caller's function ---------------------------------------------------------

    def value(self, file: Path, tree: ast.Module, function, cls, expr: ast.expr, keys: tuple, hops: int):
        self.steps_left -= 1
        if self.steps_left < 0:
            return UNKNOWN
        if isinstance(expr, ast.Constant):
            return expr.value if not keys and isinstance(expr.value, LITERALS) else UNKNOWN
        if isinstance(expr, ast.UnaryOp):
            inner = self.value(file, tree, function, cls, expr.operand, keys, hops)
            if isinstance(expr.op, ast.Not) and inner is not UNKNOWN:
                return not inner
            if isinstance(expr.op, ast.USub) and isinstance(inner, (int, float)) and not isinstance(inner, bool):
                return -inner
            return UNKNOWN
        if isinstance(expr, ast.Dict) and keys:
            for key, item in zip(expr.keys, expr.values):
                if isinstance(key, ast.Constant) and key.value == keys[0]:
                    return self.value(file, tree, function, cls, item, keys[1:], hops)
            return UNKNOWN
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "dict" and keys:
            for item in expr.keywords:
                if item.arg == keys[0]:
                    return self.value(file, tree, function, cls, item.value, keys[1:], hops)
            return UNKNOWN
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "getattr" and \
                len(expr.args) == 2 and not expr.keywords and not keys:
            # `getattr(layer_norm_variants, norm_type)`: the class of that module the string names
            module = self.imported_name(file, tree, function, expr.args[0])
            attribute = self.value(file, tree, function, cls, expr.args[1], (), hops)
            return NamedClass(f"{module}.{attribute}") if module and isinstance(attribute, str) and \
                attribute.isidentifier() else UNKNOWN
        if isinstance(expr, ast.Subscript) and not isinstance(expr.slice, ast.Slice):
            # `NORMS[norm_type]`: the entry of a dict literal the string names
            key = self.value(file, tree, function, cls, expr.slice, (), hops)
            if not isinstance(key, str):
                return UNKNOWN
            return self.value(file, tree, function, cls, expr.value, (key, *keys), hops)
        if isinstance(expr, ast.Name):
            return self.name_value(file, tree, function, cls, expr, keys, hops)
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self" and \
                cls is not None:
            init = constructor(cls)
            assigned = [statement.value for statement in ast.walk(init) if isinstance(statement, ast.Assign)
                        and any(_is_self_attribute(target, expr.attr) for target in statement.targets)] \
                if init is not None else []
            if len(assigned) == 1 and function is not init:
                return self.value(file, tree, init, cls, assigned[0], keys, hops)
            return UNKNOWN
        if isinstance(expr, ast.Attribute) and not keys:
            return self.named_class(file, tree, function, expr)
        return UNKNOWN

    def name_value(self, file: Path, tree: ast.Module, function, cls, expr: ast.Name, keys: tuple, hops: int):
        name = expr.id
        if function is not None and (id(function), name) in self.bound:
            return self.bound[id(function), name] if not keys else UNKNOWN
        if function is not None and _assigned_in(function, name):
            # a name the function rebinds (`norm_type = getattr(variants, norm_type)`): as the statements
            # before this line leave it
            return self.reaching(file, tree, function, cls, name, expr.lineno, keys, hops)
        return self.incoming(file, tree, function, cls, name, keys, hops, expr)

    def incoming(self, file: Path, tree: ast.Module, function, cls, name: str, keys: tuple, hops: int, expr=None):
        """The value `name` has where `function` starts: its parameter's, a module constant's, an import's."""
        method = function if function is not None and cls is not None and function in cls.body and \
            function.name != "__init__" else None
        owner = cls.name if cls is not None and (method is not None or function is not None and
                                                 function.name == "__init__") else \
            function.name if function is not None and top_level(tree, function.name) is function else ""
        if keys and function is not None and function.args.kwarg is not None and function.args.kwarg.arg == name:
            # `Block(**block_kwargs)` in `def __init__(self, **block_kwargs)`: the keyword its callers pass
            return self.parameter_value(file, owner, keys[0], keys[1:], hops, method) if owner else UNKNOWN
        if function is not None and parameter_of(function, name) is not None:
            if owner:
                return self.parameter_value(file, owner, name, keys, hops, method)
            parameter = parameter_of(function, name)
            default = parameter_default(function, parameter)
            return self.value(file, tree, function, cls, default, keys, hops) if default is not None else UNKNOWN
        for scope in ((function.body if function is not None else []), tree.body):
            assigned = _assignments(scope, name)
            if assigned:
                if len(assigned) != 1:
                    return UNKNOWN
                inside = function if scope is not tree.body else None
                if (id(assigned[0]), keys) in self.pending:
                    return UNKNOWN  # `X = X`, `a = b; b = a`
                self.pending.add((id(assigned[0]), keys))
                try:
                    return self.value(file, tree, inside, cls if inside is not None else None, assigned[0], keys, hops)
                finally:
                    self.pending.discard((id(assigned[0]), keys))
        return self.named_class(file, tree, function, expr) if expr is not None and not keys else UNKNOWN

    # ----- a name the function rebinds: the statements before the line, walked --------------------------

    def reaching(self, file: Path, tree: ast.Module, function, cls, name: str, line: int, keys: tuple, hops: int):
        start = self.incoming(file, tree, function, cls, name, keys, hops)
        value = _Walk(self, file, tree, function, cls, name, keys, hops).block(function.body, start, line)
        return UNKNOWN if value is _STOPS else value

    # ----- classes named by the code ---------------------------------------------------------------------

    def named_class(self, file: Path, tree: ast.Module, function, expr: ast.expr):
        """`nn.LayerNorm`, an imported class or a class of this file: a NamedClass; else UNKNOWN."""
        dotted = self.imported_name(file, tree, function, expr)
        return NamedClass(dotted) if dotted and dotted.rpartition(".")[2][:1].isupper() else UNKNOWN

    def imported_name(self, file: Path, tree: ast.Module, function, expr: ast.expr) -> str:
        """The dotted name, from the project root, of an import (`nn` -> torch.nn), of a member of one
        (`nn.LayerNorm`), of a top-level class of the file; "" for anything else (a local, an attribute of a
        value)."""
        if isinstance(expr, ast.Attribute):
            base = self.imported_name(file, tree, function, expr.value)
            return f"{base}.{expr.attr}" if base else ""
        if not isinstance(expr, ast.Name) or function is not None and (
                parameter_of(function, expr.id) is not None or _assigned_in(function, expr.id)):
            return ""
        here = _module_of(file)
        for statement in reversed(self.project.imports(Path(file))):
            for position, local in enumerate(statement.local_names):
                if local != expr.id:
                    continue
                if not statement.names:  # `import torch.nn as nn` / `import torch`
                    first = statement.module.split(".")[0]
                    return statement.module if local != first else first
                module = statement.module
                if statement.level:
                    if here is None:
                        return ""
                    package = here.split(".")[:len(here.split(".")) - statement.level]
                    module = ".".join([*package, module] if module else package)
                return f"{module}.{statement.names[position]}" if module else statement.names[position]
        definition = top_level(tree, expr.id)
        if isinstance(definition, ast.ClassDef):
            return f"{here}.{expr.id}" if here else expr.id
        return ""

    def tree(self, file: Path) -> ast.Module | None:
        self.reads.setdefault(str(file), None)
        return self.project.syntax_tree(Path(file))


_STOPS = object()  # a path that raises or returns before the line


class _Walk:
    """The value of one name along the statements of a function up to a line: assignments to it are read, ifs
    whose test folds from the name's value take one branch, others both (their values must agree). With `keys`
    the value followed is the name's entry `keys` (`params["norm_type"]`), and no test folds."""

    def __init__(self, chain: _Chain, file: Path, tree: ast.Module, function, cls, name: str, keys: tuple,
                 hops: int) -> None:
        self.chain, self.file, self.tree, self.function, self.cls = chain, file, tree, function, cls
        self.name, self.keys, self.hops = name, keys, hops

    def block(self, statements, value, line: int):
        for statement in statements:
            if value is _STOPS or statement.lineno >= line:
                return value
            if statement.end_lineno >= line:  # the line is inside: only the part of the path that reaches it
                return self.inside(statement, value, line)
            value = self.statement(statement, value)
        return value

    def inside(self, statement: ast.stmt, value, line: int):
        if isinstance(statement, ast.If):
            branch = statement.body if statement.body[0].lineno <= line and (
                not statement.orelse or statement.orelse[0].lineno > line) else statement.orelse
            return self.block(branch, value, line)
        if isinstance(statement, (ast.With, ast.Try)) and statement.body[-1].end_lineno >= line:
            return self.block(statement.body, value, line)
        return value if not _assigns(statement, self.name) else UNKNOWN

    def statement(self, statement: ast.stmt, value):
        if isinstance(statement, (ast.Raise, ast.Return)):
            return _STOPS
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and \
                isinstance(statement.targets[0], ast.Name) and statement.targets[0].id == self.name:
            return self.evaluate(statement.value, value, self.keys)
        if isinstance(statement, ast.If):
            test = self.fold(statement.test, value)
            taken = [statement.body] if test is True else [statement.orelse] if test is False else \
                [statement.body, statement.orelse]
            ends = [self.block(branch, value, statement.end_lineno + 1) for branch in taken]
            flowing = {_identity(end): end for end in ends if end is not _STOPS}
            return _STOPS if not flowing else next(iter(flowing.values())) if len(flowing) == 1 else UNKNOWN
        if isinstance(statement, ast.With):
            return self.block(statement.body, value, statement.end_lineno + 1)
        return UNKNOWN if _assigns(statement, self.name) else value

    def evaluate(self, expr: ast.expr, value, keys: tuple = ()):
        key = (id(self.function), self.name)
        self.chain.bound[key] = value if not self.keys else UNKNOWN
        try:
            return self.chain.value(self.file, self.tree, self.function, self.cls, expr, keys, self.hops)
        finally:
            del self.chain.bound[key]

    def fold(self, test: ast.expr, value):
        """True/False when the test reads only the name (and constants) and its value decides it; else None."""
        if value is UNKNOWN or self.keys:
            return None
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = self.fold(test.operand, value)
            return None if inner is None else not inner
        if isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "isinstance" and \
                len(test.args) == 2 and self.is_name(test.args[0]) and isinstance(test.args[1], ast.Name):
            kinds = {"str": str, "bool": bool, "int": int, "float": float}
            kind = kinds.get(test.args[1].id)
            return isinstance(value, kind) if kind is not None else None
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and self.is_name(test.left):
            other = self.evaluate(test.comparators[0], value)
            if isinstance(test.ops[0], (ast.Eq, ast.NotEq)) and isinstance(other, LITERALS):
                return (value == other) is isinstance(test.ops[0], ast.Eq)
            members = self.members(test.comparators[0])
            if isinstance(test.ops[0], (ast.In, ast.NotIn)) and members is not None:
                return (value in members) is isinstance(test.ops[0], ast.In)
        return None

    def is_name(self, expr: ast.expr) -> bool:
        return isinstance(expr, ast.Name) and expr.id == self.name

    def members(self, expr: ast.expr):
        """The constants of a list, tuple or set literal, or of a module constant bound to one."""
        if isinstance(expr, ast.Name):
            assigned = _assignments(self.tree.body, expr.id)
            expr = assigned[0] if len(assigned) == 1 else None
        if isinstance(expr, (ast.List, ast.Tuple, ast.Set)) and all(
                isinstance(item, ast.Constant) for item in expr.elts):
            return [item.value for item in expr.elts]
        return None


def _assignments(statements, name: str) -> list[ast.expr]:
    """The values `name = value` statements of this block (not nested ones) give the name."""
    return [statement.value for statement in statements if isinstance(statement, ast.Assign)
            and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name)
            and statement.targets[0].id == name]


def _assigned_in(function, name: str) -> bool:
    return any(_assigns(statement, name) for statement in function.body)


def _assigns(statement: ast.stmt, name: str) -> bool:
    for node in ast.walk(statement):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.With, ast.NamedExpr)):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [item.optional_vars for item in node.items] if isinstance(node, ast.With) else [node.target]
            if any(isinstance(inner, ast.Name) and inner.id == name
                   for target in targets if target is not None for inner in ast.walk(target)):
                return True
    return False


def _module_of(file: Path) -> str | None:
    from reslint.project_index import module_name

    found = module_name(file)
    return found[0] if found is not None else None


def method_calls(cls, method):
    """(call, enclosing method) of the calls `self.method(...)` / `cls.method(...)` / `Class.method(...)` in the
    class's own methods."""
    if not isinstance(cls, ast.ClassDef):
        return
    for function in cls.body:
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr == method.name and isinstance(node.func.value, ast.Name) and \
                    node.func.value.id in ("self", "cls", cls.name):
                yield node, function


def top_level(tree: ast.Module | None, name: str):
    for statement in tree.body if tree is not None else ():
        if isinstance(statement, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and statement.name == name:
            return statement
    return None


def constructor(definition):
    """A class's own `__init__`, or the top-level function itself."""
    if isinstance(definition, ast.ClassDef):
        return next((item for item in definition.body if isinstance(item, ast.FunctionDef)
                     and item.name == "__init__"), None)
    return definition if isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def calls_at(scope, line: int, owner: str):
    """(call, innermost enclosing function, its class) of the calls of `owner` starting on `line` in `scope`."""
    if scope is None:
        return
    pending = [(scope, None, scope if isinstance(scope, ast.ClassDef) else None)]
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        pending = [(scope, scope, None)]
    while pending:
        node, function, cls = pending.pop()
        if isinstance(node, ast.Call) and node.lineno == line and _called_name(node.func) == owner:
            yield node, function, cls
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                inner = child if not isinstance(child, ast.Lambda) else function
                pending.append((child, inner, cls))
            elif isinstance(child, ast.ClassDef):
                pending.append((child, None, child))
            elif getattr(child, "end_lineno", line) >= line and getattr(child, "lineno", line) <= line or \
                    not hasattr(child, "lineno"):
                pending.append((child, function, cls))


def _called_name(func: ast.expr) -> str:
    # An alias (`from m import Block as B`) is the construction site search's business: it found this line.
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _passed(function, parameter: ast.arg, call: ast.Call, keys: tuple):
    """The expression a call passes for `parameter`, and the keys still to read: an explicit argument, else the
    key `parameter` of a `**mapping` the call spreads."""
    expr = bound_argument(function, parameter, call)
    if expr is not None:
        return expr, keys
    spread = _spread(call)
    return (spread, (parameter.arg, *keys)) if spread is not None else (None, keys)


def _spread(call: ast.Call) -> ast.expr | None:
    spreads = [item.value for item in call.keywords if item.arg is None]
    return spreads[0] if len(spreads) == 1 else None


def _is_self_attribute(target: ast.expr, attr: str) -> bool:
    return isinstance(target, ast.Attribute) and target.attr == attr and isinstance(target.value, ast.Name) and \
        target.value.id == "self"


def _identity(value) -> tuple:
    return type(value).__name__, repr(value)


def parameter_value(index, info, name: str):
    """The value the constructor parameter `name` of `info` (a class of the static engine's file index `index`)
    takes by default: its own default folded, else the default up the chain of constructors. The files the
    chain read join `index.config_reads`, so a cached result goes stale with them."""
    if name not in info.init_defaults:
        return UNKNOWN
    default = info.init_defaults[name]
    if default is not None:
        return index.fold(None, default)
    if index.source_path is None or index.classes.get(info.name) is not info:
        return UNKNOWN
    value, reads = chained_default(index.source_path, info.name, name)
    own = os.path.abspath(index.source_path)
    index.config_reads.extend(path for path in reads if path != own and path not in index.config_reads)
    return value


def chosen_submodule(index, info, attr: str, parameter_source):
    """The module `self.attr` is when `__init__` chose it by a constructor parameter: `norm_type((n, d)) if not
    normalize_before else nn.Identity()` (the branch the flag's value takes), `norm_type(d)` with `norm_type` a
    required class parameter (the class the chain names). `parameter_source(name)` gives a parameter's value as
    this construction sees it. Returns a ModuleSpec, NO_MODULE for a branch that builds none (`None`), or None
    when nothing is decided (the index's own spec stands)."""
    expr = info.attr_values.get(attr)
    if type(expr) is cst.IfExp:
        test = parameter_test(info, expr.test)
        value = parameter_source(test[0]) if test is not None else UNKNOWN
        if value is UNKNOWN or isinstance(value, NamedClass):
            return None
        expr = expr.body if bool(value) == test[1] else expr.orelse
        if type(expr) is cst.Name and expr.value == "None":
            return NO_MODULE
        if not _class_parameter_call(info, expr):
            spec = index.spec_from_expr(info, expr, {})
            if spec is not None:
                name_spec(spec, attr)
            return spec
    if not _class_parameter_call(info, expr):
        return None
    named = parameter_source(expr.func.value)
    if not isinstance(named, NamedClass):
        return None
    member = torch_api.torch_member(named.qualified)
    spec = ModuleSpec("builtin", member, expr, info, tuple(expr.args)) if member and member[:1].isupper() and \
        "." not in member else ModuleSpec("external", named.qualified, expr, info, tuple(expr.args))
    name_spec(spec, attr)
    return spec


NO_MODULE = object()


def _class_parameter_call(info, expr) -> bool:
    """`norm_type(d)`: a call of a constructor parameter without a default."""
    return type(expr) is cst.Call and type(expr.func) is cst.Name and expr.func.value in info.init_defaults and \
        info.init_defaults[expr.func.value] is None
