"""What a stack's imported block returns: its stream, the stream normalised, or side outputs beside it.

fair-esm's `TransformerLayer` (another file of the package) returns (stream, attention weights), and the
model runs `x, attn = layer(x, ...)`, sending the weights to a contact head. An imported block is one opaque
node in the importing file's graph, so both names used to carry the stream, and the weights' way into an
imported head left the stream's end undecided. The block's forward is evaluated in its own file, as this
file builds it (`imported_blocks`: its placement flag is this construction's), and each
returned item is classified: the block's residual stream, that stream through a closing norm (a Conformer
layer's last LayerNorm, `return x, self.out_norm(x)`), or a side output the stream does not reach. RL103
follows the stream, stops at the closing norm and ignores side outputs. Anything else leaves the block opaque.
"""

from __future__ import annotations

from reslint.static.graph import Node, reaches, strip_passthrough
from reslint.static.imported_blocks import as_built, built_defaults, memo_key
from reslint.static.index import FileIndex, ModuleSpec
from reslint.static.norms import is_normalised
from reslint.static.positions import SourceMap

STREAM, SIDE = "stream", "side"  # item kinds; a closing norm is described by its node's norm info (a dict)


def returned_items(index: FileIndex, spec: ModuleSpec) -> tuple:
    """One kind per item the imported project block class `spec` builds returns, for a tuple (first item the
    stream or the normed stream) or a single normed stream; () where neither holds or the class is not read."""
    from reslint.project_index import ProjectIndex

    if index.source_path is None:
        return ()
    project = ProjectIndex.for_file(index.source_path)
    resolved = project.resolve(index.source_path, spec.name)
    if resolved is None:
        return ()
    path, name = resolved
    other = project.file_index(path, FileIndex)
    info = other.classes.get(name) if other is not None else None
    if info is None or not other.is_module_class(info):
        return ()
    defaults = built_defaults(index, spec, info)
    if str(path) not in index.config_reads:
        index.config_reads.append(str(path))  # the cached result of this file depends on the block's file
    key = ("block returns", path, name, id(other), memo_key(defaults))
    return project.memo(key, lambda: _classify(other, str(path), as_built(info, defaults))) or ()


def _classify(index: FileIndex, path: str, info) -> tuple:
    from reslint.static.dataflow import BudgetExceeded, Evaluator, TupleValue
    from reslint.static.residuals import find_residuals

    evaluator = Evaluator(index, SourceMap(index.module), path)
    try:
        graph = evaluator.evaluate_class(info)
    except (BudgetExceeded, RecursionError):
        return ()
    if evaluator.undecided:
        return ()  # the forward branches on a value this construction does not fix (its placement flag)
    returned = evaluator.returned
    items = returned.items if isinstance(returned, TupleValue) else (returned,)
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
