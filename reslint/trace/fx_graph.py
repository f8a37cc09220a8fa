"""A captured torch.fx graph as the trace engine reads it: each node's op name, its data inputs (not
shapes, not parameters), parameter nodes, shapes from `meta["val"]`/`meta["tensor_meta"]`, pass-through
ops and bounded ancestry searches.

Works on the graph of `torch.export.export(...)` (its `.graph_module` or `.module()`), and on a
`torch.fx.Tracer` graph after shape propagation.
"""

from __future__ import annotations

from reslint.trace.op_tables import (ALWAYS_PARAMETRISED, CONV_OPS, MATMUL_OPS, PASS_OPS, SHAPE_ONLY_OPS,
                                     op_name)

SEARCH_BUDGET = 20_000  # nodes visited per search (bounded by topological order too)


def value_of(node):
    meta = node.meta
    if "val" in meta:
        return meta["val"]
    return meta.get("tensor_meta")


def shape_of(node) -> tuple | None:
    value = value_of(node)
    shape = getattr(value, "shape", None)
    if shape is None:
        return None
    try:
        return tuple(int(d) for d in shape)
    except Exception:  # symbolic sizes
        return tuple(str(d) for d in shape)


def is_tensor(node) -> bool:
    if not hasattr(node, "meta"):
        return False
    value = value_of(node)
    if value is None:
        return node.op in ("call_module", "placeholder", "get_attr")  # no meta: assume a tensor
    if isinstance(value, (list, tuple)):  # split/chunk/native_dropout: a tuple of tensors
        return any(hasattr(v, "shape") and hasattr(v, "dtype") for v in value)
    return hasattr(value, "shape") and hasattr(value, "dtype")


def format_shape(shape) -> str:
    if shape is None:
        return "?"
    inner = ", ".join(str(d) for d in shape)
    return f"({inner},)" if len(shape) == 1 else f"({inner})"


def get_attr(root, target: str):
    value = root
    for part in target.split("."):
        value = getattr(value, part)
    return value


class FxGraph:
    """A captured graph with each node's op name, its data inputs and its parameter nodes."""

    def __init__(self, capture):
        self.capture = capture
        self.model = getattr(capture, "model", None)
        gm = capture.graph_module
        if hasattr(gm, "graph_module") and not hasattr(gm, "graph"):  # an ExportedProgram
            gm = gm.graph_module
        self.gm = gm
        self.nodes = list(gm.graph.nodes)
        self.index = {node: i for i, node in enumerate(self.nodes)}
        self.modules = dict(gm.named_modules())
        self.ops = {node: op_name(node, self.modules) for node in self.nodes}
        self.model_modules = dict(self.model.named_modules()) if self.model is not None else {}
        self.params = self._parameter_nodes()

    def _parameter_nodes(self) -> set:
        names = set()
        if self.model is not None:
            for name, _ in self.model.named_parameters():
                names.add("p_" + name.replace(".", "_"))
        signature = getattr(getattr(self.capture, "exported_program", None), "graph_signature", None)
        if signature is not None:
            names.update(getattr(signature, "inputs_to_parameters", {}).keys())
        params = set()
        for node in self.nodes:
            if node.op == "placeholder" and (node.name in names or node.name.startswith("p_")):
                params.add(node)
            elif node.op == "get_attr":
                try:
                    value = get_attr(self.gm, node.target)
                except Exception:
                    continue
                import torch

                if isinstance(value, torch.nn.Parameter):
                    params.add(node)
        return params

    def data_inputs(self, node) -> list:
        """Inputs that carry data, not just a shape or a parameter."""
        return [n for n in node.all_input_nodes
                if is_tensor(n) and self.ops[n] not in SHAPE_ONLY_OPS and n not in self.params]

    def parametrised(self, node) -> bool:
        op = self.ops[node]
        if op in ALWAYS_PARAMETRISED:
            return True
        if node.op == "call_module":
            module = self.modules.get(node.target)
            return module is not None and any(True for _ in module.parameters()) and op not in (
                "layer_norm", "rms_norm", "batch_norm")
        if op in MATMUL_OPS or op in CONV_OPS or op == "embedding":
            return any(n in self.params for n in node.all_input_nodes) or op in CONV_OPS
        return False

    def is_projection(self, node) -> bool:
        op = self.ops[node]
        return (op in MATMUL_OPS or op in CONV_OPS) and self.parametrised(node)

    def passthrough_input(self, node, allow_scale: bool):
        """The input a pass-through node forwards, or None. `allow_scale` lets `alpha * x` through."""
        op = self.ops[node]
        if op == "getitem":
            parent = node.args[0]
            if hasattr(parent, "op") and self.ops.get(parent) in ("native_dropout",) and node.args[1] == 0:
                return parent
            return None
        if op in PASS_OPS:
            inputs = self.data_inputs(node)
            return inputs[0] if inputs else None
        if allow_scale and op in ("mul", "mul_", "div", "div_", "__mul__", "__rmul__", "__truediv__"):
            inputs = self.data_inputs(node)
            others = [a for a in node.args if a not in inputs]
            if len(inputs) == 1 and (not others or all(not hasattr(a, "op") or self.scalar(a) for a in others)):
                return inputs[0]
        return None

    def scalar(self, node) -> bool:
        shape = shape_of(node)
        if shape is None:
            return node in self.params
        numel = 1
        for d in shape:
            numel *= d if isinstance(d, int) else 2
        return numel == 1

    def strip(self, node, allow_scale: bool = True):
        """Follow pass-through ops upward: (deepest source, the pass-through nodes walked)."""
        walked = []
        while True:
            parent = self.passthrough_input(node, allow_scale)
            if parent is None or len(walked) > 64:
                return node, walked
            walked.append(node)
            node = parent

    def root(self, node):
        return self.strip(node, allow_scale=True)[0]

    def reach(self, start, floor: int):
        """Backward search from `start` over data edges, above topological index `floor`.

        Returns {node: passed_through_parametrised_op}; bounded by SEARCH_BUDGET visits.
        """
        seen: dict = {}
        pending = [(start, False)]
        visits = 0
        while pending and visits < SEARCH_BUDGET:
            node, through = pending.pop()
            if seen.get(node) is True or (node in seen and not through):
                continue
            seen[node] = through  # whether a parametrised op lies between `start` and this node
            visits += 1
            onward = through or self.parametrised(node)
            for parent in self.data_inputs(node):
                if self.index[parent] >= floor:
                    pending.append((parent, onward))
        return seen
