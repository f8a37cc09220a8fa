"""The layer that first reads a forward's input, found in the source (never run): the width a conditioning
input must have is the `in_features` of the nn.Linear it reaches (`temb = self.time_emb_proj(act(temb))`),
the values a label may take the `num_embeddings` of the nn.Embedding it reaches.

The input is followed through the forward in source order: a name assigned from an expression that reads
it carries it on, and so do a parameter-free torch layer (an activation, dropout), torch's functions and a
tensor's methods; what a function or a method of the project makes of it (a sinusoidal projection) is not
it, and a call of a submodule (`self.norm1(x, emb=temb)`, `self.blocks[0](...)`, the loop variable of
`for block in self.blocks`, a Sequential's first layer) is followed into that submodule's forward, LEVELS
deep. The first sized layer it reaches (Linear, Embedding, LayerNorm, RMSNorm) is the answer. A submodule
of the project that takes it without reaching one (a sinusoidal timestep projection) ends the search
with no answer: what it makes of the input is not the input.
"""

from __future__ import annotations

import ast
import inspect
from typing import Any

from reslint.trace.forward_body import forward_tree

LEVELS = 4
SHAPE_READS = frozenset({"shape", "dtype", "device", "ndim", "size", "dim", "is_floating_point"})
STOP = object()  # a submodule took the input without reaching a sized layer


def consuming_layer(model: Any, name: str) -> Any:
    """The first sized layer (Linear, Embedding, LayerNorm, RMSNorm) the forward's input `name` reaches, or None."""
    found = follow(model, name, 0)
    return None if found is STOP else found


def sized(module: Any) -> bool:
    from torch import nn

    return isinstance(module, (nn.Linear, nn.Embedding, nn.LayerNorm, nn.RMSNorm))


def passes_on(module: Any) -> bool:
    """A torch layer without parameters that keeps its input's shape (an activation, dropout, identity)."""
    from torch import nn

    return type(module).__module__.startswith("torch.nn") and next(module.parameters(), None) is None \
        and not isinstance(module, (nn.Sequential, nn.ModuleList, nn.ModuleDict))


def follow(model: Any, name: str, level: int) -> Any:
    """The sized layer `name` reaches in `model`'s forward, STOP, or None (nothing reads it)."""
    tree, parameters = forward_tree(model)
    if tree is None or name not in parameters or level > LEVELS:
        return None
    carried, aliases = {name}, {}
    for statement in statements(tree.body[0].body if tree.body else []):
        if isinstance(statement, ast.For):
            loop = resolve(model, statement.iter, aliases)
            if loop is not None and isinstance(statement.target, (ast.Name, ast.Tuple)):
                target = statement.target.elts[-1] if isinstance(statement.target, ast.Tuple) else statement.target
                first = first_child(loop)
                if isinstance(target, ast.Name) and first is not None:
                    aliases[target.id] = first
            continue
        for call in calls(statement):
            found = called(model, call, carried, aliases, level)
            if found is not None:
                return found
        if isinstance(statement, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and statement.value is not None \
                and reads(statement.value, carried, model, aliases):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            carried |= {node.id for target in targets for node in ast.walk(target) if isinstance(node, ast.Name)}
    return None


def statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """Every statement in source order, those of branches and loops too (a loop's own line before its body)."""
    found: list[ast.stmt] = []
    for statement in body:
        found.append(statement)
        for field in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(statement, field, None)
            if isinstance(inner, list):
                found += statements([item for item in inner if isinstance(item, ast.stmt)]
                                    + [each for handler in inner if isinstance(handler, ast.ExceptHandler)
                                       for each in handler.body])
    return found


def calls(statement: ast.stmt) -> list[ast.Call]:
    """The calls of one statement (not of its nested statements), innermost first."""
    found: list[ast.Call] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.stmt):
                visit(child)
        if isinstance(node, ast.Call):
            found.append(node)

    for child in ast.iter_child_nodes(statement):
        if not isinstance(child, ast.stmt):
            visit(child)
    return found


def reads(expression: ast.AST, carried: set[str], model: Any = None, aliases: dict | None = None) -> bool:
    """Whether `expression` reads a carried value (not only its shape, dtype or device). With `model`, the
    value a submodule makes of it is not it (that submodule was followed), and a call of a submodule the
    model left None never runs."""
    if isinstance(expression, ast.Attribute) and expression.attr in SHAPE_READS:
        return False
    if isinstance(expression, ast.Name):
        return expression.id in carried
    if model is not None and isinstance(expression, ast.Call):
        target = resolve(model, expression.func, aliases or {})
        if (target is not None and target is not model and not passes_on(target)) or unset(model, expression.func) \
                or method(model, expression.func) or project_function(model, expression.func):
            return False
    return any(reads(child, carried, model, aliases) for child in ast.iter_child_nodes(expression))


def method(model: Any, node: ast.AST) -> bool:
    """`self.helper(...)`, a method of the model's own (not a layer): what it returns is not known to be the input."""
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self" \
        and callable(getattr(type(model), node.attr, None))


def project_function(model: Any, node: ast.AST) -> bool:
    """`sinusoid(t)`, `utils.embed(t)`: a function the forward's module binds that is not torch's or a builtin."""
    if not isinstance(node, (ast.Name, ast.Attribute)):
        return False
    path = []
    while isinstance(node, ast.Attribute):
        path.insert(0, node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id == "self":
        return False
    scope = getattr(type(model).forward, "__globals__", {})
    value = scope.get(node.id)
    for part in path:
        value = getattr(value, part, None)
    home = getattr(value, "__module__", None) or ""
    return callable(value) and not isinstance(value, type) and home.split(".")[0] not in ("torch", "builtins", "einops")


def unset(model: Any, node: ast.AST) -> bool:
    """`self.emb` where the model keeps None: a call of it is on a branch the model, as built, never takes."""
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self" \
        and node.attr in vars(model) and vars(model)[node.attr] is None


def resolve(model: Any, node: ast.AST, aliases: dict[str, Any]) -> Any:
    """The submodule an expression names (`self.a.b`, `self.blocks[0]`, a loop variable), or None."""
    from torch import nn

    if isinstance(node, ast.Name):
        return model if node.id == "self" else aliases.get(node.id)
    if isinstance(node, ast.Attribute):
        owner = resolve(model, node.value, aliases)
        value = getattr(owner, node.attr, None) if isinstance(owner, nn.Module) else None
        return value if isinstance(value, nn.Module) else None
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int):
        owner = resolve(model, node.value, aliases)
        if isinstance(owner, (nn.Sequential, nn.ModuleList)) and -len(owner) <= node.slice.value < len(owner):
            return owner[node.slice.value]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "enumerate" and node.args:
        return resolve(model, node.args[0], aliases)
    return None


def first_child(container: Any) -> Any:
    from torch import nn

    if isinstance(container, (nn.Sequential, nn.ModuleList)):
        return container[0] if len(container) else None
    return None


def called(model: Any, call: ast.Call, carried: set[str], aliases: dict[str, Any], level: int) -> Any:
    """What a call that is handed a carried value makes of it: a sized layer, STOP, or None (pass on)."""
    from torch import nn

    target = resolve(model, call.func, aliases)
    if target is None or target is model:
        return None
    position = next((index for index, argument in enumerate(call.args)
                     if not isinstance(argument, ast.Starred) and reads(argument, carried, model, aliases)), None)
    keyword = next((item.arg for item in call.keywords if item.arg and reads(item.value, carried, model, aliases)),
                   None)
    if position is None and keyword is None:
        return None
    if isinstance(target, nn.Sequential) and position == 0:
        for layer in target:  # its first layer that is not an activation decides
            if not passes_on(layer):
                return layer if sized(layer) else into(layer, 0, None, level)
        return None
    if sized(target):
        return target if position == 0 or keyword == "input" else None
    if passes_on(target) or isinstance(target, (nn.Sequential, nn.ModuleList, nn.ModuleDict)):
        return None
    return into(target, position, keyword, level)


def into(target: Any, position: int | None, keyword: str | None, level: int) -> Any:
    """The sized layer the argument at `position` (or `keyword`) reaches in a submodule's forward, else STOP."""
    try:
        names = [parameter.name for parameter in inspect.signature(target.forward).parameters.values()
                 if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return None
    inner = names[position] if position is not None and position < len(names) else keyword
    if inner is None:
        return None
    found = follow(target, inner, level + 1)
    return STOP if found is None else found
