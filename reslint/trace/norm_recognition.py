"""Norms in a captured graph: torch's own (aten `layer_norm`, `rms_norm`, their modules) and hand-written
ones (`x * rsqrt(mean(x**2) + eps)`, `(x - mean) / sqrt(var + eps)`, `torch.pow(ms, -0.5)`, with their
affine step), and L2 normalisations."""

from __future__ import annotations

from dataclasses import dataclass

from reslint.trace.op_tables import LAYER_NORM_OPS


@dataclass
class NormInfo:
    kind: str  # "layernorm", "rmsnorm"
    form: str  # "functional" (aten op / module), "hand-written"
    source: object  # root of the normalised value


class NormRecognizer:
    """The LayerNorm/RMSNorm outputs of a graph, each with the value it normalises."""

    def __init__(self, graph):
        self.graph = graph
        self.norms: dict = {}

    def find_norms(self) -> dict:
        for node in self.graph.nodes:
            op = self.graph.ops[node]
            if op in LAYER_NORM_OPS or op in ("layer_norm", "rms_norm"):
                inputs = self.graph.data_inputs(node)
                if inputs:
                    self.norms[node] = NormInfo(LAYER_NORM_OPS.get(op, "layernorm"), "functional",
                                                self.graph.root(inputs[0]))
            elif op == "getitem" and self.graph.ops.get(node.args[0]) == "native_layer_norm" and node.args[1] == 0:
                if node.args[0] in self.norms:
                    self.norms[node] = self.norms[node.args[0]]
            elif op in ("mul", "div", "__mul__", "__truediv__", "mul_", "div_"):
                found = self._hand_written(node)
                if found is not None:
                    self.norms[node] = found
        # the affine step of a hand-written norm (`weight * normed`, `+ bias`) is still the norm's output
        for node in self.graph.nodes:
            op = self.graph.ops[node]
            if op in ("mul", "add", "__mul__", "__add__") and node not in self.norms:
                inputs = self.graph.data_inputs(node)
                has_param = any(n in self.graph.params or self.graph.ops.get(n) == "get_attr"
                                for n in node.all_input_nodes)
                if len(inputs) == 1 and has_param:
                    source, _ = self.graph.strip(inputs[0], allow_scale=False)
                    if source in self.norms and self.norms[source].form == "hand-written":
                        self.norms[node] = self.norms[source]
        return self.norms

    def _hand_written(self, node) -> NormInfo | None:
        """`x * rsqrt(mean(x**2) + eps)` (RMSNorm) or `(x - mean) / sqrt(var + eps)` (LayerNorm)."""
        operands = [a for a in node.args if hasattr(a, "op")]
        if len(operands) != 2:
            return None
        for value, scale in (operands, operands[::-1]):
            stat = self._statistic_of(scale, self.graph.ops[node] in ("div", "__truediv__", "div_"))
            if stat is None:
                continue
            reduced, kind_hint = stat
            source = self._strip_affine(value)
            centred = False
            if self.graph.ops[source] in ("sub", "__sub__"):
                subs = [a for a in source.args if hasattr(a, "op")]
                if subs and self.graph.ops[subs[-1]] == "mean":
                    source = self.graph.root(subs[0])
                    centred = True
            if self.graph.root(reduced) is source or self._reaches_within(reduced, source, 12):
                kind = "layernorm" if centred or kind_hint == "var" else "rmsnorm"
                return NormInfo(kind, "hand-written", source)
        return None

    def _strip_affine(self, node):
        """`gamma * (x - mean)`: the elementwise weight of a hand-written norm is not part of its input."""
        node = self.graph.root(node)
        while self.graph.ops[node] in ("mul", "__mul__", "__rmul__") and len(self.graph.data_inputs(node)) == 1 and all(
                not hasattr(a, "op") or a in self.graph.params or self.graph.scalar(a)
                for a in node.args if a not in self.graph.data_inputs(node)):
            node = self.graph.root(self.graph.data_inputs(node)[0])
        return node

    def _statistic_of(self, node, dividing: bool):
        """For rsqrt(mean(x^2)+eps) / sqrt(var+eps) / std+eps: (the reduced tensor's input, kind)."""
        current = self.graph.root(node)
        op = self.graph.ops[current]
        if op == "pow" and self._exponent(current) in (-0.5, 0.5):  # `torch.pow(ms, -0.5)` (muse_glimmer)
            op = "rsqrt" if self._exponent(current) == -0.5 else "sqrt"
        if op == "rsqrt" and not dividing or op in ("sqrt",) and dividing:
            inner = self.graph.data_inputs(current)
            current = self.graph.root(inner[0]) if inner else current
        elif op in ("reciprocal",) and not dividing:
            pass
        elif not dividing:
            return None
        op = self.graph.ops[current]
        if op in ("add", "__add__") and len(self.graph.data_inputs(current)) == 1:
            current = self.graph.root(self.graph.data_inputs(current)[0])
            op = self.graph.ops[current]
        if op in ("sqrt",):
            inner = self.graph.data_inputs(current)
            if not inner:
                return None
            current = self.graph.root(inner[0])
            op = self.graph.ops[current]
        if op in ("mean", "var", "std", "var_mean", "sum"):
            inner = self.graph.data_inputs(current)
            if not inner:
                return None
            reduced = self.graph.root(inner[0])
            if self.graph.ops[reduced] in ("pow", "mul", "square", "__pow__", "__mul__", "sub", "__sub__"):
                first = self.graph.data_inputs(reduced)
                if first:
                    return first[0], ("var" if op in ("var", "std") or self.graph.ops[reduced] in ("sub", "__sub__")
                                      else "ms")
            if op in ("var", "std"):
                return reduced, "var"
        return None

    @staticmethod
    def _exponent(node):
        exponent = node.args[1] if len(node.args) > 1 else None
        return exponent if isinstance(exponent, (int, float)) else None

    def divides_by_own_norm(self, node) -> bool:
        """An L2 normalisation: `F.normalize(x)` (x / clamp_min(vector_norm(x)).expand_as(x)), `x / x.norm()`."""
        if self.graph.ops[node] not in ("div", "__truediv__", "div_") or len(node.args) < 2 \
                or not hasattr(node.args[1], "op"):
            return False
        denominator = node.args[1]
        while self.graph.ops[denominator] in ("clamp_min", "clamp", "expand_as", "expand", "add", "__add__") \
                and self.graph.data_inputs(denominator):
            denominator = self.graph.data_inputs(denominator)[0]
        if self.graph.ops[denominator] not in ("linalg_vector_norm", "norm", "vector_norm") \
                or not hasattr(node.args[0], "op"):
            return False
        measured = self.graph.data_inputs(denominator)
        return bool(measured) and self.graph.root(measured[0]) is self.graph.root(node.args[0])

    def _reaches_within(self, start, target, depth: int) -> bool:
        frontier = [start]
        for _ in range(depth):
            nxt = []
            for n in frontier:
                if n is target:
                    return True
                nxt.extend(self.graph.data_inputs(n))
            frontier = nxt
        return any(n is target for n in frontier)


def norms_by_source(norms: dict) -> dict:
    """Norm nodes grouped by the root of the value they normalise."""
    grouped: dict = {}
    for node, info in norms.items():
        if node in grouped.get(info.source, []):
            continue
        grouped.setdefault(info.source, []).append(node)
    return grouped
