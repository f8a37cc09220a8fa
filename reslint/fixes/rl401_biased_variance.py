"""RL401 fix (safe): the hand-written norm's var/std call uses the biased variance, as nn.LayerNorm does."""

from __future__ import annotations

import libcst as cst

from reslint.findings import Finding
from reslint.fixes.source import Source, dotted

SAFE = True
TITLE = "use the biased variance (unbiased=False / correction=0)"
VARIANCE_CALLS = ("var", "std", "var_mean", "std_mean")


def fix(source: Source, finding: Finding) -> str | None:
    call = next((node for node in source.at(finding, cst.Call)
                 if dotted(node.func).rsplit(".", 1)[-1] in VARIANCE_CALLS), None)
    if call is None or any(arg.keyword is None and is_bool(arg.value) for arg in call.args):
        return None  # the old positional `var(dim, unbiased, keepdim)` form: not recognised exactly
    keywords = {arg.keyword.value: arg for arg in call.args if arg.keyword is not None}
    if "unbiased" in keywords:
        new_args = [arg.with_changes(value=cst.Name("False")) if arg is keywords["unbiased"] else arg for arg in call.args]
    elif "correction" in keywords:
        new_args = [arg.with_changes(value=cst.Integer("0")) if arg is keywords["correction"] else arg for arg in call.args]
    else:
        new_args = [*call.args, cst.Arg(keyword=cst.Name("unbiased"), value=cst.Name("False"),
                                        equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))]
    return source.replaced(call, call.with_changes(args=new_args))


def is_bool(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value in ("True", "False")
