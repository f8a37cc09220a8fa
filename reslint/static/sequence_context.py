"""Sequence evidence from other project files, for a model with a BatchNorm over (batch, channels, time) (RL201).

A Conformer's convolution module is a sequence model's part only through the classes around it, and
projects spread those over files. Asked of a model of the checked file that has no sequence marker of
its own and builds such a BatchNorm (never of CNNs: BatchNorm2d is not asked about), in two directions:

- down: the project classes of other files that the model's classes name in `__init__` (fairseq's
  ConformerEncoderLayer builds ESPNETMultiHeadedAttention, defined in espnet_multihead_attention.py);
- up: the classes of other files that build the model, called or named in their `__init__`
  (espnet's conformer Encoder: `convolution_layer = ConvolutionModule`, called inside `repeat(...)`),
  with the markers of their own files and down from them (that Encoder's attention is defined in a
  third file); through factory functions, by what they build with the class (espnet2's
  `build_conformer_block` passes attention and the convolution module to one block) or else by who
  calls them; and through builders of builders.

A class counts with the markers of the model its file builds it into (another file's facts, read
through the project index, never by importing the project). The search does not go up through a builder
that runs the model on a table's (batch, features) (`before_tokens`), and a tabular model's embedding
tables (`column_tables`) are no token evidence, here or in the model's own file.
"""

from __future__ import annotations

import weakref
from pathlib import Path

import libcst as cst

from reslint.project_index import ProjectIndex, is_under, project_path
from reslint.static.walk import walk

MAX_BUILDER_LEVELS = 3  # builders (or factories) of builders followed up
MAX_BUILT_LEVELS = 2  # imported classes of imported classes followed down


def markers_elsewhere(index, source_path: str, model, extract_facts) -> tuple[tuple[str, ...], list[str]]:
    """(sequence markers, files read) for `model` (the file's `ModelFacts`) from the rest of the project.
    `extract_facts` is the static engine's, passed in: the engine sits above this module."""
    lookup = Lookup(ProjectIndex.for_file(source_path), type(index), extract_facts)
    here = project_path(source_path)
    markers = lookup.built(here, index, initializers(index, model.classes), MAX_BUILT_LEVELS) or lookup.builders(
        here, model.name)
    return tuple(dict.fromkeys(markers)), [str(path) for path in dict.fromkeys(lookup.read)]


class Lookup:
    def __init__(self, project: ProjectIndex, index_class, extract_facts):
        self.project = project
        self.index_class = index_class
        self.extract_facts = extract_facts
        self.read: list[Path] = []
        self.seen_built: set[tuple[Path, str]] = set()

    def facts(self, path: Path):
        facts = self.project.static_facts(path, self.extract_facts, self.index_class)
        if facts is not None:
            self.read.append(path)
        return facts

    def built(self, path: Path, index, bodies, levels: int) -> list[str]:
        """The markers of the project classes that `bodies` (functions of `index`, the file at `path`: the
        `__init__` of a model's classes, a factory) name: each one's own model, and, `levels` deep, what
        that model builds in turn. Classes of `path` itself count only for a factory (a model's own are
        in its closure already)."""
        markers: list[str] = []
        factory = any(body.name.value != "__init__" for body in bodies)
        for dotted in named_classes(index, bodies, local=factory):
            resolved = self.project.resolve(path, dotted)
            if (resolved is None or resolved[0] == path and not factory or not resolved[1]
                    or resolved in self.seen_built or not is_under(resolved[0], self.project.root)):
                continue
            self.seen_built.add(resolved)
            other = self.project.file_index(resolved[0], self.index_class)
            info = other.classes.get(resolved[1]) if other is not None else None
            if info is None or not other.is_module_class(info):
                continue
            facts = self.facts(resolved[0])
            own = [model for model in facts.models if model.name == resolved[1]] if facts is not None else []
            found = [marker for model in own for marker in model.sequence_markers]
            if not found and levels > 1:
                classes = own[0].classes if own else (resolved[1],)
                found = self.built(resolved[0], other, initializers(other, classes), levels - 1)
            markers.extend(found)
        return markers

    def builders(self, path: Path, name: str) -> list[str]:
        """The markers of the models of other files that build class `name` of `path`, level by level up to
        the first level that has some."""
        level = [(path, name)]
        seen = set(level)
        for _ in range(MAX_BUILDER_LEVELS):
            markers: list[str] = []
            above: list[tuple[Path, str]] = []
            for current_path, current in level:
                for site in self.project.construction_sites(current_path, current, references=True):
                    if not site.scope or site.scope_is_class and site.path == current_path:
                        continue  # module level, or the file's own classes (in the model's closure already)
                    other = self.project.file_index(site.path, self.index_class)
                    if other is not None and before_tokens(other, site, current):
                        continue  # it sees a table's (batch, features), not the tokens its builder's builders see
                    if not site.scope_is_class:  # a factory: what it builds with the class, else who calls it
                        function = other.functions.get(site.scope) if other is not None else None
                        found = self.built(site.path, other, [function], MAX_BUILT_LEVELS) if function else []
                        markers.extend(found)
                        if not found:
                            above.append((site.path, site.scope))
                        continue
                    facts = self.facts(site.path)
                    for model in (facts.models if facts is not None and other is not None else ()):
                        if site.scope not in model.classes:
                            continue
                        found = list(model.sequence_markers) or self.built(
                            site.path, other, initializers(other, model.classes), MAX_BUILT_LEVELS)
                        markers.extend(found)
                        if not found:
                            above.append((site.path, model.name))
            if markers:
                return markers
            level = [item for item in dict.fromkeys(above) if item not in seen]
            seen.update(level)
        return []


def before_tokens(index, site, name: str) -> bool:
    """Whether the class `name`, built at `site` (of the file of `index`), works on a table's (batch, features)
    rather than on a sequence, whatever the models above it do with the result:

    - built by a class that embeds a table's columns (its own `column_tables`): what it builds runs on the columns
      before they become tokens (pytorch-tabular's Embedding2dLayer normalises the continuous features, then
      multiplies each by its feature's vector);
    - built by a factory next to an `nn.Linear` over the same features (`BatchNorm1d(in_units)` then
      `nn.Linear(in_units, out_units)`, a list of layers for an nn.Sequential): BatchNorm1d normalises axis 1 and
      Linear reads the last one, so the two fit only on (batch, features) vectors.
    """
    if site.scope_is_class:
        return site.scope in index.classes and bool(column_tables(index.classes, (site.scope,)))
    function = index.functions.get(site.scope)
    if function is None:
        return False
    calls = _WidthCalls(name)
    walk(function.body, calls)
    return bool(calls.built) and all(width in calls.linear_inputs for width in calls.built)


class _WidthCalls:
    """The widths (first argument, as code) of the calls of class `name` (`built`) and of `nn.Linear`
    (`linear_inputs`, their in_features)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.built: list[str] = []
        self.linear_inputs: set[str] = set()

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        called = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else ""
        if called not in (self.name, "Linear"):
            return
        keyword = "num_features" if called == self.name else "in_features"
        width = next((arg.value for arg in node.args if arg.keyword is not None and arg.keyword.value == keyword), None)
        if width is None and node.args and node.args[0].keyword is None and not node.args[0].star:
            width = node.args[0].value
        code = cst.Module([]).code_for_node(width) if width is not None else None
        if called == "Linear":
            if code is not None:
                self.linear_inputs.add(code)
        else:
            self.built.append(code)


def initializers(index, classes) -> list[cst.FunctionDef]:
    """The `__init__` of each of `classes` (of `index`) that has one."""
    infos = [index.classes.get(name) for name in sorted(classes)]
    return [info.methods["__init__"] for info in infos if info is not None and "__init__" in info.methods]


def named_classes(index, bodies, local: bool = False) -> list[str]:
    """The dotted import paths of the capitalised imported names (`Attention`, `layers.Attention`) that
    `bodies` mention, called or not, torch's own left out; with `local`, the file's own classes too."""
    visitor = _ClassNames(index, local)
    for body in bodies:
        walk(body.body, visitor)
    return [dotted for dotted in visitor.found if dotted.split(".")[0] != "torch"]


class _ClassNames:
    """named_classes' visitor; module-level: a class defined per call is a reference cycle, and this one, closing
    over the file's index, kept the file's libcst tree for the cyclic collector."""

    def __init__(self, index, local: bool) -> None:
        self.index = index
        self.local = local
        self.found: dict[str, None] = {}

    def visit_Name(self, node: cst.Name) -> None:
        index = self.index
        dotted = index.aliases.get(node.value) or (node.value if self.local and node.value in index.classes else None)
        if dotted and node.value[:1].isupper():
            self.found.setdefault(dotted)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        aliases = self.index.aliases
        if isinstance(node.value, cst.Name) and node.value.value in aliases and node.attr.value[:1].isupper():
            self.found.setdefault(f"{aliases[node.value.value]}.{node.attr.value}")


# ----- tables of a tabular model's columns, not token embeddings -------------------------------------

def column_tables(classes: dict, names) -> set[int]:
    """The `id` of each `nn.Embedding` spec of the classes `names` (of `classes`, a file index's) that embeds
    the columns of a table, not a sequence of tokens, and so is no sequence evidence (pytorch-tabular's
    FT-Transformer and TabTransformer builders):

    - one table per column, sized by the column: built in a comprehension whose variable is the table's size
      (`nn.ModuleList([nn.Embedding(cardinality, d) for cardinality in cardinalities])`), directly or inside a
      class of the file built that way (`[SharedEmbeddings(cardinality, d) for cardinality in ...]`);
      each looks up one value per sample, a vector, not a (batch, time) sequence;
    - a table of per-index vectors looked up only with `torch.arange(...)` (a feature's or a position's
      own vector): it embeds no input, like an `nn.Parameter` of the same shape, which is no evidence either.
    """
    per_column_calls: set[int] = set()
    per_column_classes: set[str] = set()
    for name in names:
        calls, classes_built = per_column_builds(classes[name])
        per_column_calls |= calls
        per_column_classes |= classes_built
    tables: set[int] = set()
    for name in names:
        info = classes[name]
        for spec in info.submodules.values():
            for table in _embedding_specs(spec):
                if name in per_column_classes or id(table.node) in per_column_calls:
                    tables.add(id(table))
                    continue
                found = self_call_indexes(info).get(spec.attr)
                if found and all(found):
                    tables.add(id(table))
    return tables


# What column_tables' walks find, by class (a ClassInfo is one file index's class): each model of a file with an
# nn.Embedding asks about every class of its closure, and most files' models share their classes.
_PER_COLUMN_BUILDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_SELF_CALL_INDEXES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def per_column_builds(info) -> tuple[frozenset[int], frozenset[str]]:
    """walk_per_column_builds(info), once per class."""
    known = _PER_COLUMN_BUILDS.get(info)
    if known is None:
        known = _PER_COLUMN_BUILDS[info] = walk_per_column_builds(info)
    return known


def self_call_indexes(info) -> dict[str, list[bool]]:
    """walk_self_call_indexes(info), once per class."""
    known = _SELF_CALL_INDEXES.get(info)
    if known is None:
        known = _SELF_CALL_INDEXES[info] = walk_self_call_indexes(info)
    return known


def walk_per_column_builds(info) -> tuple[frozenset[int], frozenset[str]]:
    """_PerColumnBuilds' calls and classes of the class's `__init__`."""
    per_column = _PerColumnBuilds()
    init = info.methods.get("__init__")
    if init is not None:
        walk(init.body, per_column)
    return frozenset(per_column.calls), frozenset(per_column.classes)


def walk_self_call_indexes(info) -> dict[str, list[bool]]:
    """_Lookups' answer over the class's methods: for each `self.attribute(index, ...)` called, whether each
    index is a range (asked only of a class with a table not built per column)."""
    lookups = _Lookups()
    for method in info.methods.values():
        lookups.assigned = {}
        walk(method.body, _Assignments(lookups.assigned))
        walk(method.body, lookups)
    return lookups.arguments


def _embedding_specs(spec):
    pending = [spec]
    while pending:
        current = pending.pop()
        if current.kind == "builtin" and current.name == "Embedding":
            yield current
        pending.extend(current.elements)
        pending.extend(current.named.values())


class _PerColumnBuilds:
    """The calls `Name(size, ...)` / `nn.Name(size, ...)` of comprehensions whose variable is `size`: their nodes'
    ids (`calls`) and the called names (`classes`)."""

    def __init__(self) -> None:
        self.calls: set[int] = set()
        self.classes: set[str] = set()

    def visit_ListComp(self, node) -> None:
        self._comprehension(node)

    def visit_GeneratorExp(self, node) -> None:
        self._comprehension(node)

    def _comprehension(self, node) -> None:
        call = node.elt
        if not isinstance(call, cst.Call) or not call.args or call.args[0].keyword is not None or call.args[0].star:
            return
        size = call.args[0].value
        if not isinstance(size, cst.Name) or size.value not in _comprehension_targets(node.for_in):
            return
        func = call.func
        name = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else ""
        self.calls.add(id(call))
        self.classes.add(name)


def _comprehension_targets(for_in) -> set[str]:
    names: set[str] = set()
    while for_in is not None:
        pending = [for_in.target]
        while pending:
            target = pending.pop()
            if isinstance(target, cst.Name):
                names.add(target.value)
            elif isinstance(target, (cst.Tuple, cst.List)):
                pending.extend(element.value for element in target.elements)
        for_in = for_in.inner_for_in
    return names


class _Assignments:
    """`name = value` of one function body, by name (None for a name assigned more than once)."""

    def __init__(self, assigned: dict) -> None:
        self.assigned = assigned

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                name = target.target.value
                self.assigned[name] = None if name in self.assigned else node.value

    def visit_FunctionDef(self, node) -> bool:
        return False  # a nested function's names are its own


class _Lookups:
    """For each `self.attribute(index, ...)` called: whether each call's index is an index range (`torch.arange`,
    possibly reshaped or expanded), read through the function's single assignments (`assigned`)."""

    def __init__(self) -> None:
        self.arguments: dict[str, list[bool]] = {}
        self.assigned: dict = {}

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"
                and node.args):
            self.arguments.setdefault(func.attr.value, []).append(self._index_range(node.args[0].value))

    def _index_range(self, value) -> bool:
        for _ in range(8):
            if isinstance(value, cst.Name) and self.assigned.get(value.value) is not None:
                value = self.assigned[value.value]
            elif isinstance(value, cst.Subscript):
                value = value.value
            elif isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and not (
                    isinstance(value.func.value, cst.Name) and value.func.value.value == "torch"):
                value = value.func.value  # a method of the index tensor: .expand(...), .unsqueeze(0), .to(device)
            else:
                break
        func = value.func if isinstance(value, cst.Call) else None
        return (isinstance(func, cst.Attribute) and func.attr.value == "arange"
                or isinstance(func, cst.Name) and func.value == "arange")
