"""The placement of a block class defined in another project file, as a stack of this file builds it.

`nn.ModuleList([EncoderLayer(size, layer_norm=kwargs.get("layer_norm", "pre")) for _ in range(n)])`
with `EncoderLayer` imported: the layer's own default (`layer_norm="post"`) is not what this stack
runs. The block's forward is evaluated in its own file with the constructor defaults replaced by
the values this construction passes (folded here, where the arguments are written), so the stack
gets the placement its blocks have as built. Nothing runs; an argument that does not fold leaves
the placement undecided (None) when the forward branches on it.
"""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from reslint.placement import placement_family, residual_placement
from reslint.static.index import UNKNOWN, ClassInfo, FileIndex, ModuleSpec
from reslint.static.positions import SourceMap

LITERAL_TYPES = (str, int, float, bool, type(None))


def imported_block_placement(index: FileIndex, source_path: str, spec: ModuleSpec) -> tuple[str, str] | None:
    """(placement, class name) of the imported project class `spec` builds, as built there; None when the class
    is not a project module class with residual adds, or its placement depends on what does not fold."""
    from reslint.project_index import ProjectIndex

    project = ProjectIndex.for_file(source_path)
    resolved = project.resolve(source_path, spec.name)
    if resolved is None:
        return None
    path, name = resolved
    other = project.file_index(path, FileIndex)
    info = other.classes.get(name) if other is not None else None
    if info is None or not other.is_module_class(info):
        return None
    defaults = built_defaults(index, spec, info)
    if str(path) not in index.config_reads:
        index.config_reads.append(str(path))  # the cached result of this file depends on the block's file
    key = ("imported block", path, name, id(other), memo_key(defaults))
    placement = project.memo(key, lambda: evaluate(other, str(path), as_built(info, defaults)))
    return (placement, name) if placement is not None else None


def built_defaults(index: FileIndex, spec: ModuleSpec, info: ClassInfo) -> dict:
    """The constructor defaults of the imported class `info` as `spec` builds it here: the arguments it passes,
    folded in this file (`__unknown__` where one does not fold), over the class's own defaults."""
    defaults = dict(info.init_defaults)
    for position, parameter in constructor_parameters(info):
        passed = spec.arg(position, parameter)
        if passed is None:
            continue
        value = index.fold(spec.owner, passed)
        defaults[parameter] = literal(value) if value is not UNKNOWN and isinstance(value, LITERAL_TYPES) \
            else cst.Name("__unknown__")
    return defaults


def memo_key(defaults: dict) -> tuple:
    return tuple(sorted((k, cst.Module([]).code_for_node(v) if v is not None else "") for k, v in defaults.items()))


def as_built(info: ClassInfo, defaults: dict) -> ClassInfo:
    """A copy of the class whose constructor defaults are `defaults`; its submodules (which read those
    arguments through their owner, `PositionwiseFeedForward(size, layer_norm=layer_norm)`) belong to the copy."""
    built = replace(info, init_defaults=defaults)

    def owned(spec: ModuleSpec) -> ModuleSpec:
        return replace(spec, owner=built if spec.owner is info else spec.owner,
                       elements=tuple(owned(element) for element in spec.elements),
                       named={key: owned(inner) for key, inner in spec.named.items()})

    built.submodules = {attr: owned(spec) for attr, spec in info.submodules.items()}
    return built


def evaluate(index: FileIndex, path: str, info: ClassInfo) -> str | None:
    from reslint.static.dataflow import BudgetExceeded, Evaluator
    from reslint.static.residuals import find_residuals

    evaluator = Evaluator(index, SourceMap(index.module), path)
    try:
        graph = evaluator.evaluate_class(info)
    except (BudgetExceeded, RecursionError):
        return None
    if evaluator.undecided:
        return None  # the forward branches on a value this construction does not fix
    placements = {residual_placement(residual) for residual in find_residuals(graph, index)
                  if residual.placement != "none"}
    families = {placement_family(placement) for placement in placements}
    if len(placements) == 1:
        return placements.pop()
    return families.pop() if len(families) == 1 and families <= {"pre", "post"} else None


def constructor_parameters(info: ClassInfo) -> list[tuple[int, str]]:
    """(position, name) of `__init__`'s parameters after `self`; keyword-only ones have no position."""
    init = info.methods.get("__init__")
    if init is None:
        return []
    positional = [p.name.value for p in list(init.params.posonly_params) + list(init.params.params)][1:]
    return list(enumerate(positional)) + [(10_000, p.name.value) for p in init.params.kwonly_params]


def literal(value) -> cst.BaseExpression:
    return cst.parse_expression(repr(value))
