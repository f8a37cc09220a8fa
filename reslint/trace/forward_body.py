"""What a forward's own body says about the shape of its inputs, read from its source (never run).

An einsum or einops pattern names one axis per dimension of its operand (`einsum('l b n d, v b n l -> ...',
hiddens, weights)`: `hiddens` is 4-D, `rearrange(img, 'b c (h p1) (w p2) -> ...')`: `img` is 4-D), and so
does unpacking a shape (`b, h, n, d = q.shape`). The first such use of a parameter, before a statement
of the forward always assigns it anew, gives its rank.
An assertion's or an exception's message that names an optional parameter (`assert not (self.cross_attend
^ exists(context)), 'context must be passed in if cross_attend is set to True'`) says that the model, as
built, may need it.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from typing import Any

EINSUM_NAMES = frozenset({"einsum"})
EINOPS_NAMES = frozenset({"rearrange", "reduce", "repeat"})


def forward_tree(model: Any) -> tuple[ast.AST | None, dict]:
    """(the parsed source of the model's forward, its parameters but `self`); (None, {}) when unreadable."""
    function = getattr(type(model), "forward", None)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
        parameters = dict(inspect.signature(function).parameters)
    except (OSError, TypeError, ValueError, SyntaxError):
        return None, {}
    parameters.pop("self", None)
    return tree, parameters


def asked_inputs(model: Any) -> list[str]:
    """The optional parameters an assertion's or a raised exception's message in the forward names, in order."""
    tree, parameters = forward_tree(model)
    optional = {name for name, parameter in parameters.items() if parameter.default is not inspect.Parameter.empty
                and parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)}
    asked: list[str] = []
    for node in ast.walk(tree) if tree is not None else ():
        message = node.msg if isinstance(node, ast.Assert) else node.exc if isinstance(node, ast.Raise) else None
        text = " ".join(piece.value for piece in ast.walk(message) if isinstance(piece, ast.Constant)
                        and isinstance(piece.value, str)) if message is not None else ""
        asked += [word for word in re.findall(r"[A-Za-z_]\w*", text) if word in optional]
    return list(dict.fromkeys(asked))


def parameter_ranks(model: Any) -> dict[str, int]:
    """{forward parameter: its rank} where the forward's body says it; {} when the source cannot be read."""
    tree, parameters = forward_tree(model)
    if tree is None:
        return {}
    names = set(parameters)
    rebound = {}  # parameter -> the first statement that always assigns it: later uses read another value
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)) else []
    for statement in body:  # not inside a branch (`if not is_tensor(hiddens): hiddens = stack(hiddens)`)
        if isinstance(statement, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            for node in (each for target in targets for each in ast.walk(target)):
                if isinstance(node, ast.Name) and node.id in names:
                    rebound.setdefault(node.id, statement.lineno)
    found: list[tuple[int, int, str, int]] = []  # (line, column, parameter, rank)
    for node in ast.walk(tree):
        for name, rank in uses(node):
            if name in names and rank is not None and node.lineno <= rebound.get(name, node.lineno):
                found.append((node.lineno, node.col_offset, name, rank))
    ranks: dict[str, int] = {}
    for _, _, name, rank in sorted(found):
        ranks.setdefault(name, rank)
    return ranks


def uses(node: ast.AST) -> list[tuple[str, int | None]]:
    """(operand name, rank) for the parameters a pattern call or a shape unpack describes."""
    if isinstance(node, ast.Call):
        callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        strings = [arg.value for arg in node.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
        operands = [arg.id for arg in node.args if isinstance(arg, ast.Name)]
        if callee in EINSUM_NAMES and strings and "->" in strings[0]:
            sides = strings[0].split("->")[0].split(",")
            return [(name, axis_count(side)) for name, side in zip(operands, sides)]
        if callee in EINOPS_NAMES and strings and operands and "->" in strings[0]:
            return [(operands[0], axis_count(strings[0].split("->")[0]))]
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple):
        shape = node.value
        if isinstance(shape, ast.Call) and isinstance(shape.func, ast.Attribute) and shape.func.attr == "size" \
                and not shape.args:
            shape = shape.func  # `x.size()`
        if isinstance(shape, ast.Attribute) and shape.attr in ("shape", "size") and isinstance(shape.value, ast.Name):
            targets = node.targets[0].elts
            if not any(isinstance(target, ast.Starred) for target in targets):
                return [(shape.value.id, len(targets))]
    return []


def axis_count(side: str) -> int | None:
    """The dimensions one operand's subscripts name: einops axes (a `(h p)` group is one), or torch's
    one-letter axes; None with an ellipsis (any rank)."""
    side = side.strip()
    if "..." in side or "…" in side:
        return None
    if " " in side or "(" in side:
        count, depth = 0, 0
        for token in side.replace("(", " ( ").replace(")", " ) ").split():
            if token == "(":
                depth += 1
                count += depth == 1
            elif token == ")":
                depth -= 1
            elif depth == 0:
                count += 1
        return count or None
    return len(side) or None


def compared_strings(model: Any) -> dict[str, str]:
    """{forward parameter: the first string constant the body compares it with} (`if mode == "norm":`): the
    value a required mode switch takes."""
    tree, parameters = forward_tree(model)
    if tree is None:
        return {}
    found: list[tuple[int, int, str, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare) or len(node.ops) != 1 or not isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
            continue
        sides = (node.left, node.comparators[0])
        for name, constant in (sides, sides[::-1]):
            if isinstance(name, ast.Name) and name.id in parameters and isinstance(constant, ast.Constant) \
                    and isinstance(constant.value, str):
                found.append((node.lineno, node.col_offset, name.id, constant.value))
    strings: dict[str, str] = {}
    for _, _, name, value in sorted(found):
        strings.setdefault(name, value)
    return strings
