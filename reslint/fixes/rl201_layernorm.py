"""RL201 fix (unsafe): `BatchNorm1d` over (batch, channels, time) → `LayerNorm` over the channels.

Recognised only where the layout is known from the code: `self.bn(x.transpose(1, 2)).transpose(1, 2)`
(x is (batch, time, channels): the transposes go, LayerNorm normalises the last axis), or
`self.bn(h)` with `h` the output of the class's `nn.Conv1d` (batch, channels, time: the transposes
come in, `self.bn(h.transpose(1, 2)).transpose(1, 2)`). The fix builds `nn.LayerNorm(C)` instead,
keeping `eps`, and `affine` as `elementwise_affine`. Unsafe: the statistics become
per-position instead of per-batch, and the checkpoint's running_mean/running_var no longer load.
"""

from __future__ import annotations

import libcst as cst

from reslint.findings import Finding
from reslint.fixes.source import Source, dotted, owner_class, self_attributes

SAFE = False
TITLE = "use LayerNorm over the channel axis instead of BatchNorm1d"
SWAPS = ({1, 2}, {-1, -2})
KEPT = {"eps": "eps", "affine": "elementwise_affine"}


def fix(source: Source, finding: Finding) -> str | None:
    cls = source.class_def(owner_class(finding))
    built = next((call for call in source.at(finding, cst.Call) if dotted(call.func).endswith("BatchNorm1d")), None)
    if cls is None or built is None or not dotted(built.func).startswith(("nn.", "torch.nn.")):
        return None
    name = next((attribute for attribute, assignment in self_attributes(cls).items() if assignment.value is built), None)
    layer_norm = layer_norm_call(built)
    if name is None or layer_norm is None:
        return None
    convolutions = {attribute for attribute, assignment in self_attributes(cls).items()
                    if isinstance(assignment.value, cst.Call) and dotted(assignment.value.func).endswith("Conv1d")}
    uses = [call for call in source.within(cls, cst.Call) if dotted(call.func) == f"self.{name}"]
    replacements = {}
    for use in uses:
        outer = transposed_back(source, use)
        inner = use.args[0].value if len(use.args) == 1 and not use.args[0].keyword else None
        if outer is not None and is_swap(inner):  # (batch, time, C) swapped for the BatchNorm: LayerNorm needs no swap
            replacements[outer] = use.with_changes(args=[use.args[0].with_changes(value=inner.func.value)])
        elif inner is not None and conv_output(source, inner, convolutions):  # (batch, C, time): swap for LayerNorm
            swapped = cst.parse_expression(f"({cst.Module([]).code_for_node(inner)}).transpose(1, 2)") \
                if not isinstance(inner, (cst.Name, cst.Call, cst.Attribute)) else \
                cst.Call(cst.Attribute(inner, cst.Name("transpose")), args=[cst.Arg(cst.Integer("1")), cst.Arg(cst.Integer("2"))])
            normed = use.with_changes(args=[use.args[0].with_changes(value=swapped)])
            replacements[use] = cst.Call(cst.Attribute(normed, cst.Name("transpose")),
                                         args=[cst.Arg(cst.Integer("1")), cst.Arg(cst.Integer("2"))])
        else:
            return None
    if not replacements:
        return None
    replacements[built] = layer_norm
    return source.replaced(cls, cls.visit(Replace(replacements)))


def conv_output(source: Source, node: cst.BaseExpression, convolutions: set[str]) -> bool:
    """Whether `node` is the (batch, channels, time) output of one of the class's nn.Conv1d layers:
    a call of it, or a name last assigned from one in the same function."""
    if isinstance(node, cst.Call):
        return dotted(node.func) in {f"self.{name}" for name in convolutions}
    if not isinstance(node, cst.Name):
        return False
    function = node
    while function is not None and not isinstance(function, cst.FunctionDef):
        function = source.parents.get(function)
    here = source.start(node)
    assigned = [assignment for assignment in source.within(function, cst.Assign) if source.end(assignment) <= here
                and any(isinstance(target.target, cst.Name) and target.target.value == node.value for target in assignment.targets)]
    return bool(assigned) and conv_output(source, assigned[-1].value, convolutions)


def layer_norm_call(built: cst.Call) -> cst.Call | None:
    positional = [arg for arg in built.args if arg.keyword is None]
    if len(positional) != 1 or positional[0].star:
        return None
    args = [positional[0].with_changes(comma=cst.MaybeSentinel.DEFAULT)]
    for arg in built.args:
        if arg.keyword is not None and arg.keyword.value in KEPT:
            args.append(arg.with_changes(keyword=cst.Name(KEPT[arg.keyword.value]), comma=cst.MaybeSentinel.DEFAULT))
    prefix = dotted(built.func).rsplit(".", 1)[0]
    return built.with_changes(func=cst.parse_expression(f"{prefix}.LayerNorm"), args=args)


def transposed_back(source: Source, use: cst.Call) -> cst.Call | None:
    """The `.transpose(1, 2)` call applied to `use`'s result, if that is all that happens to it."""
    attribute = source.parents.get(use)
    call = source.parents.get(attribute) if isinstance(attribute, cst.Attribute) else None
    if isinstance(call, cst.Call) and call.func is attribute and is_swap(call, of=use):
        return call
    return None


def is_swap(node: cst.CSTNode | None, of: cst.CSTNode | None = None) -> bool:
    """`t.transpose(1, 2)` (or (2, 1), (-1, -2), (-2, -1)) of a 3-d activation; `of`: that `t`."""
    if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute) or node.func.attr.value != "transpose":
        return False
    if of is not None and node.func.value is not of:
        return False
    values = []
    for arg in node.args:
        value = arg.value
        negative = isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus)
        number = value.expression if negative else value
        if arg.keyword is not None or not isinstance(number, cst.Integer):
            return False
        values.append(-int(number.value) if negative else int(number.value))
    return len(values) == 2 and set(values) in SWAPS


class Replace(cst.CSTTransformer):
    def __init__(self, replacements: dict[cst.CSTNode, cst.CSTNode]):
        super().__init__()
        self.replacements = replacements

    def on_leave(self, original, updated):
        return self.replacements.get(original, updated)
