"""The default of a required constructor argument, followed up the chain of constructors that pass it on.

pytorch-forecasting's TiDE `_ResidualBlock(..., use_layer_norm)` has no default; `_TideModule` passes its own
required `use_layer_norm` on, and `TiDEModel(use_layer_norm=False)` in another file holds the default. gluonts'
`PatchTSTModel(norm_first)` is built as `PatchTSTModel(**model_kwargs)` by a lightning module whose
`model_kwargs` the estimator passes as a dict literal, `"norm_first": self.norm_first`, set from the estimator's
`norm_first=False`. A configurable placement is judged by its default (issue 12), so the default is read
where the chain holds it: parameter -> the argument each construction site passes -> a literal, a constant,
the caller's own parameter (its default, or its callers', CHAIN_LENGTH constructors up at most), an attribute
the caller's `__init__` set, a local name, a key of a dict literal passed as `**kwargs`.

The sites that resolve must agree; a site passing what only running the project gives (a config object read
at run time) is left out; none resolving, or two disagreeing, is UNKNOWN. Read with `ast` through the
project index (nothing runs, torch is not imported), memoised per project run. Both engines ask here: the
static engine for a flag or a conditional submodule whose parameter has no default, the trace engine for
the value of a required flag it builds a discovered model with.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

from reslint.cross_file_reads import note
from reslint.static.construction_sites import bound_argument, parameter_default, parameter_of
from reslint.static.index import UNKNOWN

CHAIN_LENGTH = 4  # constructors up from the one whose parameter is asked
MAX_SITES = 40  # construction sites read for one answer, the whole chain together
MAX_STEPS = 400  # expressions read for one answer (`x = x` at module level would never end)
LITERALS = (bool, str, int, float, type(None))


def chained_default(path: str | os.PathLike, owner: str, parameter: str) -> tuple[object, tuple[str, ...]]:
    """(the default of `parameter` of the class or top-level function `owner` of the file `path`, the files
    read for it). UNKNOWN when nothing in the chain fixes it."""
    from reslint.project_index import ProjectIndex

    file = Path(os.path.abspath(path))
    project = ProjectIndex.for_file(file)
    key = ("chained-default", ProjectIndex._run, file, owner, parameter)
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

    def answer(self, file: Path, owner: str, parameter: str) -> tuple[object, tuple[str, ...]]:
        value = self.parameter_value(file, owner, parameter, (), 0)
        return value, tuple(self.reads)

    # ----- a parameter: its default, else what its construction sites pass -----------------------------

    def parameter_value(self, file: Path, owner: str, name: str, keys: tuple, hops: int):
        tree = self.tree(file)
        definition = top_level(tree, owner) if tree is not None else None
        function = constructor(definition)
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
        if hops >= CHAIN_LENGTH:
            return UNKNOWN
        found = []
        sites = self.project.memo(("chain-sites", type(self.project)._run, file, owner),
                                  lambda: self.project.construction_sites(file, owner)) or ()
        for site in sites:
            if self.sites_left <= 0:
                return UNKNOWN
            self.sites_left -= 1
            caller_tree = self.tree(site.path)
            scope = top_level(caller_tree, site.scope) if caller_tree is not None and site.scope else caller_tree
            for call, enclosing, cls in calls_at(scope, site.line, owner):
                if parameter is function.args.kwarg:
                    named = [item.value for item in call.keywords if item.arg == keys[0]]
                    expr, inner = (named[0], keys[1:]) if named else (_spread(call), keys)
                else:
                    expr, inner = _passed(function, parameter, call, keys)
                if expr is not None:
                    found.append(self.value(site.path, caller_tree, enclosing, cls, expr, inner, hops + 1))
        values = {_identity(value): value for value in found if value is not UNKNOWN}
        return next(iter(values.values())) if len(values) == 1 else UNKNOWN

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
        if isinstance(expr, ast.Name):
            return self.name_value(file, tree, function, cls, expr.id, keys, hops)
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self" and \
                cls is not None:
            init = constructor(cls)
            assigned = [statement.value for statement in ast.walk(init) if isinstance(statement, ast.Assign)
                        and any(_is_self_attribute(target, expr.attr) for target in statement.targets)] \
                if init is not None else []
            if len(assigned) == 1 and function is not init:
                return self.value(file, tree, init, cls, assigned[0], keys, hops)
        return UNKNOWN

    def name_value(self, file: Path, tree: ast.Module, function, cls, name: str, keys: tuple, hops: int):
        owner = cls.name if function is not None and function.name == "__init__" and cls is not None else \
            function.name if function is not None and top_level(tree, function.name) is function else ""
        if keys and function is not None and function.args.kwarg is not None and function.args.kwarg.arg == name:
            # `Block(**block_kwargs)` in `def __init__(self, **block_kwargs)`: the keyword its callers pass
            return self.parameter_value(file, owner, keys[0], keys[1:], hops) if owner else UNKNOWN
        if function is not None and parameter_of(function, name) is not None:
            if owner:
                return self.parameter_value(file, owner, name, keys, hops)
            parameter = parameter_of(function, name)
            default = parameter_default(function, parameter)
            return self.value(file, tree, function, cls, default, keys, hops) if default is not None else UNKNOWN
        for scope in ((function.body if function is not None else []), tree.body):
            assigned = [statement.value for statement in scope if isinstance(statement, ast.Assign)
                        and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name)
                        and statement.targets[0].id == name]
            if assigned:
                if len(assigned) != 1:
                    return UNKNOWN
                inside = function if scope is not tree.body else None
                return self.value(file, tree, inside, cls if inside is not None else None, assigned[0], keys, hops)
        return UNKNOWN

    def tree(self, file: Path) -> ast.Module | None:
        self.reads.setdefault(str(file), None)
        return self.project.syntax_tree(Path(file))


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
