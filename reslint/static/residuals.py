"""Find residual adds in a dataflow graph and classify their norm placement and widths."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from reslint.placement import DIV, DROPOUT, MUL, OTHER, PASS, PROJECTION, ResidualView, Step, classify, settle_post
from reslint.static import torch_api
from reslint.static.graph import Graph, Node, ancestors, data_inputs, reaches, strip_passthrough
from reslint.static.index import UNKNOWN, literal_number
from reslint.static.norms import is_layer_norm, norm_input

PROJECTION_NAMES = ("shortcut", "downsample", "proj", "skip", "residual", "res_conv", "identity")


@dataclass
class Residual:
    add: Node
    skip: Node  # the skip operand's source (the stream)
    skip_term: int
    branches: list[int]
    placement: str = "none"
    parallel: bool = False
    skip_scaled: bool = False
    skip_projection: bool = False
    skip_normalised: bool = False
    gated_branch: bool = False
    dropout_on_skip: bool = False
    width_mismatch: str = ""
    pre_norms: list[Node] = field(default_factory=list)
    pieces: tuple[Node, ...] = ()  # a skip joined from pieces (`torch.cat`): the values the branch reads

    @property
    def terms(self) -> list[str]:
        terms = self.add.info.get("terms")
        if callable(terms):  # the evaluator leaves an add's text to whoever reads it
            terms = self.add.info["terms"] = terms()
        return terms or []


def root(node: Node) -> Node:
    return strip_passthrough(node, allow_scale=True)[0]


def _is_projection(node: Node) -> bool:
    if node.op != "module":
        return False
    module = node.info.get("module") or ""
    name = (node.info.get("name") or "").lower()
    if module in torch_api.LINEAR_MODULES or module in torch_api.CONV_MODULES or module in ("linear", "conv1d",
                                                                                            "conv2d"):
        return True
    return any(part in name for part in PROJECTION_NAMES)


def find_residuals(graph: Graph, index) -> list[Residual]:
    norms_by_source: dict[int, list[Node]] = {}
    for node in graph.nodes:
        if is_layer_norm(node):
            source = norm_input(node)
            if source is not None:
                norms_by_source.setdefault(id(root(source)), []).append(node)

    residuals: list[Residual] = []
    for node in graph.nodes:
        if node.op != "add" or len(data_inputs(node)) < 2:
            continue
        residual = _classify_add(node, norms_by_source)
        if residual is not None:
            residual.width_mismatch = width_mismatch(residual, index)
            residuals.append(residual)

    skips = {id(residual.skip) for residual in residuals}
    for residual in residuals:
        if residual.placement == "none":
            # A sum that also flows on unnormalised beside the norm reading it is not Post-LN (Gemma 3n's AltUp).
            residual.placement = settle_post(
                residual.placement, stream_continues=_stream_continues(residual.add, skips),
                sum_normed_in_block=any(_same_block(residual.add, norm)
                                        for norm in norms_by_source.get(id(residual.add), []))
                and not _flows_on_unnormalised(residual.add) and not _feeds_own_stack(residual.add, graph))
    # A position term added to the stream (`with_pos_embed(output, query_pos)`) is not a stream itself:
    # the stream is what normed residuals (Pre-LN, Post-LN) skip with.
    streams = {id(node) for residual in residuals if residual.placement in ("pre", "post", "sandwich")
               for node in (residual.skip, root(residual.skip))}
    return [residual for residual in residuals if residual.skip_projection or not all(
        _side_input(source, residual.add.inputs[j], residual.add, streams)
        for source in residual.pieces or (residual.skip,) for j in residual.branches)]


def _stream_continues(add: Node, skips: set[int]) -> bool:
    """Whether the add's output (through dropout, casts, views, merges) is the skip of another residual."""
    pending, seen = [add], set()
    while pending:
        node = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if id(node) in skips:
            return True
        for user in node.users:
            if user.op in ("dropout", "pass", "phi"):
                pending.append(user)
            elif user.op == "add" and any(term is not node and reaches(term, add, False) for term in user.inputs):
                return True  # added to something computed from it: a residual we could not fully resolve
    return False


def _flows_on_unnormalised(add: Node, limit: int = 12) -> bool:
    """Whether the sum goes on, beside the norm that reads it, into another sum: the norm then feeds a side
    branch (Gemma 3n's AltUp router norm), not the stream, and the add is not Post-LN."""
    pending, seen = [(add, 0)], set()
    while pending:
        node, steps = pending.pop()
        if id(node) in seen or steps > limit:
            continue
        seen.add(id(node))
        for user in node.users:
            if is_layer_norm(user) or user.parametrised:
                continue
            if user.op in ("add", "sub") and len(data_inputs(user)) >= 2:
                return True
            pending.append((user, steps + 1))
    return False


def _feeds_own_stack(add: Node, graph: Graph, limit: int = 400) -> bool:
    """Whether the sum goes on into a stack of blocks that the module performing the add runs: the add is
    that model's embedding stage (wav2vec 2.0's `x + pos_conv(x)`), the norm after it the embedding norm."""
    depth = max((i + 1 for i, frame in enumerate(add.frames) if frame.kind == "module"), default=0)
    own = add.frames[:depth]
    # A stack whose blocks the engine could not see is a call of the container in a loop (`layer(x)`).
    containers = {"self." + key.split(".", 1)[-1] for key in graph.stack_iterations}
    pending, seen = list(add.users), set()
    while pending and len(seen) < limit:
        node = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.frames[:depth] == own and (any(frame.kind == "stack" for frame in node.frames[depth:]) or (
                node.op == "module" and node.info.get("name") in containers
                and set(node.info.get("loops", ())) > set(add.info.get("loops", ())))):
            return True
        pending.extend(node.users)
    return False


def _same_block(add: Node, norm: Node) -> bool:
    # An add inside a loop and a norm after it: the norm runs once, on the last sum (a final norm).
    if not set(add.info.get("loops", ())) <= set(norm.info.get("loops", ())):
        return False
    frame = add.stack_frame
    if frame is None:
        return True
    return frame in norm.frames and norm.frames.index(frame) == add.frames.index(frame)


def _classify_add(add: Node, norms_by_source) -> Residual | None:
    terms = list(add.inputs)
    stripped = [strip_passthrough(term, allow_scale=True) for term in terms]
    for skip_index, (deepest, walked) in enumerate(stripped):
        # The skip's source is the shallowest value on its pass-through chain that feeds a branch:
        # `x = drop(emb); x + f(x)` keeps the embedding dropout out of the skip path.
        for depth, candidate in enumerate(walked + [deepest]):
            if candidate.op in ("const", "attr"):
                continue
            branches = [j for j, term in enumerate(terms) if j != skip_index and reaches(term, candidate, True)
                        and not _side_input(candidate, term, add)]
            if branches:
                return _residual(add, skip_index, candidate, walked[:depth], branches, norms_by_source,
                                 projection=None)
    # A skip chosen by a condition the engine left undecided (`if in_size != skip_size: skip = resample(skip)`):
    # the stream is the alternative the branch reads. The other alternatives transform it, so the skip counts
    # as projected (no width compared).
    for skip_index, (skip_root, walked) in enumerate(stripped):
        for alternative in _alternatives(skip_root):
            branches = [j for j, term in enumerate(terms) if j != skip_index and reaches(term, alternative, True)
                        and not _side_input(alternative, term, add)]
            if branches:
                return _residual(add, skip_index, alternative, walked, branches, norms_by_source, projection=[])
    # A skip joined from pieces (TFT's gated skip over its past and future LSTMs: `cat([past, future])` beside
    # `glu(cat([lstm(past), lstm(future)]))`): the branch was computed from every piece.
    for skip_index, (deepest, walked) in enumerate(stripped):
        pieces = _joined_pieces(deepest)
        branches = [j for j, term in enumerate(terms) if j != skip_index and pieces and all(
            reaches(term, piece, True) and not _side_input(piece, term, add) for piece in pieces)]
        if branches:
            residual = _residual(add, skip_index, deepest, walked, branches, norms_by_source, projection=None)
            residual.pieces = tuple(pieces)
            return residual
    # Both operands may transform one input (`dense(x) + skip(x)`): the skip is the one without a dropout of its
    # own (a dropout ends a branch), then the one through fewer projections, then the first.
    found = []
    ancestors_of: dict[int, set[int]] = {}  # a term's position -> its ancestors, found once
    for skip_index, (skip_root, walked) in enumerate(stripped):
        steps = _skip_path(skip_root)
        for depth in range(1, len(steps)):
            if not any(_is_projection(step) for step in steps[:depth]):
                continue
            source = steps[depth]
            branches = [j for j, term in enumerate(terms) if j != skip_index and reaches(term, source, True)
                        and not any(id(step) in _known_ancestors(ancestors_of, j, term) for step in steps[:depth])]
            if branches:
                found.append(((any(step.op == "dropout" for step in walked),
                               sum(map(_is_projection, steps[:depth])), skip_index),
                              skip_index, source, walked, branches, steps[:depth]))
                break
    if found:
        _, skip_index, source, walked, branches, projection = min(found, key=lambda candidate: candidate[0])
        return _residual(add, skip_index, source, walked, branches, norms_by_source, projection=projection)
    return None


def _known_ancestors(known: dict[int, set[int]], position: int, term: Node) -> set[int]:
    """`ancestors(term)`, found once per term of an add (`known`: by the term's position)."""
    if position not in known:
        known[position] = ancestors(term)
    return known[position]


def _alternatives(node: Node, limit: int = 8) -> list[Node]:
    """The values a merge of undecided branches (`phi`) stands for, through nested merges and pass-through ops."""
    if node.op != "phi":
        return []
    found, pending = [], list(node.inputs)
    while pending and len(found) < limit:
        current = root(pending.pop(0))
        if current.op == "phi":
            pending.extend(current.inputs)
        elif current.op not in ("const", "attr") and current not in found:
            found.append(current)
    return found


def _joined_pieces(node: Node) -> list[Node]:
    """The tensors `torch.cat` joins into `node`, each followed to its source; none for anything else."""
    if node.op != "func" or node.info.get("name") not in torch_api.JOIN_FUNCTIONS:
        return []
    pieces = [root(piece) for piece in data_inputs(node)]
    return pieces if len(pieces) > 1 else []


def _skip_path(skip_root: Node) -> list[Node]:
    """The skip operand and the values it is computed from by one-input ops: projections, norms,
    activations and views (`GLU(conv(LN(x)))`), nearest first."""
    steps, node = [skip_root], skip_root
    while len(steps) < 16 and (_is_projection(node) or node.op in ("norm", "act", "pass", "dropout")
                               or is_layer_norm(node)):
        inputs = data_inputs(node)
        if len(inputs) != 1:
            break
        node = inputs[0]
        steps.append(node)
    return steps


def _side_input(source: Node, term: Node, add: Node, streams: set[int] = frozenset()) -> bool:
    """Whether `source` reaches `term` only by being added, as it is, where it is not the stream: by the
    same line in an earlier layer (an attention mask or position bias every layer adds to its scores),
    or to a value that is the skip of a residual (`streams`: a position term added to the stream)."""
    pending, seen = [(source, True)], set()
    while pending:
        node, direct = pending.pop()
        if node is term:
            return False
        if (id(node), direct) in seen or len(seen) > 20000:
            continue
        seen.add((id(node), direct))
        for user in node.users:
            if direct and user.op == "add" and len(data_inputs(user)) > 1 and (user.line == add.line or any(
                    id(other) in streams or id(root(other)) in streams for other in data_inputs(user)
                    if other is not node)):
                continue
            pending.append((user, direct and user.op in ("dropout", "pass") and user.inputs[0] is node))
    return True


def _residual(add, skip_index, skip_root, walked, branches, norms_by_source, projection) -> Residual:
    """`projection`: the steps of a transformed skip path (`shortcut(x)`), None for an identity skip."""
    branch_nodes = [add.inputs[j] for j in branches]
    pre_norms = [norm for norm in norms_by_source.get(id(root(skip_root)), [])
                 if any(id(norm) in ancestors(b) for b in branch_nodes)]
    inner_parallel = [len([t for t in root(b).inputs if reaches(t, skip_root, True)])
                      for b in branch_nodes if root(b).op == "add"]
    view = ResidualView(
        skip_path=tuple(_step(step, add) for step in walked),
        branch_paths=tuple(tuple(_step(step, add) for step in strip_passthrough(b, allow_scale=True)[1])
                           for b in branch_nodes),
        branch_count=max([len(branches), *inner_parallel]),
        pre_normed=bool(pre_norms),
        branch_output_normed=all(is_layer_norm(strip_passthrough(b, allow_scale=True)[0]) for b in branch_nodes),
        skip_projection=projection is not None,
        projection_path=tuple(_step(step, add) for step in projection or ()),
    )
    decided = classify(view)
    return Residual(add, skip_root, skip_index, branches, placement=decided.placement, parallel=decided.parallel,
                    skip_scaled=decided.skip_scaled, skip_projection=view.skip_projection,
                    skip_normalised=decided.skip_normalised, gated_branch=decided.gated_branch,
                    dropout_on_skip=decided.dropout_on_skip, pre_norms=pre_norms)


def _step(node: Node, add: Node) -> Step:
    """A dataflow node as the placement classifier sees it; a dropout is the add's own when it runs in
    the same inlined module call."""
    if node.op in (DROPOUT, MUL, DIV, PASS):
        kind = node.op
    else:
        kind = PROJECTION if _is_projection(node) else OTHER
    return Step(kind, own=node.frames == add.frames, normalises=node.op == "norm" or is_layer_norm(node))


# ----- widths ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Width:
    """A feature width: `base + offset` in one class's constructor scope, or relative to the skip."""

    scope: str  # class name; "" for the skip-relative width
    base: str  # normalised expression text ("d_model"), "" for a literal
    offset: int
    text: str

    def comparable(self, other: Width) -> bool:
        return self.base == other.base and (self.scope == other.scope or self.base == "")


def _width_from_expr(expr: cst.BaseExpression | None, scope: str, module: cst.Module) -> Width | None:
    if expr is None:
        return None
    text = module.code_for_node(expr).strip()
    if isinstance(expr, cst.Integer):
        value = literal_number(expr)
        return None if value is UNKNOWN else Width("", "", value, text)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Subtract)) \
            and isinstance(expr.right, cst.Integer):
        inner = _width_from_expr(expr.left, scope, module)
        delta = literal_number(expr.right)
        if inner is None or delta is UNKNOWN:
            return None
        delta *= 1 if isinstance(expr.operator, cst.Add) else -1
        return Width(inner.scope, inner.base, inner.offset + delta, text)
    base = "".join(text.split()).replace("self.", "")
    return Width(scope, base, 0, text)


def _branch_width(node: Node, residual: Residual, module, binding: dict, depth: int = 0):
    """width_mismatch's walk from a branch back to the skip. Not a closure: one calling itself is a reference
    cycle, which kept the file's libcst tree for the cyclic collector."""
    if node is residual.skip:
        return "skip", 0
    if depth > 200:
        return None
    if node.op in ("dropout", "act", "norm", "neg") or (node.op == "pass" and not node.info.get("width_changing")):
        return _branch_width(node.inputs[0], residual, module, binding, depth + 1) if node.inputs else None
    if "norm_kind" in node.info and "norm_input" in node.info:
        return _branch_width(node.info["norm_input"], residual, module, binding, depth + 1)
    if node.op in ("add", "sub", "mul", "div", "phi"):
        for parent in data_inputs(node):
            found = _branch_width(parent, residual, module, binding, depth + 1)
            if found is not None:
                return found
        return None
    if node.op == "module":
        spec = node.info.get("spec")
        module_name = node.info.get("module")
        if module_name in torch_api.WIDTH_PRESERVING_MODULES and node.inputs:
            return _branch_width(node.inputs[0], residual, module, binding, depth + 1)
        if module_name in torch_api.LINEAR_MODULES and spec is not None and spec.owner is not None:
            fed = data_inputs(node)
            incoming = _branch_width(fed[0], residual, module, binding, depth + 1) if fed else None
            if incoming is None:
                return None
            scope = spec.owner.name
            expected = _width_from_expr(spec.arg(0, "in_features"), scope, module)
            produced = _width_from_expr(spec.arg(1, "out_features"), scope, module)
            if expected is None or produced is None:
                return None
            if incoming[0] == "skip":
                # The layer accepts the skip's width: the skip is `in_features - offset`.
                binding.setdefault("skip", Width(expected.scope, expected.base,
                                                 expected.offset - incoming[1], expected.text))
            elif not incoming[1].comparable(expected) or incoming[1].offset != expected.offset:
                if incoming[1].comparable(expected):
                    return None  # the branch itself would not run; not our finding
            return "width", produced
    return None


def width_mismatch(residual: Residual, index) -> str:
    """Describe a provable width difference between skip and branch, or ""."""
    if residual.skip_projection:
        return ""
    module = index.module
    binding: dict[str, Width] = {}

    branch_widths = []
    for j in residual.branches:
        found = _branch_width(residual.add.inputs[j], residual, module, binding)
        if found is None:
            return ""
        branch_widths.append((j, found))
    for j, found in branch_widths:
        terms = residual.terms
        branch_text = terms[j] if j < len(terms) else "branch"
        skip_text = terms[residual.skip_term] if residual.skip_term < len(terms) else "skip"
        if found[0] == "skip":
            if found[1] != 0:
                return f"`{branch_text}` is {found[1]:+d} wider than the skip `{skip_text}`"
            continue
        produced: Width = found[1]
        skip_width = binding.get("skip")
        if skip_width is None or not skip_width.comparable(produced):
            continue
        if produced.offset != skip_width.offset:
            skip_desc = skip_width.text if skip_width.offset == 0 or skip_width.base == "" else \
                f"{skip_width.base} {skip_width.offset:+d}".replace("+", "+ ").replace("-", "- ")
            if skip_width.base == "":
                skip_desc = str(skip_width.offset)
            return (f"the branch `{branch_text}` has width `{produced.text}` but the skip `{skip_text}` "
                    f"has width `{skip_desc}`")
    return ""
