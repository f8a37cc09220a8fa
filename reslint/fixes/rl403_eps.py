"""RL403 fix (safe): put an epsilon inside the root the hand-written norm divides by.

`torch.sqrt(var)` → `torch.sqrt(var + self.eps)`, `v.rsqrt()` → `(v + self.eps).rsqrt()`,
`x.std(d)` → `(x.var(d) + self.eps).sqrt()`. The epsilon is the class's own (`self.eps`, a
forward parameter `eps`), else a new `eps=1e-5` constructor parameter (nn.LayerNorm's default).
"""

from __future__ import annotations

import libcst as cst

from reslint.findings import Finding
from reslint.fixes.source import Source, dotted, method, owner_class, self_attributes

SAFE = True
TITLE = "add an epsilon inside the square root"
DEFAULT_EPS = "1e-5"
MODULE_BASES = ("nn.Module", "torch.nn.Module", "Module")


def fix(source: Source, finding: Finding) -> str | None:
    cls = source.class_def(owner_class(finding))
    operation = next(iter(source.at(finding, cst.BinaryOperation)), None)
    if cls is None or operation is None:
        return None
    root = next((call for call in source.within(operation, cst.Call) if root_kind(call)), None)
    if root is None:
        return None
    eps, needs_attribute = epsilon(cls, operation, source)
    new_root = with_eps(root, cst.parse_expression(eps)) if eps else None
    if new_root is None:
        return None
    fixed = cls.deep_replace(root, new_root)
    if needs_attribute:
        fixed = with_eps_attribute(fixed)
    return source.replaced(cls, fixed) if fixed is not None else None


def root_kind(call: cst.Call) -> str:
    name = dotted(call.func).rsplit(".", 1)[-1] if dotted(call.func) else getattr(getattr(call.func, "attr", None), "value", "")
    return name if name in ("sqrt", "rsqrt", "std") else ""


def with_eps(call: cst.Call, eps: cst.BaseExpression) -> cst.BaseExpression | None:
    kind = root_kind(call)
    func = call.func
    is_method = isinstance(func, cst.Attribute) and dotted(func.value) not in ("torch", "")
    if kind in ("sqrt", "rsqrt") and len(call.args) == 1 and call.args[0].keyword is None and not is_method:
        inner = call.args[0].value
        return call.with_changes(args=[call.args[0].with_changes(value=cst.BinaryOperation(inner, cst.Add(), eps))])
    if kind in ("sqrt", "rsqrt") and not call.args and isinstance(func, cst.Attribute):
        total = cst.BinaryOperation(func.value, cst.Add(), eps, lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return call.with_changes(func=func.with_changes(value=total))
    if kind == "std" and isinstance(func, cst.Attribute):
        variance = call.with_changes(func=func.with_changes(attr=cst.Name("var")))
        total = cst.BinaryOperation(variance, cst.Add(), eps, lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return cst.Call(func=cst.Attribute(value=total, attr=cst.Name("sqrt")))
    return None


def epsilon(cls: cst.ClassDef, operation: cst.CSTNode, source: Source) -> tuple[str | None, bool]:
    """The epsilon to use in the class, and whether the class needs a new `eps` attribute for it."""
    attributes = self_attributes(cls)
    named = next((name for name in attributes if name == "eps" or "eps" in name.lower()), None)
    if named is not None:
        return f"self.{named}", False
    function = next((node for node in cls.body.body if isinstance(node, cst.FunctionDef)
                     and source.lines(operation).start in source.lines(node)), None)
    if function is not None and any(param.name.value == "eps" for param in function.params.params):
        return "eps", False
    if not any(dotted(base.value) in MODULE_BASES for base in cls.bases):
        return None, False
    return "self.eps", True


def with_eps_attribute(cls: cst.ClassDef) -> cst.ClassDef | None:
    init = method(cls, "__init__")
    assignment = cst.parse_statement("self.eps = eps\n")
    if init is None:
        new_init = cst.parse_statement(f"def __init__(self, eps={DEFAULT_EPS}):\n    super().__init__()\n    self.eps = eps\n")
        body = list(cls.body.body)
        at = 1 if body and is_docstring(body[0]) else 0
        if at < len(body) and not body[at].leading_lines:
            body[at] = body[at].with_changes(leading_lines=[cst.EmptyLine(indent=False)])
        body.insert(at, new_init.with_changes(leading_lines=[cst.EmptyLine(indent=False)] if at else []))
        return cls.with_changes(body=cls.body.with_changes(body=body))
    params = init.params
    if params.star_arg is not cst.MaybeSentinel.DEFAULT or params.star_kwarg is not None or params.kwonly_params \
            or any(param.name.value == "eps" for param in params.params):
        return None
    new_param = cst.Param(cst.Name("eps"), default=cst.Float(DEFAULT_EPS),
                          equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
    last = params.params[-1]
    kept = [*params.params[:-1], last.with_changes(comma=cst.MaybeSentinel.DEFAULT)] if last.comma is not cst.MaybeSentinel.DEFAULT \
        and not multiline(last) else list(params.params)
    statements = list(init.body.body)
    at = next((index + 1 for index, statement in enumerate(statements) if "super(" in cst.Module([statement]).code
               or "__init__(" in cst.Module([statement]).code), 0)
    statements.insert(at, assignment)
    new_init = init.with_changes(params=params.with_changes(params=[*kept, new_param]),
                                 body=init.body.with_changes(body=statements))
    return cls.deep_replace(init, new_init)


def multiline(param: cst.Param) -> bool:
    comma = param.comma
    return isinstance(comma, cst.Comma) and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace)


def is_docstring(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and isinstance(statement.body[0], cst.Expr) \
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
