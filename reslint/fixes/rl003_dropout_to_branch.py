"""RL003 fix (safe): `dropout(x) + f(x)` → `x + dropout(f(x))`, the dropout moved from the skip to the branch."""

from __future__ import annotations

import re

import libcst as cst

from reslint.findings import Finding
from reslint.fixes.source import Source, code_of, dotted

SAFE = True
TITLE = "move the dropout from the skip to the branch"


def fix(source: Source, finding: Finding) -> str | None:
    add = next((node for node in source.at(finding, cst.BinaryOperation) if isinstance(node.operator, cst.Add)), None)
    if add is None:
        return None
    named = re.match(r"[^`]*`([^`]+)`", finding.message)
    dropped = [side for side in ("left", "right") if dropout_input(getattr(add, side)) is not None
               and (named is None or code_of(getattr(add, side)) == named.group(1))]
    if len(dropped) != 1:
        return None
    skip_side = dropped[0]
    branch_side = "right" if skip_side == "left" else "left"
    skip_call: cst.Call = getattr(add, skip_side)
    branch = getattr(add, branch_side)
    if isinstance(branch, cst.Call) and code_of(branch.func) == code_of(skip_call.func):
        new_branch = branch  # the branch is dropped already: only the skip's dropout goes
    else:
        first = skip_call.args[0].with_changes(value=branch.with_changes(lpar=[], rpar=[]) if branch.lpar else branch)
        new_branch = skip_call.with_changes(args=[first, *skip_call.args[1:]], lpar=branch.lpar, rpar=branch.rpar)
    skip = dropout_input(skip_call).with_changes(lpar=skip_call.lpar, rpar=skip_call.rpar)
    return source.replaced(add, add.with_changes(**{skip_side: skip, branch_side: new_branch}))


def dropout_input(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """`x` of `self.dropout(x)`, `F.dropout(x, p)`, `self.drop(x)`; None for anything else."""
    if not isinstance(node, cst.Call) or not node.args or node.args[0].keyword is not None or node.args[0].star:
        return None
    name = dotted(node.func).rsplit(".", 1)[-1].lower()
    if not name or "drop" not in name:
        return None
    if dotted(node.func).startswith("self.") and len(node.args) != 1:
        return None
    return node.args[0].value
