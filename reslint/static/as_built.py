"""A block class of another project file, as a construction in this file builds it.

`nn.ModuleList([EncoderLayer(size, layer_norm=kwargs.get("layer_norm", "pre")) for _ in range(n)])`
with `EncoderLayer` imported: its constructor defaults are replaced by the values this construction
passes (folded here, where the arguments are written; `__unknown__` where one does not fold), so its
forward, evaluated in its own file, runs as the stack here runs it. Read by `imported_blocks` (the
block's placement) and `block_returns` (what it hands back). Nothing here evaluates a forward.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import libcst as cst

from reslint.static.index import UNKNOWN, ClassInfo, FileIndex, ModuleSpec

LITERAL_TYPES = (str, int, float, bool, type(None))


@dataclass
class BuiltBlock:
    project: object  # the ProjectIndex both files belong to
    path: object  # the block's file
    index: FileIndex  # its index
    info: ClassInfo  # the class as built here
    key: tuple  # what a fact about it is remembered by (file, class, the defaults as built)


def imported_block(index: FileIndex, source_path: str, spec: ModuleSpec) -> BuiltBlock | None:
    """The imported project module class `spec` builds, as built here; None when it is not one. The cached
    result of this file then depends on the block's file."""
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
    defaults = dict(info.init_defaults)
    for position, parameter in constructor_parameters(info):
        passed = spec.arg(position, parameter)
        if passed is None:
            continue
        value = index.fold(spec.owner, passed)
        defaults[parameter] = literal(value) if value is not UNKNOWN and isinstance(value, LITERAL_TYPES) \
            else cst.Name("__unknown__")
    if str(path) not in index.config_reads:
        index.config_reads.append(str(path))  # the cached result of this file depends on the block's file
    key = (path, name, id(other),
           tuple(sorted((k, cst.Module([]).code_for_node(v) if v is not None else "") for k, v in defaults.items())))
    return BuiltBlock(project, path, other, as_built(info, defaults), key)


def as_built(info: ClassInfo, defaults: dict) -> ClassInfo:
    """A copy of the class whose constructor defaults are `defaults`; its submodules (which read those
    arguments through their owner, `PositionwiseFeedForward(size, layer_norm=layer_norm)`) belong to the copy."""
    built = replace(info, init_defaults=defaults)
    built.submodules = {attr: _owned(spec, info, built) for attr, spec in info.submodules.items()}
    return built


def _owned(spec: ModuleSpec, info: ClassInfo, built: ClassInfo) -> ModuleSpec:
    """The spec with `built` for `info` as its owner, its elements too (not a closure: one calling itself is a
    reference cycle, kept for the cyclic collector)."""
    return replace(spec, owner=built if spec.owner is info else spec.owner,
                   elements=tuple(_owned(element, info, built) for element in spec.elements),
                   named={key: _owned(inner, info, built) for key, inner in spec.named.items()})


def constructor_parameters(info: ClassInfo) -> list[tuple[int, str]]:
    """(position, name) of `__init__`'s parameters after `self`; keyword-only ones have no position."""
    init = info.methods.get("__init__")
    if init is None:
        return []
    positional = [p.name.value for p in list(init.params.posonly_params) + list(init.params.params)][1:]
    return list(enumerate(positional)) + [(10_000, p.name.value) for p in init.params.kwonly_params]


def literal(value) -> cst.BaseExpression:
    return cst.parse_expression(repr(value))
