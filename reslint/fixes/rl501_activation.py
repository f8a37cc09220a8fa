"""RL501 fix (unsafe): insert the activation the file already uses (GELU by default) between the linears.

`self.w2(self.w1(x))` → `self.w2(F.gelu(self.w1(x)))`; `nn.Sequential(nn.Linear(...), nn.Linear(...))`
→ `nn.Sequential(nn.Linear(...), nn.GELU(), nn.Linear(...))`. Unsafe: the function the block
computes changes, and a new Sequential entry renumbers the keys of the checkpoint.
"""

from __future__ import annotations

import re

import libcst as cst

from reslint.findings import Finding
from reslint.fixes.source import Source, dotted, owner_class, self_attributes, spelled

SAFE = False
TITLE = "insert an activation between the two linear layers"
ACTIVATIONS = {"gelu": "GELU", "relu": "ReLU", "silu": "SiLU", "tanh": "Tanh", "mish": "Mish", "leaky_relu": "LeakyReLU"}
MODULES = {module: function for function, module in ACTIVATIONS.items()}


def fix(source: Source, finding: Finding) -> str | None:
    names = re.findall(r"`([^`]+)`", finding.message)[:2]
    cls = source.class_def(owner_class(finding))
    if len(names) != 2 or cls is None:
        return None
    second, first = names
    function = activation_in_file(source)
    sequential = re.fullmatch(r"(\w+)\[(\d+)\]", first)
    if sequential:
        return in_sequential(source, cls, sequential.group(1), int(sequential.group(2)), function)
    outer = next(iter(source.at(finding, cst.Call)), None)
    if outer is None or dotted(outer.func) != f"self.{second}":
        return None
    inner = [call for call in source.within(outer, cst.Call) if dotted(call.func) == f"self.{first}"]
    written = spelled(source.module, f"torch.nn.functional.{function}")
    if len(inner) != 1 or written is None:
        return None
    activated = cst.Call(func=cst.parse_expression(written), args=[cst.Arg(inner[0])])
    return source.replaced(inner[0], activated)


def in_sequential(source: Source, cls: cst.ClassDef, attribute: str, index: int, function: str) -> str | None:
    assignment = self_attributes(cls).get(attribute)
    written = spelled(source.module, f"torch.nn.{ACTIVATIONS[function]}")
    if assignment is None or written is None or not isinstance(assignment.value, cst.Call):
        return None
    call = assignment.value
    if not dotted(call.func).endswith("Sequential") or any(arg.keyword or arg.star for arg in call.args) \
            or index + 1 >= len(call.args):
        return None
    args = list(call.args)
    args.insert(index + 1, args[index].with_changes(value=cst.parse_expression(f"{written}()")))
    return source.replaced(call, call.with_changes(args=args))


def activation_in_file(source: Source) -> str:
    """The activation the file uses first (F.relu, nn.SiLU(), torch.tanh, ...), else "gelu"."""
    for node in source.in_order(cst.Call):
        name = dotted(node.func).rsplit(".", 1)[-1]
        if name in ACTIVATIONS and dotted(node.func) != name:
            return name
        if name in MODULES:
            return MODULES[name]
    return "gelu"
