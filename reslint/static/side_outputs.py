"""What a stack's imported block hands back beside its stream: `return x, attn`.

fair-esm's `TransformerLayer` (another file of the package) returns (stream, attention weights), and the
model runs `x, attn = layer(x, ...)`, sending the weights to a contact head. An imported block is one opaque
node in the importing file's graph, so both names used to carry the stream, and the weights' way into an
imported head left the stream's end undecided. The block's forward is evaluated in its own file: where every
return is a tuple whose first item is the block's residual stream and the others are no continuation of it,
the items after the first are side outputs, and RL103 follows the first only.
"""

from __future__ import annotations

from reslint.static.graph import Node, reaches, strip_passthrough
from reslint.static.index import FileIndex, ModuleSpec
from reslint.static.positions import SourceMap


def side_output_count(index: FileIndex, spec: ModuleSpec) -> int:
    """How many items follow the stream in what the imported project block class `spec` builds returns
    (1 for `return x, attn`); 0 where it returns no such tuple or is no project module class."""
    from reslint.project_index import ProjectIndex

    if index.source_path is None:
        return 0
    project = ProjectIndex.for_file(index.source_path)
    resolved = project.resolve(index.source_path, spec.name)
    if resolved is None:
        return 0
    path, name = resolved
    other = project.file_index(path, FileIndex)
    info = other.classes.get(name) if other is not None else None
    if info is None or not other.is_module_class(info):
        return 0
    if str(path) not in index.config_reads:
        index.config_reads.append(str(path))  # the cached result of this file depends on the block's file
    return project.memo(("side outputs", path, name, id(other)), lambda: _count(other, str(path), info)) or 0


def _count(index: FileIndex, path: str, info) -> int:
    from reslint.static.dataflow import BudgetExceeded, Evaluator, TupleValue
    from reslint.static.residuals import find_residuals

    evaluator = Evaluator(index, SourceMap(index.module), path)
    try:
        graph = evaluator.evaluate_class(info)
    except (BudgetExceeded, RecursionError):
        return 0
    returned = evaluator.returned
    if not isinstance(returned, TupleValue) or len(returned.items) < 2 or not isinstance(returned.items[0], Node):
        return 0
    adds = {id(residual.add): residual.add for residual in find_residuals(graph, index)}
    stream = _stream_add(returned.items[0], adds)
    if stream is None:
        return 0
    for item in returned.items[1:]:
        if isinstance(item, Node) and (item is returned.items[0] or reaches(item, stream, through_parameters=False)):
            return 0  # the stream goes on in it too (`return x, self.norm(x)`)
    return len(returned.items) - 1


def _stream_add(first: Node, adds: dict[int, Node]) -> Node | None:
    """The residual add the returned value is, through dropout, views, scaling and a closing norm (Post-LN)."""
    node, _ = strip_passthrough(first)
    if node.op == "norm" and node.inputs:
        node, _ = strip_passthrough(node.inputs[0])
    return adds.get(id(node))
