"""What a stack's imported block returns: its stream, the stream normalised, or side outputs beside it.

fair-esm's `TransformerLayer` (another file of the package) returns (stream, attention weights), and the
model runs `x, attn = layer(x, ...)`, sending the weights to a contact head. An imported block is one opaque
node in the importing file's graph, so both names used to carry the stream, and the weights' way into an
imported head left the stream's end undecided. The block's forward is evaluated in its own file, as this
file builds it (`as_built`: its placement flag is this construction's), and each
returned item is classified: the block's residual stream, that stream through a closing norm (a Conformer
layer's last LayerNorm, `return x, self.out_norm(x)`), or a side output the stream does not reach. RL103
follows the stream, stops at the closing norm and ignores side outputs. Anything else leaves the block opaque.
"""

from __future__ import annotations

from collections.abc import Callable

from reslint.static.as_built import imported_block
from reslint.static.graph import Graph, Node, reaches, strip_passthrough
from reslint.static.index import ClassInfo, FileIndex, ModuleSpec
from reslint.static.norms import is_normalised
from reslint.static.residuals import find_residuals

STREAM, SIDE = "stream", "side"  # item kinds; a closing norm is described by its node's norm info (a dict)
# (the block's file index, its path, the class as built) -> (its graph, the items its forward returns: one for
# a single value); None where the evaluation gives up or branches on what the construction leaves open
Evaluate = Callable[[FileIndex, str, ClassInfo], "tuple[Graph, tuple] | None"]


def returned_items(index: FileIndex, spec: ModuleSpec, evaluate: Evaluate) -> tuple:
    """One kind per item the imported project block class `spec` builds returns, for a tuple (first item the
    stream or the normed stream) or a single normed stream; () where neither holds or the class is not read.
    `evaluate` is the dataflow engine's (passed in: the engine imports this module)."""
    if index.source_path is None:
        return ()
    block = imported_block(index, index.source_path, spec)
    if block is None:
        return ()
    return block.project.memo(("block returns", *block.key), lambda: _classify(
        block.index, evaluate(block.index, str(block.path), block.info))) or ()


def _classify(index: FileIndex, evaluated) -> tuple:
    if evaluated is None:
        return ()
    graph, items = evaluated
    if not items or not isinstance(items[0], Node):
        return ()
    adds = {id(residual.add): residual.add for residual in find_residuals(graph, index)}
    first = _stream_item(items[0], adds)
    if first is None:
        return ()
    kind, stream = first
    if len(items) == 1:
        return (kind,) if kind != STREAM else ()  # a plain stream needs nothing: the call node carries it
    kinds = [kind]
    for item in items[1:]:
        if not isinstance(item, Node):
            kinds.append(SIDE)  # `return x, None`
        elif (found := _stream_item(item, adds)) is not None and found[1] is stream:
            kinds.append(found[0])
        elif item is items[0] or reaches(item, stream, through_parameters=False):
            return ()  # the stream goes on in it some other way: the block stays opaque
        else:
            kinds.append(SIDE)
    return tuple(kinds)


def _stream_item(node: Node, adds: dict[int, Node]) -> tuple | None:
    """(STREAM or the closing norm's info, the residual add) for a returned value that is the block's residual
    stream, through dropout, views and scaling, or that stream normalised; None otherwise."""
    stripped, _ = strip_passthrough(node)
    if id(stripped) in adds:
        return STREAM, stripped
    if is_normalised(stripped) and stripped.inputs:
        source, _ = strip_passthrough(stripped.inputs[0])
        if id(source) in adds:
            closing = {key: stripped.info[key] for key in ("norm_kind", "l2_normalise") if key in stripped.info}
            return closing or {"l2_normalise": True}, source
    return None
