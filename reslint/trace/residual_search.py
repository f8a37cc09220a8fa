"""The trace engine's adapter to the placement classifier: residual adds in a captured graph.

A residual add is an add whose one operand (the skip) is an ancestor of the other (the branch) through a
parametrised op. For each, the ops on its skip path and at the end of its branches, whether a norm of the
stream feeds a branch and whether a norm consumes the sum in the same block are described to
`reslint.placement`, which decides the placement, as it does for the static engine.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from reslint.placement import DIV, DROPOUT, MUL, OTHER, PASS, PROJECTION, ResidualView, Step, classify, settle_post
from reslint.trace.fx_graph import is_tensor, shape_of
from reslint.trace.norm_recognition import norms_by_source
from reslint.trace.op_tables import ADD_OPS, DROPOUT_OPS, ELEMENTWISE_OPS, JOIN_OPS, LAYER_NORM_OPS, SKIP_PATH_OPS


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
    pieces: tuple = ()  # a skip joined from pieces (`torch.cat`): the values the branch reads


class ResidualSearch:
    """The residual adds of a graph, classified by `reslint.placement`."""

    def __init__(self, graph, norms: dict, where):
        self.graph = graph
        self.norms = norms
        self.where = where

    def sum_terms(self, add) -> list:
        """Operands of a chain of adds `a + b + c` whose inner sums are used only by the next add."""
        terms = []
        for operand in add.args[:2]:
            if not hasattr(operand, "op") or not is_tensor(operand) or operand in self.graph.params:
                continue
            if self.graph.ops[operand] in ADD_OPS and len(operand.users) == 1 \
                    and len(self.graph.data_inputs(operand)) == 2:
                terms.extend(self.sum_terms(operand))
            else:
                terms.append(operand)
        return terms

    def _sum_nodes(self, add) -> list:
        """The add and the inner sums `sum_terms` folds into it (`a + b + c` written on several lines)."""
        nodes = [add]
        for operand in add.args[:2]:
            if hasattr(operand, "op") and operand in self.graph.ops and self.graph.ops[operand] in ADD_OPS \
                    and len(operand.users) == 1 and len(self.graph.data_inputs(operand)) == 2:
                nodes.extend(self._sum_nodes(operand))
        return nodes

    def find_residuals(self) -> list[Residual]:
        by_source = norms_by_source(self.norms)
        residuals = []
        for node in self.graph.nodes:
            if self.graph.ops[node] not in ADD_OPS or not is_tensor(node):
                continue
            shape = shape_of(node)
            if shape is not None and len(shape) == 0:
                continue  # scalars: loss terms
            if len(node.users) == 1 and self.graph.ops[next(iter(node.users))] in ADD_OPS \
                    and len(self.graph.data_inputs(next(iter(node.users)))) == 2:
                continue  # an inner sum: classified with the outer add
            terms = self.sum_terms(node)
            if len(terms) < 2:
                continue
            residual = self._classify(node, terms, by_source)
            if residual is not None:
                residuals.append(residual)
        skips = {r.skip for r in residuals} | {r.skip_term for r in residuals}
        runs = Counter(self._line(r.add) for r in residuals)
        for residual in residuals:
            if residual.placement == "none":
                residual.placement = settle_post(
                    residual.placement, stream_continues=self._stream_continues(residual.add, skips),
                    sum_normed_in_block=any(self.where.same_block(residual.add, norm)
                                            and not self._after_loop(residual.add, norm, runs)
                                            for norm in by_source.get(residual.add, []))
                    and not (runs[self._line(residual.add)] == 1 and self._feeds_own_stack(residual.add)))
        # A position term added to the stream (`with_pos_embed(output, query_pos)`) is not a stream itself:
        # the stream is what normed residuals (Pre-LN, Post-LN) skip with.
        streams = {node for r in residuals if r.placement in ("pre", "post", "sandwich")
                   for node in (r.skip, r.skip_term)}
        return [r for r in residuals if r.skip_projection or not all(
            self._side_input(source, branch, r.add, streams) for source in r.pieces or (r.skip,)
            for branch in r.branches)]

    def _after_loop(self, add, norm, runs: Counter) -> bool:
        """Whether the norm runs fewer times than the line of the add: it follows the loop that repeats the
        add (`for layer in self.layers: x = x + layer(x)`) and normalises its last sum once, a final norm.
        The graph unrolls loops; the static engine sees them."""
        line = self._line(norm)
        if line is None or self._line(add) is None:
            return False
        norm_runs = len({id(info) for node, info in self.norms.items() if self._line(node) == line})
        return norm_runs < runs[self._line(add)]

    def _line(self, node) -> int | None:
        """The node's line in the checked file, from its own stack trace."""
        lines = self.where.user_lines(node)
        return lines[-1] if lines else None

    def _classify(self, add, terms, by_source) -> Residual | None:
        stripped = [self.graph.strip(term, allow_scale=True) for term in terms]
        for skip_index, (deepest, walked) in enumerate(stripped):
            chain = walked + [deepest]
            floor = min(self.graph.index[c] for c in chain)
            reached = [self.graph.reach(term, floor) if j != skip_index else None for j, term in enumerate(terms)]
            for depth, candidate in enumerate(chain):
                if candidate.op == "get_attr" or candidate in self.graph.params:
                    continue
                branches = [j for j, found in enumerate(reached) if found is not None and found.get(candidate)
                            and not self._side_input(candidate, terms[j], add)]
                if branches:
                    return self._residual(add, terms, skip_index, candidate, walked[:depth], branches, reached,
                                          by_source, projection=None)
        # A skip joined from pieces (TFT's gated skip over its past and future LSTMs: `cat([past, future])` beside
        # `glu(cat([lstm(past), lstm(future)]))`): the branch was computed from every piece.
        for skip_index, (deepest, walked) in enumerate(stripped):
            pieces = self._joined_pieces(deepest)
            if not pieces:
                continue
            floor = min(self.graph.index[piece] for piece in pieces)
            reached = [self.graph.reach(term, floor) if j != skip_index else None for j, term in enumerate(terms)]
            branches = [j for j, found in enumerate(reached) if found is not None and all(
                found.get(piece) and not self._side_input(piece, terms[j], add) for piece in pieces)]
            if branches:
                residual = self._residual(add, terms, skip_index, deepest, walked, branches, reached, by_source,
                                          projection=None)
                residual.pieces = tuple(pieces)
                return residual
        # Both operands may transform one input (`dense(x) + skip(x)`): the skip is the one without a dropout of
        # its own (a dropout ends a branch), then the one through fewer projections, then the first.
        found = []
        for skip_index, (skip_root, walked) in enumerate(stripped):
            steps = self._skip_path(skip_root)
            for depth in range(1, len(steps)):
                if not any(self.graph.is_projection(step) for step in steps[:depth]):
                    continue
                source = steps[depth]
                reached = [self.graph.reach(term, self.graph.index[source]) if j != skip_index else None
                           for j, term in enumerate(terms)]
                branches = [j for j, found_here in enumerate(reached) if found_here is not None
                            and found_here.get(source) and not any(step in found_here for step in steps[:depth])]
                if branches:
                    found.append(((any(self.graph.ops[step] in DROPOUT_OPS for step in walked),
                                   sum(map(self.graph.is_projection, steps[:depth])), skip_index),
                                  skip_index, source, walked, branches, reached, steps[:depth]))
                    break
        if found:
            _, skip_index, source, walked, branches, reached, projection = min(found, key=lambda c: c[0])
            return self._residual(add, terms, skip_index, source, walked, branches, reached, by_source,
                                  projection=projection)
        return None

    def _joined_pieces(self, node) -> list:
        """The tensors `torch.cat` joins into `node`, each followed to its source; none for anything else."""
        if self.graph.ops[node] not in JOIN_OPS:
            return []
        pieces = [self.graph.root(piece) for piece in self.graph.data_inputs(node)]
        return pieces if len(pieces) > 1 else []

    def _skip_path(self, skip_root) -> list:
        """The skip operand and the values it is computed from by one-input ops: projections, norms,
        activations and views (`GLU(conv(LN(x)))`), nearest first."""
        steps, node = [skip_root], skip_root
        while len(steps) < 16 and (self.graph.is_projection(node) or node in self.norms
                                   or self.graph.ops[node] in SKIP_PATH_OPS
                                   or self.graph.passthrough_input(node, allow_scale=True) is not None):
            inputs = self.graph.data_inputs(node)
            if len(inputs) != 1:
                break
            node = inputs[0]
            steps.append(node)
        return steps

    def _side_input(self, source, term, add, streams=frozenset()) -> bool:
        """Whether `source` reaches `term` only by being added, as it is, where it is not the stream: by the
        same line in an earlier layer (an attention mask or position bias every layer adds to its scores),
        to a value that is the skip of a residual (`streams`: a position term added to the stream), or by
        being broadcast into a larger value (a `(batch, 1, 1, keys)` mask added to another attention's
        scores, a scaler's `(batch, 1, channels)` statistics subtracted from the series): a stream keeps
        its shape wherever it flows, a mask or a statistic is repeated over the axes it lacks."""
        limit = self.graph.index[term]
        lines = {self.where.span_of(node).line for node in self._sum_nodes(add)}
        pending, seen = [(source, True)], set()
        while pending:
            node, direct = pending.pop()
            if node is term:
                return False
            if (node, direct) in seen:
                continue
            seen.add((node, direct))
            for user in node.users:
                if self.graph.index.get(user, limit + 1) > limit:
                    continue
                if direct and self.graph.ops[user] in ADD_OPS and len(self.graph.data_inputs(user)) > 1 and (
                        self.where.span_of(user).line in lines or any(
                            other in streams or self.graph.root(other) in streams
                            for other in self.graph.data_inputs(user) if other is not node)):
                    continue
                if direct and self.graph.ops[user] in ELEMENTWISE_OPS and len(self.graph.data_inputs(user)) > 1 \
                        and _expanded(shape_of(node), shape_of(user)):
                    continue
                pending.append((user, direct and self.graph.passthrough_input(user, allow_scale=True) is node))
        return True

    def _residual(self, add, terms, skip_index, skip, walked, branches, reached, by_source, projection):
        """`projection`: the steps of a transformed skip path (`shortcut(x)`), None for an identity skip."""
        branch_nodes = [terms[j] for j in branches]
        pre_norms = []
        for norm in by_source.get(self.graph.root(skip), []) + by_source.get(skip, []):
            if norm not in pre_norms and any(norm in reached[j] for j in branches):
                pre_norms.append(norm)
        owner = self.where.owner_path(add)
        view = ResidualView(
            skip_path=tuple(self._step(step, owner) for step in walked),
            branch_paths=tuple(tuple(self._step(step, owner) for step in self.graph.strip(b, True)[1])
                               for b in branch_nodes),
            branch_count=len(branch_nodes),
            pre_normed=bool(pre_norms),
            branch_output_normed=all(self.graph.strip(b, True)[0] in self.norms for b in branch_nodes),
            skip_projection=projection is not None,
            projection_path=tuple(self._step(step, owner) for step in projection or ()),
        )
        decided = classify(view)
        return Residual(add, terms[skip_index], skip, branch_nodes, walked, placement=decided.placement,
                        parallel=decided.parallel, skip_scaled=decided.skip_scaled,
                        skip_projection=view.skip_projection, gated_branch=decided.gated_branch,
                        dropout_on_skip=decided.dropout_on_skip, skip_normalised=decided.skip_normalised)

    def _step(self, node, owner: str) -> Step:
        """An fx node as the placement classifier sees it; a dropout is the add's own when its module's
        parent is the module performing the add."""
        op = self.graph.ops[node]
        if op in DROPOUT_OPS:
            kind = DROPOUT
        elif op in ("mul", "__mul__", "__rmul__", "div", "__truediv__") and unit_scale(node):
            kind = PASS  # `self.alpha * residual` with alpha's default 1.0: the skip is not scaled
        elif op in ("mul", "__mul__", "__rmul__"):
            kind = MUL
        elif op in ("div", "__truediv__"):
            kind = DIV
        elif self.graph.is_projection(node):
            kind = PROJECTION
        elif self.graph.passthrough_input(node, allow_scale=False) is not None:
            kind = PASS
        else:
            kind = OTHER
        return Step(kind, own=self.where.module_parent(node) == owner,
                    normalises=node in self.norms or op in LAYER_NORM_OPS)

    def _feeds_own_stack(self, add, limit: int = 400) -> bool:
        """Whether the sum goes on into a stack of blocks held by the module performing the add: the add is
        that model's embedding stage (wav2vec 2.0's `x + pos_conv(x)`), the norm after it the embedding norm.
        Asked only of an add the graph runs once: a loop body (`x = norm(x + layer(x))`) unrolls into many."""
        own = self.where.owner_path(add)
        inside = self.where.stack_of(add)
        pending, seen = list(add.users), set()
        while pending and len(seen) < limit:
            node = pending.pop()
            if node in seen:
                continue
            seen.add(node)
            found = self.where.stack_of(node)
            if found is not None and found != inside and (not own or found[3].startswith(own + ".")):
                return True
            pending.extend(node.users)
        return False

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
                if self.graph.passthrough_input(user, allow_scale=False) is node:
                    pending.append(user)
        return False


def _expanded(shape: tuple | None, result: tuple | None) -> bool:
    """Whether an operand of `shape` is broadcast to `result`: it lacks an axis or has size 1 where the
    result is larger."""
    if shape is None or result is None or len(shape) > len(result):
        return False
    padded = (1,) * (len(result) - len(shape)) + tuple(shape)
    return any(size == 1 and wanted != 1 for size, wanted in zip(padded, result))


def unit_scale(node) -> bool:
    """`1.0 * x`, `x * 1`, `x / 1`: a product whose number operand is one (not a tensor, not a bool)."""
    numbers = [arg for arg in node.args if isinstance(arg, (int, float)) and not isinstance(arg, bool)]
    if len(numbers) != 1 or len(node.args) != 2 or numbers[0] != 1:
        return False
    return not (str(node.target).endswith(("div", "truediv__")) and node.args[0] is numbers[0])
