"""Trace engine, second half: a captured torch.fx graph → the same facts the static engine makes.

Works on the graph of `torch.export.export(...)` (its `.graph_module` or `.module()`), and on a
`torch.fx.Tracer` graph after shape propagation. Nodes carry `meta["val"]` (fake tensors) or
`meta["tensor_meta"]`, `meta["stack_trace"]` and `meta["nn_module_stack"]`; from them come exact
shapes, the owning block and stack, and the user's `file:line`.

The classification mirrors `reslint.static.residuals`: a residual add is an add whose one operand
is an ancestor of the other through a parametrised op; Pre-LN is a norm of the skip at the start
of the branch, Post-LN a norm consuming the sum in the same block while the sum is not itself the
next residual's skip, and so on.
"""

from __future__ import annotations

import ast
import operator
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache

from reslint.facts import FileFacts, ModelFacts, NormOp, ResidualAdd, Span, Stack, combined_placement
from reslint.static.torch_api import SEQUENCE_MODULES

ADD_OPS = {"add", "add_", "iadd", "__add__", "__iadd__", "__radd__"}
# Ops whose output is the input, for placement purposes: dropout, casts, copies, views.
PASS_OPS = {
    "dropout", "dropout_", "feature_dropout", "alpha_dropout", "feature_alpha_dropout", "native_dropout",
    "_to_copy", "to", "type_as", "float", "half", "bfloat16", "double", "type", "clone", "contiguous",
    "view", "reshape", "_unsafe_view", "alias", "lift_fresh_copy", "identity", "Identity", "detach_",
    "_assert_tensor_metadata",
}
DROPOUT_OPS = {"dropout", "dropout_", "feature_dropout", "alpha_dropout", "feature_alpha_dropout", "native_dropout"}
MATMUL_OPS = {"linear", "addmm", "mm", "matmul", "bmm", "baddbmm", "einsum", "addmv", "mv"}
CONV_OPS = {"conv1d", "conv2d", "conv3d", "convolution", "_convolution", "conv_transpose1d", "conv_transpose2d",
            "conv_transpose3d", "cudnn_convolution"}
ALWAYS_PARAMETRISED = {"scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
                       "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention_for_cpu",
                       "_scaled_dot_product_cudnn_attention", "multi_head_attention_forward",
                       "_native_multi_head_attention"}
LAYER_NORM_OPS = {"layer_norm": "layernorm", "native_layer_norm": "layernorm", "rms_norm": "rmsnorm",
                  "_fused_rms_norm": "rmsnorm"}
BATCH_NORM_OPS = {"batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
                  "_native_batch_norm_legit_functional", "native_batch_norm", "cudnn_batch_norm",
                  "_batch_norm_impl_index", "_batch_norm_with_update", "_batch_norm_no_update"}
# Ops a transformed skip may apply around its projection (`GLU(conv(LN(x)))`), besides norms and views.
SKIP_PATH_OPS = {"glu", "gelu", "relu", "silu", "tanh", "sigmoid", "transpose", "permute", "layer_norm",
                 "native_layer_norm", "rms_norm", "getitem", "avg_pool1d", "avg_pool2d", "max_pool1d", "max_pool2d"}
SHAPE_ONLY_OPS = {"sym_size", "sym_numel", "sym_stride", "size", "dim", "arange", "zeros", "ones", "full",
                  "empty", "new_zeros", "new_ones", "new_full", "new_empty", "zeros_like", "ones_like",
                  "empty_like", "full_like", "scalar_tensor", "_assert_tensor_metadata", "sym_constrain_range"}
MODULE_OPS = {  # call_module targets (fx Tracer graphs): class name → op
    "Linear": "linear", "LazyLinear": "linear", "Bilinear": "linear", "Conv1d": "conv1d", "Conv2d": "conv2d",
    "Conv3d": "conv3d", "ConvTranspose1d": "conv_transpose1d", "ConvTranspose2d": "conv_transpose2d",
    "Embedding": "embedding", "LayerNorm": "layer_norm", "RMSNorm": "rms_norm", "Dropout": "dropout",
    "Dropout1d": "dropout", "Dropout2d": "dropout", "Identity": "identity", "BatchNorm1d": "batch_norm",
    "BatchNorm2d": "batch_norm", "BatchNorm3d": "batch_norm", "SyncBatchNorm": "batch_norm",
    "MultiheadAttention": "multi_head_attention_forward",
}
BUILTIN_LAYERS = ("TransformerEncoderLayer", "TransformerDecoderLayer")
BUILTIN_STACKS = ("TransformerEncoder", "TransformerDecoder")
FRAME_RE = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
SEARCH_BUDGET = 20_000  # nodes visited per residual search (bounded by topological order too)


# ----- node helpers ------------------------------------------------------------------------------


def _op(node, modules: dict) -> str:
    """A short, engine-independent name for what a node computes ("add", "linear", "layer_norm")."""
    if node.op == "call_function":
        target = node.target
        if target is operator.getitem:
            return "getitem"
        text = str(target)
        if text.startswith(("aten.", "prims.")):
            return text.split(".")[1]
        name = getattr(target, "__name__", text)
        return name
    if node.op == "call_method":
        return str(node.target)
    if node.op == "call_module":
        module = modules.get(node.target)
        name = type(module).__name__ if module is not None else ""
        return MODULE_OPS.get(name, "module:" + name)
    return node.op


def _val(node):
    meta = node.meta
    if "val" in meta:
        return meta["val"]
    return meta.get("tensor_meta")


def shape_of(node) -> tuple | None:
    value = _val(node)
    shape = getattr(value, "shape", None)
    if shape is None:
        return None
    try:
        return tuple(int(d) for d in shape)
    except Exception:  # symbolic sizes
        return tuple(str(d) for d in shape)


def _is_tensor(node) -> bool:
    if not hasattr(node, "meta"):
        return False
    value = _val(node)
    if value is None:
        return node.op in ("call_module", "placeholder", "get_attr")  # no meta: assume a tensor
    if isinstance(value, (list, tuple)):  # split/chunk/native_dropout: a tuple of tensors
        return any(hasattr(v, "shape") and hasattr(v, "dtype") for v in value)
    return hasattr(value, "shape") and hasattr(value, "dtype")


def _format_shape(shape) -> str:
    if shape is None:
        return "?"
    inner = ", ".join(str(d) for d in shape)
    return f"({inner},)" if len(shape) == 1 else f"({inner})"


@dataclass
class NormInfo:
    kind: str  # "layernorm", "rmsnorm"
    form: str  # "functional" (aten op / module), "hand-written"
    source: object  # root of the normalised value


@dataclass
class Residual:
    add: object
    skip_term: object
    skip: object  # the skip's source on the stream
    branches: list
    walked: list = field(default_factory=list)
    placement: str = "none"
    parallel: bool = False
    skip_scaled: bool = False
    skip_projection: bool = False
    gated_branch: bool = False
    dropout_on_skip: bool = False
    skip_normalised: bool = False


class GraphFacts:
    def __init__(self, capture, path: str):
        self.capture = capture
        self.path = path
        self.model = getattr(capture, "model", None)
        gm = capture.graph_module
        if hasattr(gm, "graph_module") and not hasattr(gm, "graph"):  # an ExportedProgram
            gm = gm.graph_module
        self.gm = gm
        self.graph = gm.graph
        self.nodes = list(self.graph.nodes)
        self.index = {node: i for i, node in enumerate(self.nodes)}
        self.modules = dict(gm.named_modules())
        self.ops = {node: _op(node, self.modules) for node in self.nodes}
        self.model_modules = dict(self.model.named_modules()) if self.model is not None else {}
        self.params = self._parameter_nodes()
        self.norms: dict = {}
        self.real_path = _resolve(path)
        self.class_line = int(getattr(capture, "class_line", 1) or 1)
        self.source_index = _SourceIndex.of(self.real_path)

    # ----- graph basics -------------------------------------------------------------------------

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
                    value = self.gm.get_submodule("") if False else _get_attr(self.gm, node.target)
                except Exception:
                    continue
                import torch

                if isinstance(value, torch.nn.Parameter):
                    params.add(node)
        return params

    def data_inputs(self, node) -> list:
        """Inputs that carry data, not just a shape or a parameter."""
        return [n for n in node.all_input_nodes
                if _is_tensor(n) and self.ops[n] not in SHAPE_ONLY_OPS and n not in self.params]

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
            if len(inputs) == 1 and (not others or all(not hasattr(a, "op") or self._scalar(a) for a in others)):
                return inputs[0]
        return None

    def _scalar(self, node) -> bool:
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

    # ----- norms ---------------------------------------------------------------------------------

    def find_norms(self) -> None:
        for node in self.nodes:
            op = self.ops[node]
            if op in LAYER_NORM_OPS or op in ("layer_norm", "rms_norm"):
                inputs = self.data_inputs(node)
                if inputs:
                    self.norms[node] = NormInfo(LAYER_NORM_OPS.get(op, "layernorm"), "functional",
                                                self.root(inputs[0]))
            elif op == "getitem" and self.ops.get(node.args[0]) == "native_layer_norm" and node.args[1] == 0:
                if node.args[0] in self.norms:
                    self.norms[node] = self.norms[node.args[0]]
            elif op in ("mul", "div", "__mul__", "__truediv__", "mul_", "div_"):
                found = self._hand_written(node)
                if found is not None:
                    self.norms[node] = found
        # the affine step of a hand-written norm (`weight * normed`, `+ bias`) is still the norm's output
        for node in self.nodes:
            op = self.ops[node]
            if op in ("mul", "add", "__mul__", "__add__") and node not in self.norms:
                inputs = self.data_inputs(node)
                has_param = any(n in self.params or self.ops.get(n) == "get_attr" for n in node.all_input_nodes)
                if len(inputs) == 1 and has_param:
                    source, _ = self.strip(inputs[0], allow_scale=False)
                    if source in self.norms and self.norms[source].form == "hand-written":
                        self.norms[node] = self.norms[source]

    def _hand_written(self, node) -> NormInfo | None:
        """`x * rsqrt(mean(x**2) + eps)` (RMSNorm) or `(x - mean) / sqrt(var + eps)` (LayerNorm)."""
        operands = [a for a in node.args if hasattr(a, "op")]
        if len(operands) != 2:
            return None
        for value, scale in (operands, operands[::-1]):
            stat = self._statistic_of(scale, self.ops[node] in ("div", "__truediv__", "div_"))
            if stat is None:
                continue
            reduced, kind_hint = stat
            source = self._strip_affine(value)
            centred = False
            if self.ops[source] in ("sub", "__sub__"):
                subs = [a for a in source.args if hasattr(a, "op")]
                if subs and self.ops[subs[-1]] == "mean":
                    source = self.root(subs[0])
                    centred = True
            if self.root(reduced) is source or self._reaches_within(reduced, source, 12):
                kind = "layernorm" if centred or kind_hint == "var" else "rmsnorm"
                return NormInfo(kind, "hand-written", source)
        return None

    def _strip_affine(self, node):
        """`gamma * (x - mean)`: the elementwise weight of a hand-written norm is not part of its input."""
        node = self.root(node)
        while self.ops[node] in ("mul", "__mul__", "__rmul__") and len(self.data_inputs(node)) == 1 and all(
                not hasattr(a, "op") or a in self.params or self._scalar(a)
                for a in node.args if a not in self.data_inputs(node)):
            node = self.root(self.data_inputs(node)[0])
        return node

    def _statistic_of(self, node, dividing: bool):
        """For rsqrt(mean(x^2)+eps) / sqrt(var+eps) / std+eps: (the reduced tensor's input, kind)."""
        current = self.root(node)
        op = self.ops[current]
        if op == "pow" and self._exponent(current) in (-0.5, 0.5):  # `torch.pow(ms, -0.5)` (muse_glimmer)
            op = "rsqrt" if self._exponent(current) == -0.5 else "sqrt"
        if op == "rsqrt" and not dividing or op in ("sqrt",) and dividing:
            current = self.root(self.data_inputs(current)[0]) if self.data_inputs(current) else current
        elif op in ("reciprocal",) and not dividing:
            pass
        elif not dividing:
            return None
        op = self.ops[current]
        if op in ("add", "__add__") and len(self.data_inputs(current)) == 1:
            current = self.root(self.data_inputs(current)[0])
            op = self.ops[current]
        if op in ("sqrt",):
            inner = self.data_inputs(current)
            if not inner:
                return None
            current = self.root(inner[0])
            op = self.ops[current]
        if op in ("mean", "var", "std", "var_mean", "sum"):
            inner = self.data_inputs(current)
            if not inner:
                return None
            reduced = self.root(inner[0])
            if self.ops[reduced] in ("pow", "mul", "square", "__pow__", "__mul__", "sub", "__sub__"):
                first = self.data_inputs(reduced)
                if first:
                    return first[0], ("var" if op in ("var", "std") or self.ops[reduced] in ("sub", "__sub__")
                                      else "ms")
            if op in ("var", "std"):
                return reduced, "var"
        return None

    @staticmethod
    def _exponent(node):
        exponent = node.args[1] if len(node.args) > 1 else None
        return exponent if isinstance(exponent, (int, float)) else None

    def _divides_by_own_norm(self, node) -> bool:
        """An L2 normalisation: `F.normalize(x)` (x / clamp_min(vector_norm(x)).expand_as(x)), `x / x.norm()`."""
        if self.ops[node] not in ("div", "__truediv__", "div_") or len(node.args) < 2 or not hasattr(node.args[1], "op"):
            return False
        denominator = node.args[1]
        while self.ops[denominator] in ("clamp_min", "clamp", "expand_as", "expand", "add", "__add__") \
                and self.data_inputs(denominator):
            denominator = self.data_inputs(denominator)[0]
        if self.ops[denominator] not in ("linalg_vector_norm", "norm", "vector_norm") or not hasattr(node.args[0], "op"):
            return False
        measured = self.data_inputs(denominator)
        return bool(measured) and self.root(measured[0]) is self.root(node.args[0])

    def _reaches_within(self, start, target, depth: int) -> bool:
        frontier = [start]
        for _ in range(depth):
            nxt = []
            for n in frontier:
                if n is target:
                    return True
                nxt.extend(self.data_inputs(n))
            frontier = nxt
        return any(n is target for n in frontier)

    def norms_by_source(self) -> dict:
        grouped: dict = {}
        for node, info in self.norms.items():
            if node in grouped.get(info.source, []):
                continue
            grouped.setdefault(info.source, []).append(node)
        return grouped

    # ----- ancestry ------------------------------------------------------------------------------

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

    # ----- residuals -----------------------------------------------------------------------------

    def sum_terms(self, add) -> list:
        """Operands of a chain of adds `a + b + c` whose inner sums are used only by the next add."""
        terms = []
        for operand in add.args[:2]:
            if not hasattr(operand, "op") or not _is_tensor(operand) or operand in self.params:
                continue
            if self.ops[operand] in ADD_OPS and len(operand.users) == 1 and len(self.data_inputs(operand)) == 2:
                terms.extend(self.sum_terms(operand))
            else:
                terms.append(operand)
        return terms

    def _sum_nodes(self, add) -> list:
        """The add and the inner sums `sum_terms` folds into it (`a + b + c` written on several lines)."""
        nodes = [add]
        for operand in add.args[:2]:
            if hasattr(operand, "op") and operand in self.ops and self.ops[operand] in ADD_OPS \
                    and len(operand.users) == 1 and len(self.data_inputs(operand)) == 2:
                nodes.extend(self._sum_nodes(operand))
        return nodes

    def find_residuals(self) -> list[Residual]:
        self.find_norms()
        by_source = self.norms_by_source()
        residuals = []
        for node in self.nodes:
            if self.ops[node] not in ADD_OPS or not _is_tensor(node):
                continue
            shape = shape_of(node)
            if shape is not None and len(shape) == 0:
                continue  # scalars: loss terms
            if len(node.users) == 1 and self.ops[next(iter(node.users))] in ADD_OPS \
                    and len(self.data_inputs(next(iter(node.users)))) == 2:
                continue  # an inner sum: classified with the outer add
            terms = self.sum_terms(node)
            if len(terms) < 2:
                continue
            residual = self._classify(node, terms, by_source)
            if residual is not None:
                residuals.append(residual)
        skips = {r.skip for r in residuals} | {r.skip_term for r in residuals}
        for residual in residuals:
            if residual.placement != "none" or self._stream_continues(residual.add, skips):
                continue
            if any(self._same_block(residual.add, norm) for norm in by_source.get(residual.add, [])):
                residual.placement = "post"
        # A position term added to the stream (`with_pos_embed(output, query_pos)`) is not a stream itself:
        # the stream is what normed residuals (Pre-LN, Post-LN) skip with.
        streams = {node for r in residuals if r.placement in ("pre", "post", "sandwich")
                   for node in (r.skip, r.skip_term)}
        return [r for r in residuals if r.skip_projection or not all(
            self._side_input(r.skip, branch, r.add, streams) for branch in r.branches)]

    def _classify(self, add, terms, by_source) -> Residual | None:
        stripped = [self.strip(term, allow_scale=True) for term in terms]
        for skip_index, (deepest, walked) in enumerate(stripped):
            chain = walked + [deepest]
            floor = min(self.index[c] for c in chain)
            reached = [self.reach(term, floor) if j != skip_index else None for j, term in enumerate(terms)]
            for depth, candidate in enumerate(chain):
                if candidate.op == "get_attr" or candidate in self.params:
                    continue
                branches = [j for j, found in enumerate(reached) if found is not None and found.get(candidate)
                            and not self._side_input(candidate, terms[j], add)]
                if branches:
                    return self._residual(add, terms, skip_index, candidate, walked[:depth], branches, reached,
                                          by_source, projection=False)
        for skip_index, (skip_root, walked) in enumerate(stripped):
            steps = self._skip_path(skip_root)
            for depth in range(1, len(steps)):
                if not any(self.is_projection(step) for step in steps[:depth]):
                    continue
                source = steps[depth]
                reached = [self.reach(term, self.index[source]) if j != skip_index else None
                           for j, term in enumerate(terms)]
                branches = [j for j, found in enumerate(reached) if found is not None and found.get(source)
                            and not any(step in found for step in steps[:depth])]
                if branches:
                    residual = self._residual(add, terms, skip_index, source, walked, branches, reached, by_source,
                                              projection=True)
                    residual.skip_normalised = any(step in self.norms or self.ops[step] in LAYER_NORM_OPS
                                                   for step in steps[:depth])
                    return residual
        return None

    def _skip_path(self, skip_root) -> list:
        """The skip operand and the values it is computed from by one-input ops: projections, norms,
        activations and views (`GLU(conv(LN(x)))`), nearest first."""
        steps, node = [skip_root], skip_root
        while len(steps) < 16 and (self.is_projection(node) or node in self.norms or self.ops[node] in SKIP_PATH_OPS
                                   or self.passthrough_input(node, allow_scale=True) is not None):
            inputs = self.data_inputs(node)
            if len(inputs) != 1:
                break
            node = inputs[0]
            steps.append(node)
        return steps

    def _side_input(self, source, term, add, streams=frozenset()) -> bool:
        """Whether `source` reaches `term` only by being added, as it is, where it is not the stream: by the
        same line in an earlier layer (an attention mask or position bias every layer adds to its scores),
        or to a value that is the skip of a residual (`streams`: a position term added to the stream)."""
        limit = self.index[term]
        lines = {self.span_of(node).line for node in self._sum_nodes(add)}
        pending, seen = [(source, True)], set()
        while pending:
            node, direct = pending.pop()
            if node is term:
                return False
            if (node, direct) in seen:
                continue
            seen.add((node, direct))
            for user in node.users:
                if self.index.get(user, limit + 1) > limit:
                    continue
                if direct and self.ops[user] in ADD_OPS and len(self.data_inputs(user)) > 1 and (
                        self.span_of(user).line in lines or any(
                            other in streams or self.root(other) in streams
                            for other in self.data_inputs(user) if other is not node)):
                    continue
                pending.append((user, direct and self.passthrough_input(user, allow_scale=True) is node))
        return True

    def _residual(self, add, terms, skip_index, skip, walked, branches, reached, by_source, projection):
        residual = Residual(add, terms[skip_index], skip, [terms[j] for j in branches], walked,
                            skip_projection=projection)
        owner = self.owner_path(add)
        residual.dropout_on_skip = any(
            self.ops[step] in DROPOUT_OPS and self._module_parent(step) == owner for step in walked)
        residual.skip_scaled = any(self.ops[step] in ("mul", "div", "__mul__", "__rmul__", "__truediv__")
                                   for step in walked)
        branch_nodes = residual.branches
        residual.parallel = len(branch_nodes) > 1
        residual.gated_branch = any(
            any(self.ops[step] in ("mul", "__mul__", "__rmul__") for step in self.strip(b, True)[1])
            for b in branch_nodes)
        pre_norms = []
        for norm in by_source.get(self.root(skip), []) + by_source.get(skip, []):
            if norm not in pre_norms and any(norm in reached[j] for j in branches):
                pre_norms.append(norm)
        branch_output_normed = all(self.strip(b, True)[0] in self.norms for b in branch_nodes)
        if pre_norms:
            residual.placement = "sandwich" if branch_output_normed else "pre"
        elif branch_output_normed:
            residual.placement = "branch-post"
        return residual

    def _stream_continues(self, add, skips) -> bool:
        pending, seen = [add], set()
        while pending:
            node = pending.pop()
            if node in seen:
                continue
            seen.add(node)
            if node in skips and node is not add:
                return True
            if node is add and node in skips:
                return True
            for user in node.users:
                if self.passthrough_input(user, allow_scale=False) is node:
                    pending.append(user)
        return False

    # ----- modules -------------------------------------------------------------------------------

    def module_stack(self, node) -> list[tuple[str, str]]:
        """[(module path, class qualname)] outermost first, from nn_module_stack (or the call_module)."""
        stack = node.meta.get("nn_module_stack") or {}
        entries = []
        for value in stack.values():
            path, kind = value[0], value[1]
            if not isinstance(kind, str):
                kind = f"{getattr(kind, '__module__', '')}.{getattr(kind, '__qualname__', kind)}"
            entries.append((_clean_path(path), kind))
        if node.op == "call_module":
            module = self.modules.get(node.target)
            if module is not None:
                entries.append((str(node.target), f"{type(module).__module__}.{type(module).__qualname__}"))
        return entries

    def owner_path(self, node) -> str:
        stack = self.module_stack(node)
        return stack[-1][0] if stack else ""

    def _module_parent(self, node) -> str:
        stack = self.module_stack(node)
        if not stack:
            return ""
        path, kind = stack[-1]
        if kind.rsplit(".", 1)[-1].startswith(("Dropout", "Identity")):
            return path.rsplit(".", 1)[0] if "." in path else ""
        return path

    def _same_block(self, add, norm) -> bool:
        owner = self.owner_path(add)
        norm_path = self.owner_path(norm)
        return norm_path == owner or norm_path.startswith(owner + ".") or owner == ""

    def class_of(self, path: str) -> str:
        module = self.model_modules.get(path)
        return type(module).__name__ if module is not None else ""

    def block_of(self, node) -> tuple[str, str]:
        """(block class name, builtin label) of the innermost module performing the node."""
        stack = self.module_stack(node)
        if not stack:
            return (getattr(self.capture, "model_name", "") or self.class_of("")), ""
        for path, kind in reversed(stack):
            name = kind.rsplit(".", 1)[-1]
            if kind.startswith("torch.nn.") and name in BUILTIN_LAYERS:
                return f"nn.{name}", f"nn.{name}"
        path, kind = stack[-1]
        return kind.rsplit(".", 1)[-1], ""

    def stack_of(self, node):
        """(stack key, owner class, attribute, container module path, container) or None."""
        stack = self.module_stack(node)
        for path, _kind in reversed(stack):
            parent, _, last = path.rpartition(".")
            if not last.isdigit():
                continue
            container = self.model_modules.get(parent)
            if container is None:
                continue
            children = list(container.children())
            if not children or len({type(c) for c in children}) != 1:
                continue
            holder_path = parent
            grand, _, attr = holder_path.rpartition(".")
            owner = self.model_modules.get(grand)
            if owner is not None and type(owner).__name__ in BUILTIN_STACKS and type(owner).__module__.startswith(
                    "torch.nn"):
                holder_path = grand
                grand, _, attr = holder_path.rpartition(".")
                owner = self.model_modules.get(grand)
            attr_path = attr
            import torch.nn as nn

            while owner is not None and isinstance(owner, (nn.ModuleDict, nn.ModuleList, nn.Sequential)) and grand:
                grand, _, step = grand.rpartition(".")
                attr_path = f"{step}.{attr_path}"
                owner = self.model_modules.get(grand)
            if owner is None:
                continue
            return f"{type(owner).__name__}.{attr_path}", type(owner).__name__, attr_path, holder_path
        return None

    # ----- source mapping ------------------------------------------------------------------------

    def user_lines(self, node) -> list[int]:
        """Lines of the checked file on the node's stack trace, outermost first."""
        text = node.meta.get("stack_trace") or ""
        return [int(m.group("line")) for m in FRAME_RE.finditer(text) if _resolve(m.group("file")) == self.real_path]

    def iteration_span(self, add, attr: str, builtin: bool) -> Span | None:
        """Where the owner's forward runs the stack: the user frame that calls into the block."""
        lines = self.user_lines(add)
        if not builtin:
            lines = lines[:-1]  # the deepest user frame is the add itself
        if not lines or self.source_index is None:
            return None
        return Span(self.path, lines[-1], self.source_index.call_column(lines[-1], attr.split(".")[-1]))

    def span_of(self, node, kind: str = "") -> Span:
        line = None
        text = node.meta.get("stack_trace") or ""
        for match in FRAME_RE.finditer(text):
            if _resolve(match.group("file")) == self.real_path:
                line = int(match.group("line"))  # deepest frame in the checked file wins
        if line is None:
            line = self._constructed_line(node)
        if line is None:
            return Span(self.path, self.class_line, 1)
        column = self.source_index.column(line, kind) if self.source_index else 1
        return Span(self.path, line, column)

    def _constructed_line(self, node) -> int | None:
        found = self._constructed(node)
        return found[0] if found else None

    def _constructed(self, node) -> tuple[int, int] | None:
        """(line, column) in the checked file that constructs the innermost known module of the node."""
        if self.source_index is None:
            return None
        for path, _kind in reversed(self.module_stack(node)):
            if not path:
                continue
            parent, _, attr = path.rpartition(".")
            owner = self.class_of(parent)
            found = self.source_index.attributes.get((owner, attr.split(".")[0])) if owner else None
            if found is not None:
                return found
        return None

    # ----- facts ---------------------------------------------------------------------------------

    def run(self) -> FileFacts:
        facts = FileFacts(path=self.path, engine="trace")
        residuals = self.find_residuals()
        stacks: dict[str, dict] = {}
        for residual in residuals:
            facts.residuals.append(self._residual_fact(residual, stacks))
        facts.residuals.sort(key=lambda r: (r.span.line, r.span.column))
        markers = self._sequence_markers()
        facts.stacks = {key: self._stack_fact(key, info) for key, info in sorted(stacks.items())}
        facts.norms = self._norm_facts(bool(markers))
        name = getattr(self.capture, "model_name", "") or self.class_of("") or "model"
        own = [fact for fact in facts.residuals if not fact.stack]
        placement = combined_placement(own) if own else "none"
        if facts.stacks and placement in ("none", "unknown"):
            placement = "none"
        classes = sorted({type(m).__name__ for m in self.model_modules.values()} | {name})
        facts.models.append(ModelFacts(name=name, span=Span(self.path, self.class_line, 1),
                                       sequence_markers=markers, classes=tuple(classes),
                                       stacks=tuple(facts.stacks), placement=placement))
        return facts

    def _residual_fact(self, residual: Residual, stacks: dict) -> ResidualAdd:
        add = residual.add
        block, builtin = self.block_of(add)
        found = self.stack_of(add)
        key = ""
        if found is not None:
            key, owner, attr, holder = found
            info = stacks.setdefault(key, {"owner": owner, "attr": attr, "holder": holder, "adds": [],
                                           "builtin": bool(builtin)})
            info["adds"].append(add)
        skip_shape = shape_of(residual.skip_term)
        branch_shapes = [shape_of(b) for b in residual.branches]
        branch_shape = branch_shapes[0] if branch_shapes else None
        width_mismatch = broadcast = ""
        for shape in branch_shapes:
            if skip_shape is None or shape is None or shape == skip_shape:
                continue
            first, second = (skip_shape, shape) if self._operand_order(add, residual) else (shape, skip_shape)
            text = f"{_format_shape(first)} + {_format_shape(second)}"
            if _broadcasts(skip_shape, shape):
                broadcast = broadcast or text
            else:
                width_mismatch = width_mismatch or f"the skip has shape {_format_shape(skip_shape)} but the branch " \
                                                   f"has shape {_format_shape(shape)} ({text})"
            branch_shape = shape
        span = self.span_of(add, "add")
        if builtin and self.source_index is not None:
            for path, _kind in reversed(self.module_stack(add)):
                owner = self.class_of(path)
                found = self.source_index.constructions.get((owner, builtin[3:])) if owner else None
                if found is not None:
                    span = Span(self.path, *found)
                    break
        skip_text, branch_text = "x", "sublayer(x)"
        written = self.source_index.add_terms(span.line) if self.source_index and not builtin else None
        if written is not None and all(written):
            skip_text, branch_text = written if self._operand_order(add, residual) else written[::-1]
        return ResidualAdd(
            span=span, block=block, placement=residual.placement,
            skip=skip_text, branch=branch_text,
            parallel=residual.parallel, skip_scaled=residual.skip_scaled,
            skip_projection=residual.skip_projection, skip_normalised=residual.skip_normalised,
            gated_branch=residual.gated_branch,
            dropout_on_skip=residual.dropout_on_skip, width_mismatch=width_mismatch, stack=key,
            builtin=builtin, skip_shape=skip_shape, branch_shape=branch_shape, broadcast=broadcast,
        )

    def _operand_order(self, add, residual) -> bool:
        """True when the skip is written first (`x + f(x)`)."""
        terms = self.sum_terms(add)
        return terms.index(residual.skip_term) == 0 if residual.skip_term in terms else True

    def _stack_fact(self, key: str, info: dict) -> Stack:
        import torch.nn as nn

        holder = self.model_modules.get(info["holder"])
        depth = None
        block_classes: tuple[str, ...] = ()
        final_norm = None
        if isinstance(holder, (nn.TransformerEncoder, nn.TransformerDecoder)):
            depth = len(holder.layers)
            block_classes = tuple(dict.fromkeys(f"nn.{type(c).__name__}" for c in holder.layers))
            if getattr(holder, "norm", None) is not None:
                final_norm = True
        elif holder is not None:
            children = list(holder.children())
            depth = len(children)
            block_classes = tuple(dict.fromkeys(type(c).__name__ for c in children))
        if final_norm is None:
            last = max(info["adds"], key=lambda n: self.index[n])
            final_norm = self._final_norm(last)
        owner_line = self.source_index.attribute_line(info["owner"], info["attr"].split(".")[0]) \
            if self.source_index else None
        span = Span(self.path, owner_line, self.source_index.attribute_column(info["owner"],
                                                                               info["attr"].split(".")[0])) \
            if owner_line \
            else Span(self.path, self.class_line, 1)
        first = min(info["adds"], key=lambda n: self.index[n])
        return Stack(key=key, owner=info["owner"], attribute=f"self.{info['attr']}", span=span,
                     block_classes=block_classes, depth=depth, final_norm=final_norm,
                     iteration=self.iteration_span(first, info["attr"], info["builtin"]))

    def _final_norm(self, start) -> bool | None:
        """Whether every path from the stack's output to the graph output passes a norm (LayerNorm, RMSNorm in
        any spelling, L2 normalisation); None when no path reaches the output, or the output is not where the
        stream ends (another class of the file consumes the traced model: it decides)."""
        pending, seen = [start], set()
        reached_end = normalised = False
        while pending and len(seen) < SEARCH_BUDGET:
            node = pending.pop()
            if node in seen:
                continue
            seen.add(node)
            if node is not start and self._normalises(node):
                normalised = True
                continue
            for user in node.users:
                if user.op == "output":
                    reached_end = True
                elif self.ops[user] == "type_as" and user.args[0] is not node:
                    continue  # `normed.type_as(x)`: x gives only its dtype
                elif self.ops[user] not in SHAPE_ONLY_OPS:
                    pending.append(user)
        if reached_end:
            return None if self._consumed() else False
        return True if normalised else None

    def _normalises(self, node) -> bool:
        return node in self.norms or self.ops[node] in LAYER_NORM_OPS or self._divides_by_own_norm(node)

    def _consumed(self) -> bool:
        """Whether another class of the checked file builds the traced model (through AutoModel, `_from_config`,
        an inherited constructor): its output is then not where the stream ends."""
        from reslint.static.stream_end import consumed_in_file

        name = getattr(self.capture, "model_name", "")
        return bool(name) and name in consumed_in_file(self.real_path)

    def _sequence_markers(self) -> tuple[str, ...]:
        markers = []
        for module in self.model_modules.values():
            name = type(module).__name__
            # the static engine's wording, so that RL201 reads the same in both engines
            if name in SEQUENCE_MODULES and type(module).__module__.startswith("torch.nn"):
                markers.append(SEQUENCE_MODULES[name])
        for node in self.nodes:
            op = self.ops[node]
            if op in ALWAYS_PARAMETRISED:
                markers.append("attention (scaled_dot_product_attention)")
            elif op == "embedding" and not any(marker.startswith("token embeddings") for marker in markers):
                markers.append("token embeddings (F.embedding)")  # not an nn.Embedding's own call
        return tuple(dict.fromkeys(markers))

    def _norm_facts(self, sequence_model: bool) -> list[NormOp]:
        norms: dict[tuple, NormOp] = {}
        for node in self.nodes:
            op = self.ops[node]
            if op not in BATCH_NORM_OPS and op != "batch_norm":
                continue
            inputs = self.data_inputs(node)
            shape = shape_of(inputs[0]) if inputs else None
            stack = self.module_stack(node)
            variant = "batch_norm"
            owner = getattr(self.capture, "model_name", "") or self.class_of("")
            form = "functional"
            if stack:
                path, kind = stack[-1]
                name = kind.rsplit(".", 1)[-1]
                if "BatchNorm" in name:
                    variant, form = name, "module"
                    parent = path.rpartition(".")[0]
                    owner = self.class_of(parent) or owner
                else:
                    owner = name
            if variant == "batch_norm" and shape is not None and len(shape) == 3:
                variant = "BatchNorm1d"
            sequential = sequence_model and shape is not None and len(shape) == 3
            constructed = self._constructed(node) if form == "module" else None
            span = Span(self.path, *constructed) if constructed else self.span_of(node)
            norms.setdefault((span.line, span.column), NormOp(
                kind="batchnorm", form=form, span=span, owner=owner, variant=variant,
                in_sequence_model=sequential))
        return sorted(norms.values(), key=lambda n: (n.span.line, n.span.column))


def facts_from_capture(capture, path: str) -> FileFacts:
    """The facts of one captured model, with spans in the checked file `path`."""
    return GraphFacts(capture, path).run()


# ----- helpers -------------------------------------------------------------------------------------


def _broadcasts(first: tuple, second: tuple) -> bool:
    for a, b in zip(reversed(first), reversed(second)):
        if a != b and a != 1 and b != 1:
            return False
    return True


def _clean_path(path: str) -> str:
    """nn_module_stack paths of `.module()` graphs look like `L['self'].blocks[0]`; keep `blocks.0`."""
    path = re.sub(r"^L\['self'\]\.?", "", path)
    path = re.sub(r"\[(\d+)\]", r".\1", path)
    path = re.sub(r"\._modules\['([^']+)'\]", r".\1", path)
    path = re.sub(r"\['([^']+)'\]", r".\1", path)
    return path.strip(".")


def _get_attr(root, target: str):
    value = root
    for part in target.split("."):
        value = getattr(value, part)
    return value


def _resolve(path: str) -> str:
    try:
        return os.path.realpath(os.path.abspath(path))
    except OSError:
        return path


class _SourceIndex:
    """Columns of add expressions per line and `self.attr = ...` lines per class, from `ast`."""

    def __init__(self, text: str):
        self.lines = text.splitlines()
        self.adds: dict[int, list[int]] = {}
        self.terms: dict[int, list[tuple[str, str]]] = {}
        self.calls: dict[int, list[tuple[str, int]]] = {}
        self.constructions: dict[tuple[str, str], tuple[int, int]] = {}
        self.attributes: dict[tuple[str, str], int] = {}
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) or isinstance(node, ast.AugAssign) \
                    and isinstance(node.op, ast.Add):
                self.adds.setdefault(node.lineno, []).append(node.col_offset + 1)
                left = node.left if isinstance(node, ast.BinOp) else node.target
                right = node.right if isinstance(node, ast.BinOp) else node.value
                self.terms.setdefault(node.lineno, []).append(
                    (ast.get_source_segment(text, left) or "", ast.get_source_segment(text, right) or ""))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                    "add", "add_"):
                self.adds.setdefault(node.lineno, []).append(node.col_offset + 1)
            if isinstance(node, ast.Call):
                func = ast.get_source_segment(text, node.func) or ""
                self.calls.setdefault(node.lineno, []).append((func, node.col_offset + 1))
            if isinstance(node, ast.ClassDef):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Call):
                        callee = getattr(inner.func, "attr", getattr(inner.func, "id", ""))
                        self.constructions.setdefault((node.name, callee), (inner.lineno, inner.col_offset + 1))
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Assign):
                        for target in inner.targets:
                            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                                    and target.value.id == "self":
                                self.attributes.setdefault((node.name, target.attr),
                                                           (inner.value.lineno, inner.value.col_offset + 1))

    @staticmethod
    def of(path: str) -> _SourceIndex | None:
        return _source_index(path)

    def column(self, line: int, kind: str) -> int:
        if kind == "add" and line in self.adds:
            return min(self.adds[line])
        if 0 < line <= len(self.lines):
            text = self.lines[line - 1]
            return len(text) - len(text.lstrip()) + 1
        return 1

    def call_column(self, line: int, attr: str) -> int:
        """Column of the call on `line` whose callee mentions `attr` (`self.blocks[i](x)`)."""
        for func, column in sorted(self.calls.get(line, []), key=lambda c: -c[1]):
            if attr and attr in func:
                return column
        return self.column(line, "")

    def add_terms(self, line: int) -> tuple[str, str] | None:
        """(left, right) source text of the one `a + b` on the line (the outermost when chained)."""
        found = self.terms.get(line) or []
        return found[0] if found else None

    def attribute_line(self, owner: str, attr: str) -> int | None:
        found = self.attributes.get((owner, attr))
        return found[0] if found else None

    def attribute_column(self, owner: str, attr: str) -> int:
        found = self.attributes.get((owner, attr))
        return found[1] if found else 1


@lru_cache(maxsize=64)
def _source_index(path: str) -> _SourceIndex | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return _SourceIndex(handle.read())
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None


# ----- adds that cannot run --------------------------------------------------------------------------


def failing_add(model, args=(), kwargs=None, path: str = "") -> ResidualAdd | None:
    """Run `model` once (meta/fake inputs) and describe the add that raised on mismatched shapes.

    For when capture fails at a residual add: shape propagation raised, so there is no graph. Returns
    a ResidualAdd with `width_mismatch` naming both shapes (`(2, 16, 16) + (2, 16, 17)`) at the
    add's line in `path`, or None when the forward fails elsewhere or not at all.
    """
    import sys

    import torch
    from torch.overrides import TorchFunctionMode

    real = _resolve(path)
    add_functions = {torch.Tensor.__add__, torch.Tensor.__radd__, torch.Tensor.__iadd__, torch.Tensor.add,
                     torch.Tensor.add_, torch.add}
    found: dict = {}

    class _Watch(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            try:
                return func(*args, **kwargs)
            except RuntimeError:
                if func in add_functions and not found and len(args) >= 2 \
                        and all(isinstance(a, torch.Tensor) for a in args[:2]):
                    frame = sys._getframe(1)
                    while frame is not None and _resolve(frame.f_code.co_filename) != real:
                        frame = frame.f_back
                    owner = frame.f_locals.get("self") if frame is not None else None
                    found.update(shapes=(tuple(args[0].shape), tuple(args[1].shape)),
                                 line=frame.f_lineno if frame is not None else None,
                                 block=type(owner).__name__ if owner is not None else "")
                raise

    try:
        with _Watch():
            model(*args, **(kwargs or {}))
    except Exception:  # noqa: BLE001 - the model's own failure is what we look for
        pass
    if not found or found["line"] is None:
        return None
    first, second = found["shapes"]
    index = _source_index(real)
    line = found["line"]
    column = index.column(line, "add") if index else 1
    written = index.add_terms(line) if index else None
    skip, branch = written if written and all(written) else ("x", "sublayer(x)")
    text = f"{_format_shape(first)} + {_format_shape(second)}"
    return ResidualAdd(
        span=Span(path, line, column), block=found["block"] or "model", placement="none", skip=skip,
        branch=branch, width_mismatch=f"`{skip} + {branch}` adds shapes {text}, which do not broadcast",
        skip_shape=first, branch_shape=second)
