"""The placement of a block class defined in another project file, as a stack of this file builds it.

`nn.ModuleList([EncoderLayer(size, layer_norm=kwargs.get("layer_norm", "pre")) for _ in range(n)])`
with `EncoderLayer` imported: the layer's own default (`layer_norm="post"`) is not what this stack
runs. The block's forward is evaluated in its own file with the constructor defaults replaced by
the values this construction passes (`as_built`), so the stack gets the placement its blocks have
as built. Nothing runs; an argument that does not fold leaves the placement undecided (None) when
the forward branches on it.
"""

from __future__ import annotations

from reslint.placement import placement_family, residual_placement
from reslint.static.as_built import imported_block
from reslint.static.index import ClassInfo, FileIndex, ModuleSpec


def imported_block_placement(index: FileIndex, source_path: str, spec: ModuleSpec) -> tuple[str, str] | None:
    """(placement, class name) of the imported project class `spec` builds, as built there; None when the class
    is not a project module class with residual adds, or its placement depends on what does not fold."""
    block = imported_block(index, source_path, spec)
    if block is None:
        return None
    placement = block.project.memo(("imported block", *block.key),
                                   lambda: evaluate(block.index, str(block.path), block.info))
    return (placement, block.info.name) if placement is not None else None


def evaluate(index: FileIndex, path: str, info: ClassInfo) -> str | None:
    from reslint.static.dataflow import evaluate_returns
    from reslint.static.residuals import find_residuals

    evaluated = evaluate_returns(index, path, info)
    if evaluated is None:
        return None  # the evaluation gave up, or the forward branches on a value this construction does not fix
    graph, _ = evaluated
    placements = {residual_placement(residual) for residual in find_residuals(graph, index)
                  if residual.placement != "none"}
    families = {placement_family(placement) for placement in placements}
    if len(placements) == 1:
        return placements.pop()
    return families.pop() if len(families) == 1 and families <= {"pre", "post"} else None
