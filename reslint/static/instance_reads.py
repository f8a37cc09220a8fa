"""What a model's own constructor reads from `self` where it builds a part: the expression that sets it.

A construction site inside a class (`self.encoder = Encoder(self.hparams.hidden_size, self.output_dim)`) reads
values the class set a few lines before. Two spellings say where a value comes from without running anything:
- `self.x`, set by `self.x = <expr>` earlier in the same method (or in `__init__`): that expression;
- `self.hparams.x` (or `self.hparams["x"]`) in a class whose `__init__` calls `self.save_hyperparameters()`
  (PyTorch Lightning): the constructor's own parameter `x` as it stands at that call (its default, or the
  value a statement before the call gave it: `if x is None: x = []`), which is what Lightning saves.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

SAVE_CALL = "save_hyperparameters"


@dataclass(frozen=True)
class InstanceRead:
    """Where a read of `self` gets its value: `node` evaluated in `function`, names as they stand before `line`."""

    node: ast.expr
    function: ast.FunctionDef | ast.AsyncFunctionDef
    line: int


def instance_read(node: ast.AST, scope: ast.AST, parents: dict) -> InstanceRead | None:
    """The expression a read of `self.x` / `self.hparams.x` in the method `scope` stands for, or None."""
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) or not scope.args.args:
        return None
    owner = parents.get(scope)
    if not isinstance(owner, ast.ClassDef):
        return None
    itself = scope.args.args[0].arg
    init = next((item for item in owner.body if isinstance(item, ast.FunctionDef) and item.name == "__init__"), None)
    saved = saved_name(node, itself)
    if saved is not None:
        return hyperparameter(init, saved)
    if isinstance(node, ast.Attribute) and is_name(node.value, itself):
        for function, before in ((scope, node.lineno), (init, None)):
            value = assigned_attribute(function, itself, node.attr, before) if function is not None else None
            if value is not None:
                return InstanceRead(value, function, value.lineno)
    return None


def saved_name(node: ast.AST, itself: str) -> str | None:
    """`x` of `self.hparams.x` / `self.hparams["x"]`, else None."""
    if isinstance(node, ast.Attribute) and is_hparams(node.value, itself):
        return node.attr
    if isinstance(node, ast.Subscript) and is_hparams(node.value, itself) and \
            isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.slice.value
    return None


def is_hparams(node: ast.AST, itself: str) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "hparams" and is_name(node.value, itself)


def is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def hyperparameter(init: ast.FunctionDef | None, name: str) -> InstanceRead | None:
    """The constructor parameter `name` as `self.save_hyperparameters()` in `init` saves it, or None when `init`
    saves no such parameter (no call, a call naming others, or `ignore=` naming it)."""
    if init is None or not any(parameter.arg == name for parameter in (*init.args.args, *init.args.kwonlyargs)):
        return None
    itself = init.args.args[0].arg if init.args.args else ""
    for call in (node for node in own_nodes(init) if isinstance(node, ast.Call)):
        if not (isinstance(call.func, ast.Attribute) and call.func.attr == SAVE_CALL and is_name(call.func.value, itself)):
            continue
        named = [arg.value for arg in call.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
        ignored = [item.value for keyword in call.keywords if keyword.arg == "ignore"
                   for item in getattr(keyword.value, "elts", [keyword.value])
                   if isinstance(item, ast.Constant) and isinstance(item.value, str)]
        if (named and name not in named) or name in ignored:
            return None
        return InstanceRead(ast.Name(id=name, ctx=ast.Load(), lineno=call.lineno, col_offset=0), init, call.lineno)
    return None


def assigned_attribute(function: ast.FunctionDef | ast.AsyncFunctionDef, itself: str, attribute: str,
                       before: int | None) -> ast.expr | None:
    """The last `self.<attribute> = <expr>` of `function` (outside nested functions), before the line `before`."""
    found: ast.Assign | ast.AnnAssign | None = None
    for node in own_nodes(function):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and \
                (before is None or node.lineno < before) and (found is None or node.lineno > found.lineno):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(target, ast.Attribute) and target.attr == attribute and is_name(target.value, itself)
                   for target in targets):
                found = node
    return found.value if found is not None else None


def own_nodes(function: ast.AST):
    """The nodes of a function's body, not those of functions or classes nested in it."""
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))
