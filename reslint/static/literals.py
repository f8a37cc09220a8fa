"""`ast.literal_eval` without the reference cycle it leaves behind on every call.

`ast.literal_eval` defines its helpers as closures that refer to one another, so each call leaves four
functions and their cells for the cyclic collector. A static check frees each file's garbage by reference
counting alone and freezes what survives without a collection (runner.settle_collector): a cycle would
stay frozen for the run. Same answers and the same exceptions as `ast.literal_eval`.
"""

from __future__ import annotations

import ast


def literal_eval(node_or_string):
    """The value of a Python literal (a string or an `ast` expression): constants, tuples, lists, sets,
    dicts, `set()`, and signed and complex numbers."""
    if isinstance(node_or_string, str):
        node_or_string = ast.parse(node_or_string.lstrip(" \t"), mode="eval")
    if isinstance(node_or_string, ast.Expression):
        node_or_string = node_or_string.body
    return _convert(node_or_string)


def _malformed(node):
    message = "malformed node or string"
    line = getattr(node, "lineno", None)
    if line:
        message += f" on line {line}"
    raise ValueError(message + f": {node!r}")


def _convert_number(node):
    if not isinstance(node, ast.Constant) or type(node.value) not in (int, float, complex):
        _malformed(node)
    return node.value


def _convert_signed_number(node):
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        operand = _convert_number(node.operand)
        return +operand if isinstance(node.op, ast.UAdd) else -operand
    return _convert_number(node)


def _convert(node):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Tuple):
        return tuple(map(_convert, node.elts))
    if isinstance(node, ast.List):
        return list(map(_convert, node.elts))
    if isinstance(node, ast.Set):
        return set(map(_convert, node.elts))
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "set"
            and node.args == node.keywords == []):
        return set()
    if isinstance(node, ast.Dict):
        if len(node.keys) != len(node.values):
            _malformed(node)
        return dict(zip(map(_convert, node.keys), map(_convert, node.values)))
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        left = _convert_signed_number(node.left)
        right = _convert_number(node.right)
        if isinstance(left, (int, float)) and isinstance(right, complex):
            return left + right if isinstance(node.op, ast.Add) else left - right
    return _convert_signed_number(node)
