"""Where a stack's residual stream ends, for RL103 (missing final norm).

The norm that bounds a Pre-LN stream need not sit in the stack's class: a neck after the stack,
the parent's post-norm, the projector consuming a vision tower, a norm ending the last block or an
L2 normalisation all count. The stream is followed through every call the engine inlines; where
it leaves what the engine can see, the answer is "undecided", never "no final norm".
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from reslint.file_gate import MAX_SOURCE_BYTES, cached_as_read, read_project_file
from reslint.placement import added_back
from reslint.static import torch_api
from reslint.static.graph import Node, reaches
from reslint.static.index import BodyNodes, ClassInfo, FileIndex
from reslint.static.norms import is_normalised
from reslint.static.unvalidated_parse import parse_module

KNOWN_HEADS = torch_api.PARAMETRISED_MODULES | {"linear"}
LOADERS = ("from_config", "_from_config", "from_pretrained")
SEARCH_LIMIT = 5000
INHERITANCE_LIMIT = 16  # classes looked at for an inherited forward


def final_norm(outputs: list[Node], graph_outputs: list[Node]) -> bool | None:
    """Whether the stack's output is normalised before it reaches a head or the root's output
    (None: undecided, see `stream_end`)."""
    return VERDICTS[stream_end(outputs, graph_outputs)]


def stream_end(outputs: list[Node], graph_outputs: list[Node], sources: set[int] = frozenset()) -> str:
    """Where the stack's stream ends: "normalised" (a norm bounds it), "reached" (it reaches a head or the
    root's output raw), "opaque", "lost" or "branch".

    Branch where the stack's output is added back to the stream it started from (`sources`: the values the
    stack reads, see `stack_sources`): `alpha * self.experts(h) + (1 - alpha) * h` makes the whole stack the
    branch of a residual, a sub-stack inside one layer, and the outer model's stream ends elsewhere.

    Opaque where the stream leaves what the engine can follow: into a module it cannot see, into a
    call whose result the statement drops (`states.append(x)`: a container the engine does not model),
    or into a comprehension (`[norm(s) for s in states]`).
    Lost where every path ends inside the root without reaching its output: a value the code drops
    (Swin's states before downsampling, CvT's tokens beside the class token), carries into the next loop
    step (TimesFM's autoregressive `final_out = torch.cat(...)`), or stores where the engine does not
    follow (`outputs["image"] = features`). A lost stream says nothing about its end.
    """
    returned = {id(node) for node in graph_outputs}
    reached_end = opaque = branch = False
    pending = list(outputs)
    seen = set()
    while pending and len(seen) < SEARCH_LIMIT:
        node = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if is_normalised(node) and not _block_pre_norm(node):
            return "normalised"  # includes the stack's own output: a last block ending in its norm (Conformer)
        if is_normalised(node):
            continue  # the stream goes on through the block's residual add, raw
        if id(node) in returned:
            reached_end = True
        elif not node.users and (node.info.get("dropped") or node.info.get("read_unseen")):
            opaque = True
        for user in node.users:
            if _is_loss(user):
                continue  # a training loss compares predictions: no norm hides there, and nothing flows on
            if user.info.get("side_output"):
                continue  # an imported block's attention weights beside its stream (`x, attn = layer(x)`)
            if sources and user.op == "add" and _adds_back(user, node, sources):
                # The outer stream goes on through the add: a norm further on (X-CLIP's L2 norm) still bounds it.
                branch = True
                pending.append(user)
                continue
            if user.parametrised and not _is_known_head(user) and not user.info.get("activation"):
                # A module we cannot see into (passed in, imported) may normalise: stay undecided.
                opaque = True
                continue
            # Through heads and projections too: a norm after a projection (SAM's neck) still bounds the scale.
            pending.append(user)
    if opaque:
        return "opaque"
    if branch:
        return "branch"
    return "reached" if reached_end else "lost"


VERDICTS = {"normalised": True, "reached": False, "opaque": None, "lost": None, "branch": None}
GATE_OPS = ("pass", "dropout", "mul", "div")


def stack_sources(graph, key: str) -> set[int]:
    """The values (ids) the stack `key`'s blocks read from outside the stack: its input stream, and masks or
    positions passed to every block."""
    inside = stack_members(graph).get(key, ())
    members = {id(node) for node in inside}
    return {id(parent) for node in inside for parent in node.inputs
            if id(parent) not in members and parent.op not in ("const", "attr")}


def stack_members(graph) -> dict[str, list]:
    """Stack key -> the graph's nodes inside that stack's blocks, from one pass over the graph (each of its stacks
    asks), kept with the graph while it does not grow."""
    kept = graph.stack_members
    if kept is not None and kept[0] == len(graph.nodes):
        return kept[1]
    keys_of: dict[int, tuple[str, ...]] = {}  # id of a frames tuple (nodes of one scope share it) -> its stack keys
    members: dict[str, list] = {}
    for node in graph.nodes:
        frames = node.frames
        keys = keys_of.get(id(frames))
        if keys is None:
            keys = keys_of[id(frames)] = tuple(dict.fromkeys(frame.key for frame in frames if frame.kind == "stack"))
        for key in keys:
            members.setdefault(key, []).append(node)
    graph.stack_members = (len(graph.nodes), members)
    return members


def _adds_back(add: Node, reached: Node, sources: set[int]) -> bool:
    return added_back(add.inputs, reached, lambda node: id(node) in sources, lambda node: node.inputs,
                      lambda node: node.op in GATE_OPS)


def _block_pre_norm(norm: Node) -> bool:
    """A Pre-LN block's own norm on the stream entering it (an encoder's stream fed to a decoder stack of the
    same blocks): `x + f(norm(x))` normalises the branch only, the stream goes on through the add."""
    frame = norm.stack_frame
    if frame is None or not norm.inputs:
        return False
    source = norm.inputs[0]
    return any(user.op == "add" and user.stack_frame == frame and reaches(user, norm, through_parameters=False, limit=2000)
               for user in source.users)


def _is_loss(node: Node) -> bool:
    """`loss_fct(logits, labels)`, `F.mse_loss(...)`, a local `loss = nn.MSELoss()` called."""
    return "loss" in str(node.info.get("name") or node.info.get("function") or "").lower()


def _is_known_head(node: Node) -> bool:
    return node.op == "module" and node.info.get("module") in KNOWN_HEADS


def consumed_classes(index: FileIndex, classes: list[ClassInfo]) -> set[str]:
    """Module classes whose output another class of the file consumes, so that their own forward's return
    is not where the stream ends: named in another class's body (`Tower(config)`, `Tower._from_config(...)`),
    or the model of a sub-config another class loads (`AutoModel.from_config(config.vision_config)` builds the
    class declaring `config: ...VisionConfig`), or what a constructor of another file builds for `self.encoder`."""
    names = {info.name for info in classes}
    referenced: set[str] = set()
    unseen_attributes: set[str] = set()
    references = class_references(index)
    loaded_configs = references.loaded_configs
    for info in index.classes.values():  # a consumer may be no module class here (its base is in another file)
        visitor = references.of_class[info.name]
        referenced |= {name for name in visitor.names if name in names and name != info.name}
        unseen_attributes |= {_camel(attr) for attr in visitor.called
                              if index.submodule(info, attr) is None and index.method(info, attr) is None}
    for info in classes:
        # `self.encoder(...)` built by a constructor inherited from another file (modular_* copies).
        if any(attr and info.name.endswith(attr) for attr in unseen_attributes):
            referenced.add(info.name)
    return referenced | loaded_through_config(classes, loaded_configs)


def branch_alternatives(index: FileIndex, info: ClassInfo, call_name: str, built: str) -> tuple[str, ...]:
    """The other imported classes `info.__init__` assigns to the attribute `call_name` calls, in other branches
    (`if isinstance(config, MambaConfig): self.backbone = Mamba(config) elif ...: self.backbone = Mamba2(config)`):
    the index keeps the last assignment, and the call's stream end is theirs too."""
    init = info.methods.get("__init__")
    attribute = call_name.removeprefix("self.")
    if init is None or attribute == call_name:
        return ()
    found: dict[str, None] = {}
    for node in index.body_nodes(info).init_assignments:
        value = node.value
        if not (type(value) is cst.Call and type(value.func) is cst.Name):
            continue
        dotted = index.aliases.get(value.func.value)
        if dotted and dotted != built and any(
                type(target.target) is cst.Attribute and type(target.target.value) is cst.Name
                and target.target.value.value == "self" and target.target.attr.value == attribute
                for target in node.targets):
            found.setdefault(dotted)
    return tuple(found)


def inherited_forward(index: FileIndex, info: ClassInfo, source_path: str) -> tuple[str, cst.FunctionDef] | None:
    """The `forward` class `info` inherits from a class of another project file, with that file: a modular_* copy's
    `class Step3p7Model(DeepseekOcr2Model)` overrides `__init__` and `get_image_features` and runs the base's
    forward, so it is no module class in its own file. Bases are followed through this file's classes and then
    each file's own; None where the class has its own forward or no base is read."""
    from reslint.project_index import ProjectIndex, project_path

    project = ProjectIndex.for_file(source_path)
    here = project_path(source_path)
    pending, seen = [(here, index, info)], set()
    while pending and len(seen) < INHERITANCE_LIMIT:
        path, file_index, current = pending.pop(0)
        if (path, current.name) in seen:
            continue
        seen.add((path, current.name))
        forward = current.methods.get("forward")
        if forward is not None:
            return (str(path), forward) if path != here else None
        for base in current.bases:
            if base in file_index.classes:
                pending.append((path, file_index, file_index.classes[base]))
                continue
            resolved = project.resolve(path, base)
            other = project.file_index(resolved[0], FileIndex) if resolved and resolved[1] and resolved[0] != path else None
            if other is not None and resolved[1] in other.classes:
                pending.append((resolved[0], other, other.classes[resolved[1]]))
    return None


def loaded_through_config(classes: list[ClassInfo], loaded_configs: set[str]) -> set[str]:
    """The classes another class loads from a sub-config (`AutoModel.from_config(config.vision_config)`)."""
    return {info.name for info in classes if (declared := _config_class(info))
            and any(declared.endswith(config) for config in loaded_configs)}


def loaded_classes(index: FileIndex, classes: list[ClassInfo]) -> set[str]:
    """`loaded_through_config` over the sub-configs every class of the file loads."""
    return loaded_through_config(classes, class_references(index).loaded_configs)


def visible_loaders(index: FileIndex, classes: list[ClassInfo]) -> dict[tuple[str, str], str]:
    """`self.encoder = AutoModel.from_config(config.encoder_config)` where the file's one module class declaring
    `config: ...EncoderConfig` is what the registry builds: (consumer class, attribute) -> that class. A loader of
    a sub-config no class of the file declares (or several do) stays unseen."""
    found = {}
    for info in index.classes.values():
        for attr, value in _own_and_inherited_attributes(index, info).items():
            config = _loaded_config(value)
            candidates = [model.name for model in classes if config and (declared := _config_class(model))
                          and declared.endswith(config) and index.method(model, "forward") is not None]
            if len(candidates) == 1 and candidates[0] != info.name:
                found[(info.name, attr)] = candidates[0]
    return found


def _own_and_inherited_attributes(index: FileIndex, info: ClassInfo) -> dict[str, cst.BaseExpression]:
    attributes: dict[str, cst.BaseExpression] = {}
    pending, seen = [info], set()
    while pending:
        current = pending.pop(0)
        if current.name in seen:
            continue
        seen.add(current.name)
        for attr, value in current.attr_values.items():
            attributes.setdefault(attr, value)
        pending.extend(index.classes[base] for base in current.bases if base in index.classes)
    return attributes


def _loaded_config(value: cst.BaseExpression) -> str:
    """`AutoModel.from_config(config.vision_config)` (or the same under `x if c else None`) -> "VisionConfig"."""
    if isinstance(value, cst.IfExp):
        return _loaded_config(value.body) or _loaded_config(value.orelse)
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in LOADERS):
        return ""
    for arg in value.args:
        if isinstance(arg.value, cst.Attribute) and arg.value.attr.value.endswith("_config"):
            return _camel(arg.value.attr.value)
    return ""


class _References:
    """What one class body names of `names`, the `self.X(...)` it calls, the sub-configs it loads, and the
    attributes it reaches through a submodule (`nested`), read off the body's nodes (`FileIndex.body_nodes`)."""

    def __init__(self, nodes: BodyNodes, names: set[str]):
        self.names: set[str] = {node.value for node in nodes.names if node.value in names}
        self.loaded_configs: set[str] = set()
        self.called: set[str] = set()  # `self.X(...)`
        # Exact type checks: run on every call and attribute of every class body, and libcst's node classes (never
        # subclassed) are ABCs, whose isinstance misses cost a Python-level call.
        for node in nodes.calls:
            func = node.func
            if type(func) is not cst.Attribute:
                continue
            if type(func.value) is cst.Name and func.value.value == "self":
                self.called.add(func.attr.value)
            if func.attr.value in LOADERS:
                for arg in node.args:
                    value = arg.value
                    if type(value) is cst.Attribute and value.attr.value.endswith("_config"):
                        self.loaded_configs.add(_camel(value.attr.value))
        self.nested: set[str] = {node.attr.value for node in nodes.attributes if type(inner := node.value) is cst.Attribute
                                 and (type(inner.value) is cst.Attribute
                                      or type(inner.value) is cst.Name and inner.value.value == "self")}


@dataclass
class ClassReferences:
    of_class: dict[str, _References]  # class name -> what its body names (of the file's classes) and calls
    loaded_configs: set[str]
    nested: set[str]


_references_of: list[tuple[FileIndex, ClassReferences]] = []  # the last file's: the engine asks while it runs


def forget_references() -> None:
    """Drop the last file's references once its analysis is over: they hold its index and libcst tree, which
    would otherwise outlive the file and be walked by the collector (see runner.settle_collector)."""
    _references_of.clear()


def class_references(index: FileIndex) -> ClassReferences:
    """What each class body of the file names, calls and reaches into, for `consumed_classes`, `loaded_classes`
    and `reached_into`, from the nodes the index gathers of it once."""
    if _references_of and _references_of[0][0] is index:
        return _references_of[0][1]
    of_class, loaded_configs, nested = {}, set(), set()
    names = set(index.classes)
    for info in index.classes.values():
        visitor = of_class[info.name] = _References(index.body_nodes(info), names)
        loaded_configs |= visitor.loaded_configs
        nested |= visitor.nested
    references = ClassReferences(of_class, loaded_configs, nested)
    _references_of[:] = [(index, references)]
    return references


def reached_into(index: FileIndex) -> set[str]:
    """Attributes code reaches through a submodule (`self.encoder.layers[i]`, `self.visual.transformer.resblocks`):
    a stack run from outside its class, whose class's own output is then not where the stream ends."""
    return set(class_references(index).nested)


def _config_class(info: ClassInfo) -> str:
    """The config class a model declares: `config: LlamaConfig` or `config_class = LlamaConfig`."""
    for statement in info.node.body.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.target.value == "config":
                annotation = small.annotation.annotation
            elif isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(
                    small.targets[0].target, cst.Name) and small.targets[0].target.value == "config_class":
                annotation = small.value
            else:
                continue
            if isinstance(annotation, cst.Name):
                return annotation.value
            if isinstance(annotation, cst.Attribute):
                return annotation.attr.value
    return ""


def _camel(snake: str) -> str:
    """`vision_config` → `VisionConfig`."""
    return "".join(part[:1].upper() + part[1:] for part in snake.split("_") if part)


@cached_as_read
def consumed_in_file(path: str) -> frozenset[str]:
    """`consumed_classes` of a file, for the trace engine (which has the graph but not the file's other classes)."""
    try:
        index = FileIndex(parse_module(read_project_file(path, None, MAX_SOURCE_BYTES)))
    except (OSError, cst.ParserSyntaxError, RecursionError, ValueError):
        return frozenset()
    classes = [info for info in index.classes.values() if index.is_module_class(info)]
    return frozenset(consumed_classes(index, classes))


def inside_blocks_elsewhere(source_path: str, name: str, reads: list[str], extract_facts) -> bool:
    """Whether class `name` of `source_path` is a sub-stack of other project files' blocks, and so not where
    a model's stream ends: every module class of another file that builds it is a repeated block of a stack
    there (an ATF block running a one-block Swin layer), or repeats it itself (a list of stages), and none of
    them passes its output on unnormalised (their own stream-end verdicts, `FileFacts.stream_ends`). A class
    another class builds otherwise, or nothing builds, keeps its own verdict: only files of the run overrule
    that. `reads` gets the files consulted (a cached result goes stale when one changes). `extract_facts` is
    the static engine's (passed in: the engine imports this module)."""
    from reslint.project_index import ProjectIndex, project_path

    project = ProjectIndex.for_file(source_path)
    here = project_path(source_path)
    # A function building it (a factory, a test) makes no model of it that another file's block does not.
    sites = [site for site in project.construction_sites(source_path, name) if site.path != here and site.scope_is_class]
    if not sites:
        return False
    for site in sites:
        reads.append(str(site.path))
        index = project.file_index(site.path, FileIndex)
        if index is None or not _in_repeated_block(index, site.scope, name):
            return False
        facts = project.static_facts(site.path, extract_facts, FileIndex)
        if facts is None or any(verdict is False and project.resolve(site.path, dotted) == (here, name)
                                for dotted, verdict in facts.stream_ends.items()):
            return False
    return True


def _in_repeated_block(index: FileIndex, scope: str, name: str) -> bool:
    """Whether class `scope` of the file is the element of a repeated container (`nn.ModuleList([ATFBlock(...)
    for ...])`), or builds class `name` as one (`self.stages = nn.ModuleList([Stage(...) for ...])`)."""
    for info in index.classes.values():
        for spec in info.submodules.values():
            for element in _repeated_elements(spec):
                if element == scope or info.name == scope and element.rsplit(".", 1)[-1] == name:
                    return True
    return False


def _repeated_elements(spec):
    """The class names of the elements a container spec repeats, at any depth (not a closure: a recursive
    closure is a reference cycle, which a static check's files must not leave)."""
    if spec.kind == "container":
        for element in spec.elements:
            if spec.repeated:
                yield element.name
            yield from _repeated_elements(element)
