"""Recognise hand-written LayerNorm/RMSNorm arithmetic in a dataflow graph.

LayerNorm: `(x - x.mean(d)) / sqrt(var + eps)` (or `/ (std + eps)`);
RMSNorm:   `x * rsqrt(x.pow(2).mean(d) + eps)` (or `/ sqrt(mean(x*x) + eps)`).
"""

from __future__ import annotations

from dataclasses import dataclass

from reslint.facts import INPUT_SCALING, LAYER, LOSS_TARGET
from reslint.static.graph import Graph, Node, ancestors, data_inputs, strip_passthrough


@dataclass
class HandWrittenNorm:
    output: Node  # the division / multiplication that normalises
    source: Node  # the tensor being normalised
    kind: str  # "layernorm" or "rmsnorm"
    statistics: list[Node]  # mean/var/std reductions
    variance: Node | None  # the var/std call, when the code uses one
    has_eps: bool


def strip_eps(node: Node) -> tuple[Node, bool]:
    """`var + eps` → (var, True); `std.clamp(min=eps)` → (std, True)."""
    has_eps = False
    while True:
        if node.op == "add" and len(data_inputs(node)) == 1 and len(node.inputs) >= 2:
            has_eps = True
            node = data_inputs(node)[0]
        elif node.op == "clamp" and node.inputs:
            has_eps = True
            node = node.inputs[0]
        elif node.op == "pass" and node.inputs and not node.info.get("width_changing"):
            node = node.inputs[0]
        else:
            return node, has_eps


def _is_mean(node: Node) -> bool:
    return node.op == "reduce" and node.info.get("function") == "mean"


def _squared(node: Node) -> Node | None:
    """x**2, x.pow(2), x*x, x.square() → x."""
    node, _ = strip_passthrough(node, allow_scale=False)
    if node.op == "pow" and node.inputs:
        if _exponent(node) == 2 or node.info.get("function") == "square":
            return node.inputs[0]
    if node.op == "mul" and len(node.inputs) == 2 and node.inputs[0] is node.inputs[1]:
        return node.inputs[0]
    return None


def _exponent(node: Node):
    """The constant power of `x ** p`, `x.pow(p)`, `torch.pow(x, p)` (None when not a constant)."""
    exponent = node.inputs[1] if len(node.inputs) > 1 else None
    if exponent is not None and exponent.op == "const":
        return exponent.info.get("value")
    args = node.info.get("args") or ()
    return getattr(args[1], "value", None) if len(args) > 1 else None


def _centered(node: Node) -> tuple[Node, Node] | None:
    """`x - x.mean(d)` → (x, mean)."""
    node, _ = strip_passthrough(node, allow_scale=True)
    if node.op == "sub" and len(node.inputs) == 2:
        source, mean = node.inputs
        mean_stripped, _ = strip_passthrough(mean, allow_scale=False)
        if _is_mean(mean_stripped):
            return source, mean_stripped
    return None


def _variance_of(node: Node) -> tuple[str, list[Node], Node | None, Node] | None:
    """Classify a statistic: ("var"|"ms", reductions, var/std node, tensor it describes)."""
    node, _ = strip_passthrough(node, allow_scale=False)
    if node.op == "reduce" and node.info.get("function") in ("var", "std", "var_mean", "std_mean"):
        return "var", [node], node, node.inputs[0] if node.inputs else node
    if _is_mean(node) and node.inputs:
        inner = _squared(node.inputs[0])
        if inner is not None:
            centered = _centered(inner)
            if centered is not None:
                return "var", [node, centered[1]], None, centered[0]
            return "ms", [node], None, inner
    return None


def _denominator(node: Node) -> tuple[tuple, bool] | None:
    """The statistic under a sqrt (or a std), with whether an epsilon is added."""
    node, eps_outside = strip_eps(node)
    if node.op in ("sqrt",) and node.inputs:
        inner, eps_inside = strip_eps(node.inputs[0])
        stat = _variance_of(inner)
        return (stat, eps_outside or eps_inside) if stat else None
    if node.op == "pow" and node.inputs and _exponent(node) == 0.5:
        inner, eps_inside = strip_eps(node.inputs[0])
        stat = _variance_of(inner)
        return (stat, eps_outside or eps_inside) if stat else None
    stat = _variance_of(node)
    if stat is not None and stat[2] is not None and stat[2].info.get("function", "").startswith("std"):
        return stat, eps_outside
    return None


def _inverse_root(node: Node) -> tuple[tuple, bool] | None:
    """rsqrt(stat + eps), or 1 / sqrt(...)."""
    node, _ = strip_passthrough(node, allow_scale=False)
    if node.op == "rsqrt" and node.inputs:
        inner, eps = strip_eps(node.inputs[0])
        stat = _variance_of(inner)
        return (stat, eps) if stat else None
    if node.op == "pow" and node.inputs and _exponent(node) == -0.5:
        inner, eps = strip_eps(node.inputs[0])
        stat = _variance_of(inner)
        return (stat, eps) if stat else None
    return None


def find_hand_written_norms(graph: Graph) -> list[HandWrittenNorm]:
    found = []
    for node in graph.nodes:
        if node.op not in ("div", "mul") or len(node.inputs) != 2:
            continue
        candidates = []
        if node.op == "div":
            denominator = _denominator(node.inputs[1])
            if denominator:
                candidates.append((node.inputs[0], denominator))
        else:
            for numerator, other in (node.inputs, node.inputs[::-1]):
                inverse = _inverse_root(other)
                if inverse:
                    candidates.append((numerator, inverse))
        for numerator, ((stat_kind, statistics, variance, described), has_eps) in candidates:
            centered = _centered(numerator)
            source = centered[0] if centered else strip_passthrough(numerator, allow_scale=True)[0]
            if centered:
                statistics = statistics + [centered[1]]
            described_root = strip_passthrough(described, allow_scale=False)[0]
            source_root = strip_passthrough(source, allow_scale=False)[0]
            if described_root is not source_root and id(source_root) not in ancestors(described_root):
                continue
            kind = "layernorm" if centered or stat_kind == "var" else "rmsnorm"
            node.info["norm_kind"] = kind
            node.info["norm_input"] = source
            node.info["norm_form"] = "hand-written"
            found.append(HandWrittenNorm(node, source, kind, statistics, variance, has_eps))
            break
    return found


def norm_input(node: Node) -> Node | None:
    """The tensor a norm node normalises."""
    if "norm_input" in node.info:
        return node.info["norm_input"]
    if node.op == "norm" and node.inputs:
        return node.inputs[0]
    return None


def is_layer_norm(node: Node) -> bool:
    return node.info.get("norm_kind") in ("layernorm", "rmsnorm")


def is_normalised(node: Node) -> bool:
    """A LayerNorm/RMSNorm in any spelling, or an L2 normalisation (`F.normalize`, `x / x.norm()`)."""
    return is_layer_norm(node) or bool(node.info.get("l2_normalise")) or _divides_by_own_norm(node)


def _divides_by_own_norm(node: Node) -> bool:
    """`x / x.norm(dim=-1, keepdim=True)` (CLIP's embeddings), `x / torch.linalg.vector_norm(x, ...)`."""
    if node.op != "div" or len(node.inputs) != 2:
        return False
    denominator, _ = strip_eps(node.inputs[1])
    denominator, _ = strip_passthrough(denominator, allow_scale=False)
    if denominator.op != "reduce" or denominator.info.get("function") not in ("norm", "vector_norm"):
        return False
    numerator = strip_passthrough(node.inputs[0], allow_scale=False)[0]
    measured = strip_passthrough(denominator.inputs[0], allow_scale=False)[0] if denominator.inputs else None
    return measured is numerator


def classify_norm_class(index, info, class_graph) -> str | None:
    """A module class whose forward returns a normalised, affinely rescaled version of its input;
    `class_graph(info)` evaluates a class's forward (the dataflow Evaluator, which asks this module)."""
    inherited = torch_norm_base(info)
    if inherited is not None:
        return inherited
    if index.method(info, "forward") is None:
        return None
    return normalised_input_kind(class_graph(info))


def normalised_input_kind(graph) -> str | None:
    """The norm kind when `graph` (a forward or a free function like `def fast_layer_norm(x, weight, bias,
    eps)`) returns its first input normalised and affinely rescaled, else None."""
    find_hand_written_norms(graph)
    inputs = [n for n in graph.nodes if n.op == "input"]
    if not inputs or not graph.outputs:
        return None
    first_input = inputs[0]
    output = graph.outputs[0]
    node = output
    while True:
        node, _ = strip_passthrough(node, allow_scale=True)
        # The affine rescale: by parameters, or (a free function) by its other arguments, `* weight + bias`.
        data = [inner for inner in data_inputs(node) if inner.op != "input" or inner is first_input]
        if node.op in ("add", "mul") and len(data) == 1 and "norm_kind" not in node.info:
            node = data[0]
            continue
        break
    if is_layer_norm(node):
        source = norm_input(node)
        if source is not None and strip_passthrough(source, allow_scale=False)[0] is first_input:
            return node.info["norm_kind"]
    return None


def torch_norm_base(info) -> str | None:
    """`class SamLayerNorm(nn.LayerNorm)`: whatever its forward adds (a permute), it is that norm."""
    from reslint.static import torch_api

    for base in info.bases:
        member = torch_api.torch_member(base) or (base[len("nn."):] if base.startswith("nn.") else None)
        if member in torch_api.NORM_MODULES:
            return torch_api.NORM_MODULES[member]
    return None


# ----- what a hand-written normalisation is for --------------------------------------------------
# One decision for both engines: RL401/RL402 belong to normalisation layers, RL403 to any division by a
# standard deviation that data can make zero; the statistics of a loss target are neither.


def decide_norm_role(*, loss_target: bool, scales_model_input: bool, is_output: bool, rescaled: bool) -> str:
    """`scales_model_input`: it normalises a raw input of the outermost model; `is_output`: the normalised
    value (after its affine step) is what the function returns, i.e. the function is a norm; `rescaled`: a
    learned affine step (`* self.gamma`) follows."""
    if loss_target:
        return LOSS_TARGET
    if scales_model_input and not is_output and not rescaled:
        return INPUT_SCALING
    return LAYER


def norm_role(norm: HandWrittenNorm, graph: Graph, model_inputs: bool) -> str:
    """The role of a hand-written norm found in `graph`; `model_inputs`: the graph's inputs are the raw inputs
    of a model (its root class is built by no other class of the file)."""
    return decide_norm_role(
        loss_target=loss_target(norm.output),
        scales_model_input=model_inputs and _from_inputs_only(norm.source),
        is_output=_returned(norm.output, graph), rescaled=_rescaled(norm.output))


def loss_target(output: Node) -> bool:
    """Whether a normalised value only ends up compared with a prediction in a loss (`(pred - target) ** 2`,
    `mse_loss(pred, target)`), never entering a layer."""
    compared = False
    pending, seen = [output], set()
    while pending and len(seen) < 2000:
        node = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for user in node.users:
            name = str(user.info.get("name") or user.info.get("function") or "").lower()
            if "loss" in name or user.op == "sub":
                compared = True
            elif user.parametrised or user.op == "norm":
                return False
            pending.append(user)
    return compared


def _from_inputs_only(source: Node) -> bool:
    """`input` or `input[..., None]` under an `if`: a forward's parameter, untouched by any layer."""
    pending, seen = [source], set()
    while pending:
        node = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.op == "input":
            continue
        if node.op not in ("pass", "phi", "dropout") or not node.inputs:
            return False
        pending.extend(data_inputs(node))
    return True


def _after_affine(output: Node) -> Node:
    node = output
    while len(node.users) == 1 and node.users[0].op in ("mul", "add", "pass") and len(data_inputs(node.users[0])) == 1:
        node = node.users[0]
    return node


def _returned(output: Node, graph: Graph) -> bool:
    return any(strip_passthrough(out, allow_scale=True)[0] is _after_affine(output) or out is _after_affine(output)
               for out in graph.outputs)


def _rescaled(output: Node) -> bool:
    """A learned affine step reads it: `x_hat * self.gamma + self.beta`."""
    return any(user.op in ("mul", "add") and any(i.op == "attr" for i in user.inputs) for user in output.users)
