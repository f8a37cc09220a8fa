"""How the project's other files build a block class: the arguments their construction sites pass.

A layer whose own default is Post-LN (`layer_norm="post"`) while every stack of the project builds it
Pre-LN (`EncoderLayer(layer_norm=kwargs.get("layer_norm", "pre"))` in another file, as joeynmt does) is a
Pre-LN layer: how the stacks build it decides its placement, its own default only where no stack does.
"""

from __future__ import annotations

import libcst as cst

from reslint.cross_file_reads import note
from reslint.placement import PLACEMENT_FLAG_WORDS
from reslint.static.index import UNKNOWN, ClassInfo, ModuleSpec
from reslint.static.unvalidated_parse import parse_module


def site_specs(index, source_path: str, info: ClassInfo) -> tuple[list[ModuleSpec], list]:
    """One spec per distinct way the module classes of other project files build `info`, each holding the
    string and bool arguments they pass that differ from its defaults, and the construction sites read
    (`ConstructionSite`s). ([], sites) when some site builds it with its defaults, or with arguments that do
    not fold to literals: then its own defaults stand. ([], []) when no other file builds it."""
    from reslint.project_index import ProjectIndex, project_path

    init = info.methods.get("__init__")
    if init is None:
        return [], []
    parameters, positional = _parameters(init)
    project = ProjectIndex.for_file(source_path)
    here = project_path(source_path)
    variants: dict[tuple, ModuleSpec] = {}
    sites = []
    for site in project.construction_sites(source_path, info.name):
        if not site.scope_is_class or site.path == here:
            continue
        other = project.file_index(site.path, type(index))
        owner = other.classes.get(site.scope) if other is not None else None
        if owner is None or not other.is_module_class(owner):
            continue
        sites.append(site)
        calls = [spec for spec in _specs_of(owner) if spec.kind in ("local", "external")
                 and spec.name.rsplit(".", 1)[-1] == info.name]
        if not calls:
            return [], sites  # built where the index keeps no call (a helper's loop): its arguments are unknown
        for call in calls:
            passed = _literal_arguments(index, info, parameters, positional, other, owner, call)
            if not passed:
                return [], sites
            variants.setdefault(tuple(sorted(passed.items())), _spec(info, passed))
    return list(variants.values()), sites


def _parameters(init: cst.FunctionDef) -> tuple[list[str], int]:
    """The constructor's parameter names after `self`, and how many of them may be passed by position."""
    positional = [param.name.value for param in list(init.params.posonly_params) + list(init.params.params)][1:]
    return positional + [param.name.value for param in init.params.kwonly_params], len(positional)


def value_at_sites(index, source_path: str, info: ClassInfo, parameter: str, module_classes,
                   across_files: bool) -> tuple[object, list]:
    """The one value every construction site of `info` passes for its constructor `parameter` (its default
    where a site passes none): the module classes of this file (`module_classes`), and with `across_files` the
    stacks of other project files (`site_specs`). UNKNOWN when nothing builds it, the sites differ, or one
    passes what does not fold; the construction sites of other files read."""
    init = info.methods.get("__init__")
    if init is None:
        return UNKNOWN, []
    parameters, positional = _parameters(init)
    if parameter not in parameters:
        return UNKNOWN, []
    default = index.fold(None, info.init_defaults.get(parameter))
    position = parameters.index(parameter)
    position = position if position < positional else 10_000  # keyword-only

    def passed(owner: ClassInfo, call: ModuleSpec) -> object:
        expr = call.arg(position, parameter)
        return default if expr is None else index.fold(owner, expr)

    values = [passed(owner, spec) for owner in module_classes if owner is not info
              for spec in _specs_of(owner) if spec.kind == "local" and spec.name == info.name]
    specs, sites = site_specs(index, source_path, info) if across_files else ([], [])
    values += [spec_arguments(spec).get(parameter, default) for spec in specs]
    if sites and not specs:
        values.append(default)  # some site builds it with its defaults, or with what does not fold
    found = set(values)
    return (found.pop() if len(found) == 1 else UNKNOWN), sites


def _literal_arguments(index, info: ClassInfo, parameters: list[str], positional: int, other, owner: ClassInfo,
                       call: ModuleSpec) -> dict[str, object]:
    """{parameter: value} of the string and bool arguments `call` passes that differ from the defaults."""
    passed = {}
    for position, name in enumerate(parameters):
        expr = call.arg(position if position < positional else 10_000, name)
        if expr is None:
            continue
        value = other.fold(owner, expr)
        default = info.init_defaults.get(name)
        own = index.fold(None, default) if default is not None else UNKNOWN
        if isinstance(value, (str, bool)) and value != own:
            passed[name] = value
    return passed


def _spec(info: ClassInfo, passed: dict[str, object]) -> ModuleSpec:
    args = tuple(cst.Arg(keyword=cst.Name(name), value=_literal(value)) for name, value in passed.items())
    return ModuleSpec("local", info.name, None, None, args=args)


def _literal(value: object) -> cst.BaseExpression:
    return cst.Name(str(value)) if isinstance(value, bool) else cst.SimpleString(repr(value))


def _specs_of(info: ClassInfo):
    pending = list(info.submodules.values())
    while pending:
        spec = pending.pop()
        yield spec
        pending.extend(spec.elements)
        pending.extend(spec.named.values())


def spec_arguments(spec: ModuleSpec) -> dict[str, object]:
    """The keyword arguments of a spec `site_specs` made, as Python values."""
    return {arg.keyword.value: _value(arg.value) for arg in spec.args}


def _value(expr: cst.BaseExpression) -> object:
    if isinstance(expr, cst.Name):
        return expr.value == "True"
    return expr.evaluated_value


def arguments_from_stacks(path: str, class_name: str, source: str) -> tuple[dict[str, object], str]:
    """For the trace engine, which builds one model per class: the arguments every stack of another file
    builds `class_name` (defined in `path`, whose text is `source`) with, where they all agree, and the first
    site ("encoder.py:12"); ({}, "") when they do not, or nothing builds it elsewhere."""
    from reslint.discovery import display_path
    from reslint.static.index import FileIndex

    index = FileIndex(parse_module(source), source_path=path)
    info = index.classes.get(class_name)
    if info is None:
        return {}, ""
    specs, sites = site_specs(index, path, info)
    note(str(site.path) for site in sites)
    if len(specs) != 1:
        return {}, ""
    return spec_arguments(specs[0]), f"{display_path(str(sites[0].path))}:{sites[0].line}"


def placement_parameters(defaults: dict[str, object]) -> bool:
    """Whether constructor defaults ({name: default}) include a string or bool flag named like a placement
    switch (`layer_norm="post"`, `norm_first=False`): only such classes are worth looking up elsewhere."""
    return any(isinstance(default, (str, bool)) and any(word in name.lower() for word in PLACEMENT_FLAG_WORDS)
               for name, default in defaults.items())
