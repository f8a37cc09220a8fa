"""A broadcast residual whose repeated rows are all thrown away: the one broadcast RL002 leaves alone.

FT-Transformer's last block (rtdl) attends from the [CLS] query only, `x + attention(x[:, :1], x)`: the branch
is `(batch, 1, d)` and the add repeats the [CLS] row's update over every token of the `(batch, tokens, d)`
stream. The model then keeps `x[:, 0]`, and that row is exactly its identity plus its own attention; the
other rows are wrong but nothing reads them. The add is exact where it is read when

- the branch's size-1 axis was sliced from the stream itself, at one row `k` (`x[:, :1]`, `x[:, k:k+1]`,
  `narrow`): the branch is that row's own update, not a pooled context or a gate; and
- every use of the sum goes, through ops that treat each row alone (elementwise arithmetic, pointwise
  activations, dropout, a norm or a linear layer over the trailing features), to a selection of row `k`
  only (`x[:, 0]`, `x[:, k:k+1]`). A use that mixes rows (attention, a mean over tokens), reaches the
  output or selects another row reads a repeated value, and the broadcast is reported.
"""

from __future__ import annotations

from reslint.static.torch_api import ACTIVATION_FUNCTIONS
from reslint.trace.fx_graph import shape_of
from reslint.trace.op_tables import DROPOUT_OPS, ELEMENTWISE_OPS, LAYER_NORM_OPS, SHAPE_ONLY_OPS

# Ops whose output row i depends on input row i only, whatever axis the rows are on (softmax and GLU take
# a dim, which could be the rows').
POINTWISE_OPS = (ACTIVATION_FUNCTIONS - {"softmax", "log_softmax", "glu"}) | ELEMENTWISE_OPS | DROPOUT_OPS | {
    "_to_copy", "to", "type_as", "float", "half", "bfloat16", "double", "clone", "contiguous", "alias",
    "identity", "Identity", "detach", "pow", "sqrt", "rsqrt", "neg", "abs", "clamp", "where", "masked_fill"}
TRAILING_OPS = {"linear"} | set(LAYER_NORM_OPS)  # they act on the last axes only
SPLIT_OPS = {"chunk", "split", "split_with_sizes"}
ROW_VIEW_OPS = {"view", "reshape", "_unsafe_view", "unflatten", "flatten"}  # row-wise where the leading axes stay
SEARCH_LIMIT = 2_000


def only_exact_rows_kept(graph, add, skip_term, stream, branch) -> bool:
    """Whether `skip_term + branch` broadcasts the branch over one axis of the stream (`stream`: the skip's
    source), the branch is the update of one row of it, and only that row of the sum is ever read."""
    skips = {skip_term, stream}
    skip_shape = shape_of(skip_term)
    axis = _repeated_axis(skip_shape, shape_of(branch))
    if axis is None:
        return False
    row = _sliced_row(graph, branch, skips, skip_shape, axis)
    return row is not None and _only_row_read(graph, add, axis, row, skip_shape)


def _repeated_axis(skip_shape, branch_shape) -> int | None:
    """The one axis where the branch has size 1 and the skip more, both of one rank; else None."""
    if skip_shape is None or branch_shape is None or len(skip_shape) != len(branch_shape):
        return None
    axes = [i for i, (s, b) in enumerate(zip(skip_shape, branch_shape)) if s != b]
    if len(axes) != 1 or branch_shape[axes[0]] != 1 or not isinstance(skip_shape[axes[0]], int):
        return None
    return axes[0]


def _sliced_row(graph, branch, skips, skip_shape, axis) -> int | None:
    """The row `k` of the stream the branch was computed from: a one-row slice of the stream (or of a value
    computed from it row by row, its norm) among the branch's ancestors; None if there is none or several."""
    floor = min(graph.index[skip] for skip in skips)
    rows, pending, seen = set(), [branch], set()
    while pending and len(seen) < SEARCH_LIMIT:
        node = pending.pop()
        if node in seen or graph.index.get(node, -1) < floor:
            continue
        seen.add(node)
        inputs = graph.data_inputs(node)
        if inputs and shape_of(inputs[0]) == skip_shape and _from_stream(graph, inputs[0], skips):
            kept = _selected_rows(graph, node, axis, skip_shape[axis], keeps_axis=True)
            if kept is not None:
                rows.add(kept)
                continue
        pending.extend(inputs)
    return next(iter(rows)) if len(rows) == 1 and len(seen) < SEARCH_LIMIT else None


def _from_stream(graph, node, skips, steps: int = 4) -> bool:
    """Whether `node` is the stream or computed from it alone by a few one-input ops (`norm(x)`)."""
    for _ in range(steps):
        if node in skips:
            return True
        inputs = graph.data_inputs(node)
        if len(inputs) != 1:
            return False
        node = inputs[0]
    return node in skips


def _only_row_read(graph, add, axis, row, shape) -> bool:
    pending, seen = [add], set()
    while pending:
        node = pending.pop()
        if node in seen:
            continue
        seen.add(node)
        if len(seen) > SEARCH_LIMIT:
            return False
        for user in node.users:
            op = graph.ops.get(user)
            if op in SHAPE_ONLY_OPS:
                continue
            selected = _selected_rows(graph, user, axis, shape[axis], keeps_axis=False)
            if selected == row:
                continue
            if selected is not None or not _row_wise(graph, user, axis, shape):
                return False
            pending.append(user)
    return True


def _row_wise(graph, node, axis, shape) -> bool:
    op = graph.ops.get(node)
    if op in SPLIT_OPS:  # ReGLU's `chunk(2, dim=-1)`: pieces of every row, read through getitem
        dim = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0)
        return isinstance(dim, int) and dim % len(shape) > axis
    out = shape_of(node)
    if out is None or len(out) != len(shape) or out[:axis + 1] != shape[:axis + 1]:
        return False
    if op in POINTWISE_OPS or op in ROW_VIEW_OPS:
        return True
    if op == "getitem":
        return graph.ops.get(node.args[0]) in SPLIT_OPS
    if op in TRAILING_OPS:
        return axis < len(shape) - _trailing_axes(graph, node) and (op != "linear" or graph.is_projection(node))
    return False


def _trailing_axes(graph, node) -> int:
    """How many last axes a linear layer (one) or a norm (its normalized_shape) reads together."""
    if graph.ops.get(node) not in LAYER_NORM_OPS:
        return 1
    if node.op == "call_module":
        normalised = getattr(graph.modules.get(node.target), "normalized_shape", None)
    else:
        normalised = node.args[1] if len(node.args) > 1 else node.kwargs.get("normalized_shape")
    if isinstance(normalised, int):
        return 1
    return len(normalised) if isinstance(normalised, (list, tuple)) else 99  # unknown: rows may be read together


def _selected_rows(graph, node, axis, size, keeps_axis: bool) -> int | None:
    """The one row `k` of `axis` (of `size`) that `node` selects from its input, else None. `keeps_axis`:
    only a one-row slice (`x[:, k:k+1]`, the branch's size-1 axis); else an index (`x[:, k]`) too. Other
    axes must be kept whole."""
    op = graph.ops.get(node)
    args = node.args
    if op == "select" and not keeps_axis and len(args) == 3:
        dim, index = args[1], args[2]
        return _normalised(index, size) if _same_axis(dim, axis, node, graph) else None
    if op == "slice" and len(args) >= 2:
        dim = args[1]
        start = args[2] if len(args) > 2 else None
        end = args[3] if len(args) > 3 else None
        step = args[4] if len(args) > 4 else 1
        return _one_row(start, end, step, size) if _same_axis(dim, axis, node, graph) else None
    if op == "narrow" and len(args) == 4:
        return _normalised(args[2], size) if _same_axis(args[1], axis, node, graph) and args[3] == 1 else None
    if op == "getitem" and len(args) == 2 and isinstance(args[1], tuple) and len(args[1]) > axis:
        index = args[1]
        if any(i is Ellipsis or i is None for i in index[:axis + 1]) or any(
                not isinstance(i, slice) or i != slice(None) for i in index[:axis] + index[axis + 1:]):
            return None
        chosen = index[axis]
        if isinstance(chosen, int) and not isinstance(chosen, bool) and not keeps_axis:
            return _normalised(chosen, size)
        if isinstance(chosen, slice):
            return _one_row(chosen.start, chosen.stop, chosen.step, size)
    return None


def _same_axis(dim, axis, node, graph) -> bool:
    inputs = graph.data_inputs(node)
    rank = len(shape_of(inputs[0]) or ()) if inputs else 0
    return isinstance(dim, int) and rank > 0 and dim % rank == axis


def _one_row(start, end, step, size) -> int | None:
    if step not in (None, 1) or not all(v is None or isinstance(v, int) for v in (start, end)):
        return None
    first = 0 if start is None else _normalised(start, size)
    last = size if end is None or end >= size else _normalised(end, size)
    return first if first is not None and last is not None and last - first == 1 else None


def _normalised(index, size) -> int | None:
    if not isinstance(index, int) or isinstance(index, bool) or not -size <= index < size:
        return None
    return index % size
