"""Trace engine, second half: a captured torch.fx graph → the same facts the static engine makes.

The pieces, each in its own module: `fx_graph` (op names, data inputs, parameters, shapes), `op_tables`,
`norm_recognition`, `residual_search` (the adapter to the shared placement classifier), `attribution`
(owning block, stack and source line of a node) with `source_index`, and `eager` (the add that raised
when capture failed). This module puts them together into `FileFacts`.
"""

from __future__ import annotations

from reslint.cross_file_reads import note
from reslint.facts import FileFacts, ModelFacts, NormOp, ResidualAdd, Span, Stack
from reslint.placement import added_back, combined_placement
from reslint.static.torch_api import SEQUENCE_MODULES
from reslint.trace.attention_ops import MARKER as HAND_WRITTEN_ATTENTION, softmax_over_product
from reslint.trace.attribution import Attribution
from reslint.trace.fx_graph import SEARCH_BUDGET, FxGraph, format_shape, shape_of
from reslint.trace.kept_rows import only_exact_rows_kept
from reslint.trace.norm_recognition import NormRecognizer
from reslint.trace.op_tables import (ADD_OPS, ALWAYS_PARAMETRISED, BATCH_NORM_OPS, LAYER_NORM_OPS, PASS_OPS,
                                     SHAPE_ONLY_OPS)
from reslint.trace.residual_search import Residual, ResidualSearch


# Ops that keep the stream itself (views, casts, layout): a norm reached through them normalises the stream.
STREAM_VIEW_OPS = PASS_OPS | {"permute", "transpose", "t", "getitem", "unsqueeze", "squeeze", "flatten", "expand",
                              "narrow", "slice", "select", "unflatten"}
GATE_OPS = PASS_OPS | {"mul", "mul_", "div", "div_"}


class GraphFacts:
    """One captured model's facts, with spans in the checked file `path`."""

    def __init__(self, capture, path: str):
        self.capture = capture
        self.path = path
        self.graph = FxGraph(capture)
        self.where = Attribution(self.graph, path)
        self.recognizer = NormRecognizer(self.graph)
        self.norms = self.recognizer.find_norms()
        self.search = ResidualSearch(self.graph, self.norms, self.where)

    def run(self) -> FileFacts:
        facts = FileFacts(path=self.path, engine="trace")
        residuals = self.search.find_residuals()
        stacks: dict[str, dict] = {}
        for residual in residuals:
            facts.residuals.append(self._residual_fact(residual, stacks))
        facts.residuals.sort(key=lambda r: (r.span.line, r.span.column))
        markers = self._sequence_markers()
        facts.stacks = {key: self._stack_fact(key, info) for key, info in sorted(stacks.items())}
        facts.norms = self._norm_facts(bool(markers))
        name = getattr(self.capture, "model_name", "") or self.where.class_of("") or "model"
        own = [fact for fact in facts.residuals if not fact.stack]
        placement = combined_placement(own) if own else "none"
        if facts.stacks and placement in ("none", "unknown"):
            placement = "none"
        classes = sorted({type(m).__name__ for m in self.graph.model_modules.values()} | {name})
        facts.models.append(ModelFacts(name=name, span=Span(self.path, self.where.class_line, 1),
                                       sequence_markers=markers, classes=tuple(classes),
                                       stacks=tuple(facts.stacks), placement=placement))
        return facts

    def _residual_fact(self, residual: Residual, stacks: dict) -> ResidualAdd:
        add = residual.add
        block, builtin = self.where.block_of(add)
        # The innermost stack first: the owner's own loop over groups of modules, else the blocks around the add.
        found = None if builtin else self.where.grouped_stack_of(add, residual.branches)
        grouped = found is not None
        if not grouped:
            found = self.where.stack_of(add)
        key = ""
        if found is not None:
            key, owner, attr, holder = found
            info = stacks.setdefault(key, {"owner": owner, "attr": attr, "holder": holder, "adds": [],
                                           "builtin": bool(builtin), "grouped": grouped})
            info["adds"].append(add)
            info.setdefault("skips", {})[add] = residual.skip
        skip_shape = shape_of(residual.skip_term)
        branch_shapes = [shape_of(b) for b in residual.branches]
        branch_shape = branch_shapes[0] if branch_shapes else None
        width_mismatch = broadcast = ""
        for branch, shape in zip(residual.branches, branch_shapes):
            if skip_shape is None or shape is None or shape == skip_shape:
                continue
            first, second = (skip_shape, shape) if self._operand_order(add, residual) else (shape, skip_shape)
            text = f"{format_shape(first)} + {format_shape(second)}"
            if _broadcasts(skip_shape, shape):
                if not only_exact_rows_kept(self.graph, add, residual.skip_term, residual.skip, branch):
                    broadcast = broadcast or text
            else:
                width_mismatch = width_mismatch or f"the skip has shape {format_shape(skip_shape)} but the branch " \
                                                   f"has shape {format_shape(shape)} ({text})"
            branch_shape = shape
        span = self.where.span_of(add, "add")
        if builtin and self.where.source_index is not None:
            for path, _kind in reversed(self.where.module_stack(add)):
                owner = self.where.class_of(path)
                found = self.where.source_index.constructions.get((owner, builtin[3:])) if owner else None
                if found is not None:
                    span = Span(self.path, *found)
                    break
        skip_text, branch_text = "x", "sublayer(x)"
        written = self.where.source_index.add_terms(span.line) if self.where.source_index and not builtin else None
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
        terms = self.search.sum_terms(add)
        return terms.index(residual.skip_term) == 0 if residual.skip_term in terms else True

    def _stack_fact(self, key: str, info: dict) -> Stack:
        import torch.nn as nn

        holder = self.graph.model_modules.get(info["holder"])
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
            # A block that is a group of modules (`ModuleList([Attention(), FeedForward()])`) is named by them.
            members = [m for c in children for m in (c.children() if info.get("grouped") else (c,))]
            block_classes = tuple(dict.fromkeys(type(m).__name__ for m in members))
        if final_norm is None:
            last = max(info["adds"], key=lambda n: self.graph.index[n])
            first = min(info["adds"], key=lambda n: self.graph.index[n])
            final_norm = self._final_norm(last, info["skips"].get(first), info["holder"].rpartition(".")[0])
        owner_line = self.where.source_index.attribute_line(info["owner"], info["attr"].split(".")[0]) \
            if self.where.source_index else None
        span = Span(self.path, owner_line, self.where.source_index.attribute_column(info["owner"],
                                                                               info["attr"].split(".")[0])) \
            if owner_line \
            else Span(self.path, self.where.class_line, 1)
        first = min(info["adds"], key=lambda n: self.graph.index[n])
        iteration = self.where.grouped_iteration_span(first, info["attr"]) if info.get("grouped") else \
            self.where.iteration_span(first, info["attr"], info["builtin"])
        return Stack(key=key, owner=info["owner"], attribute=f"self.{info['attr']}", span=span,
                     block_classes=block_classes, depth=depth, final_norm=final_norm, iteration=iteration)

    def _final_norm(self, start, source=None, owner: str = "") -> bool | None:
        """Whether every path from the stack's output to the graph output passes a norm (LayerNorm, RMSNorm in
        any spelling, L2 normalisation); None when no path reaches the output, or the output is not where the
        stream ends (another class of the file consumes the traced model, or other files' blocks run it: they
        decide). A norm applied to the stream itself (through views and casts: `ln_post(x.permute(1, 0, 2))`)
        ends it even where raw copies of the per-layer states are returned beside it (`hidden_states=(...)`);
        a block's own norm on the stream entering it does not (`x + f(norm(x))` goes on raw).
        Where the stack's output is added back to `source`, the stream entering its first block, the sum is the
        stream followed on, as the static engine does: inside the stack's `owner` (its module's path), the
        stack is the branch of a residual (`alpha * experts(h) + (1 - alpha) * h`) and only a norm further on
        decides (else None); in a consumer of the owner's output (X-CLIP's `text + prompts(text, video)`), the
        owner returned the stream raw, and the sum reaching the output raw is no final norm."""
        pending, seen = [(start, True)], set()
        reached_end = normalised = on_stream = branch = False
        while pending and len(seen) < SEARCH_BUDGET:
            node, direct = pending.pop()
            if (node, direct) in seen:
                continue
            seen.add((node, direct))
            if node is not start and self._normalises(node):
                normalised = True
                on_stream = on_stream or direct
                continue
            for user in node.users:
                op = self.graph.ops.get(user)
                if user.op == "output":
                    reached_end = True
                elif op == "type_as" and user.args[0] is not node:
                    continue  # `normed.type_as(x)`: x gives only its dtype
                elif op in ADD_OPS and source is not None and self._adds_back(user, node, source):
                    branch = branch or self._inside(user, owner)
                    pending.append((user, direct))
                elif self._normalises(user) and self._block_pre_norm(user, node):
                    continue
                elif op not in SHAPE_ONLY_OPS:
                    pending.append((user, direct and (op in STREAM_VIEW_OPS or self._normalises(user))))
        if branch:
            return True if normalised and on_stream else None
        if reached_end and not on_stream:
            return None if self._consumed() else False
        return True if normalised else None

    def _inside(self, node, owner: str) -> bool:
        return not owner or any(path == owner for path, _ in self.where.module_stack(node))

    def _block_pre_norm(self, norm, stream) -> bool:
        """Whether `norm` reads `stream` on the branch of a residual add that `stream` also enters as the skip."""
        adds = {user for user in stream.users if user is not norm and self.graph.ops.get(user) in ADD_OPS}
        if not adds:
            return False
        last = max(self.graph.index[add] for add in adds)
        pending, seen = [norm], set()
        while pending and len(seen) < 500:
            node = pending.pop()
            if node in adds:
                return True
            if node in seen or self.graph.index.get(node, last + 1) > last:
                continue
            seen.add(node)
            pending.extend(node.users)
        return False

    def _adds_back(self, add, reached, source) -> bool:
        """Whether another operand of `add` is `source`, as it is or scaled, gated, cast or dropped out."""
        return added_back(self.graph.data_inputs(add), reached, lambda node: node is source, self.graph.data_inputs,
                          lambda node: self.graph.ops.get(node) in GATE_OPS)

    def _normalises(self, node) -> bool:
        return node in self.norms or self.graph.ops[node] in LAYER_NORM_OPS or self.recognizer.divides_by_own_norm(node)

    def _consumed(self) -> bool:
        """Whether another class of the checked file builds the traced model (through AutoModel, `_from_config`,
        an inherited constructor): its output is then not where the stream ends."""
        from reslint.static.engine import extract_facts
        from reslint.static.stream_end import consumed_in_file, inside_blocks_elsewhere

        name = getattr(self.capture, "model_name", "")
        if not name or name in consumed_in_file(self.where.real_path):
            return bool(name)
        reads: list[str] = []
        inside = inside_blocks_elsewhere(str(self.where.real_path), name, reads, extract_facts)
        note(reads)
        return inside

    def _sequence_markers(self) -> tuple[str, ...]:
        markers = []
        for module in self.graph.model_modules.values():
            name = type(module).__name__
            # the static engine's wording, so that RL201 reads the same in both engines
            if name in SEQUENCE_MODULES and type(module).__module__.startswith("torch.nn"):
                markers.append(SEQUENCE_MODULES[name])
        for node in self.graph.nodes:
            op = self.graph.ops[node]
            if op in ALWAYS_PARAMETRISED:
                markers.append("attention (scaled_dot_product_attention)")
            elif softmax_over_product(self.graph, node):
                markers.append(HAND_WRITTEN_ATTENTION)
            elif op == "embedding" and not any(marker.startswith("token embeddings") for marker in markers):
                markers.append("token embeddings (F.embedding)")  # not an nn.Embedding's own call
        return tuple(dict.fromkeys(markers))

    def _norm_facts(self, sequence_model: bool) -> list[NormOp]:
        norms: dict[tuple, NormOp] = {}
        for node in self.graph.nodes:
            op = self.graph.ops[node]
            if op not in BATCH_NORM_OPS and op != "batch_norm":
                continue
            inputs = self.graph.data_inputs(node)
            shape = shape_of(inputs[0]) if inputs else None
            stack = self.where.module_stack(node)
            variant = "batch_norm"
            owner = getattr(self.capture, "model_name", "") or self.where.class_of("")
            form = "functional"
            if stack:
                path, kind = stack[-1]
                name = kind.rsplit(".", 1)[-1]
                if "BatchNorm" in name:
                    variant, form = name, "module"
                    parent = path.rpartition(".")[0]
                    owner = self.where.class_of(parent) or owner
                else:
                    owner = name
            if variant == "batch_norm" and shape is not None and len(shape) == 3:
                variant = "BatchNorm1d"
            sequential = sequence_model and shape is not None and len(shape) == 3
            constructed = self.where._constructed(node) if form == "module" else None
            span = Span(self.path, *constructed) if constructed else self.where.span_of(node)
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

