"""The depth order a probe reports in: stacks of blocks, the modules around them, and their source lines.

Blocks are, in this order of preference:

1. the residual stacks the static facts identify in the source of the model's classes (the same
   stacks `reslint check` summarises, e.g. `self.blocks` of `GPT`);
2. containers (nn.ModuleList / nn.Sequential) of at least two blocks of one class with parameters
   of the same shapes (a stack without residuals, such as a deep MLP, is still a stack);
3. else the model's top-level children (containers expanded), in forward order.

Every parameter belongs to one group: the block that contains it, or else the outermost module
outside every stack that contains it ("frontier" modules such as the embedding and the head).
Groups are put in forward order by the probe, which records their first call.
"""

from __future__ import annotations

import ast
import functools
import inspect
import os
from dataclasses import dataclass, field
from typing import Any

from reslint.discovery import display_path
from reslint.probing.report import StackStats

MODEL_GROUP = "(model)"  # parameters registered on the model itself


@dataclass(frozen=True)
class Span:
    path: str  # absolute source file
    line: int
    column: int = 1


@dataclass
class Layout:
    stacks: list[StackStats]
    groups: list[str]  # module paths, registration order (the probe reorders them by first call)
    group_of: dict[str, str] = field(default_factory=dict)  # parameter name -> group


def torch_containers() -> tuple[type, ...]:
    from torch import nn

    return (nn.ModuleList, nn.Sequential, nn.ModuleDict)


def has_parameters(module: Any) -> bool:
    return next(module.parameters(), None) is not None


@functools.lru_cache(maxsize=1)
def library_roots() -> tuple[str, ...]:
    import sysconfig

    reslint_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return tuple(os.path.normcase(os.path.abspath(path)) + os.sep
                 for path in (reslint_dir, sysconfig.get_paths()["stdlib"]))


@functools.lru_cache(maxsize=4096)
def is_library_file(filename: str) -> bool:
    """Files of torch, installed packages, the standard library and reslint: never the user's model code."""
    absolute = os.path.normcase(os.path.abspath(filename))
    if "site-packages" in absolute or "dist-packages" in absolute:
        return True
    return absolute.startswith(library_roots())


# Class sources are looked up on every probe of a model; inspect re-reads and re-parses the file
# each time, which costs more than the hooks. Classes do not move: cache per class.
@functools.lru_cache(maxsize=1024)
def source_file(cls: type) -> str | None:
    try:
        filename = inspect.getsourcefile(cls)
    except (TypeError, OSError):
        return None
    if not filename or not os.path.isfile(filename) or is_library_file(filename):
        return None
    return os.path.abspath(filename)


def find_layout(model: Any) -> Layout:
    stacks = outermost(facts_stacks(model) + repeated_stacks(model))
    containers = {stack.name for stack in stacks}
    if stacks:
        groups = frontier(model, containers, [block for stack in stacks for block in stack.blocks])
    else:
        groups = frontier(model, set(), [])
        blocks = [group for group in groups if group != MODEL_GROUP]
        if len(blocks) >= 2:
            stacks = [StackStats(name="", blocks=blocks, origin="children")]
    locate_stacks(model, stacks)
    group_of = {}
    for name, _ in model.named_parameters():
        group_of[name] = owning_group(name, groups)
    return Layout(stacks, groups, group_of)


def owning_group(parameter: str, groups: list[str]) -> str:
    """The deepest group containing the parameter."""
    matches = [group for group in groups if group != MODEL_GROUP and parameter.startswith(group + ".")]
    return max(matches, key=len) if matches else MODEL_GROUP


def container_blocks(model: Any, path: str) -> list[str]:
    container = model.get_submodule(path)
    prefix = f"{path}." if path else ""
    return [prefix + name for name, child in container.named_children() if has_parameters(child)]


def facts_stacks(model: Any) -> list[StackStats]:
    """Stacks of the static facts of the model classes' source files, found again in the built model."""
    from torch import nn

    found: list[StackStats] = []
    classes = {type(module) for module in model.modules()}
    by_file: dict[str, set[str]] = {}
    for cls in classes:
        filename = source_file(cls)
        if filename:
            by_file.setdefault(filename, set()).add(cls.__name__)
    for filename, class_names in by_file.items():
        for stack in static_stacks(filename):
            if stack.owner not in class_names:
                continue
            attribute = stack.attribute.removeprefix("self.")
            for owner_path, module in model.named_modules():
                if type(module).__name__ != stack.owner or source_file(type(module)) != filename:
                    continue
                path = f"{owner_path}.{attribute}" if owner_path else attribute
                try:
                    container = model.get_submodule(path)
                except AttributeError:
                    continue
                if isinstance(container, (nn.TransformerEncoder, nn.TransformerDecoder)):
                    path, container = f"{path}.layers", container.layers
                if not isinstance(container, torch_containers()):
                    continue
                blocks = container_blocks(model, path)
                if blocks:
                    found.append(StackStats(name=path, blocks=blocks, origin="facts", path=filename,
                                            line=stack.span.line, column=stack.span.column,
                                            label=f"{stack.attribute} of {stack.owner}"))
    return found


@functools.lru_cache(maxsize=64)
def _static_stacks(filename: str, mtime: float) -> tuple:
    try:
        import libcst

        from reslint.file_gate import decode_source
        from reslint.static.engine import extract_facts

        with open(filename, "rb") as handle:
            text = decode_source(handle.read())
        facts = extract_facts(filename, libcst.parse_module(text))
    except Exception:  # noqa: BLE001 - a file the static engine cannot read just has no facts
        return ()
    return tuple(facts.stacks.values())


def static_stacks(filename: str) -> tuple:
    try:
        mtime = os.path.getmtime(filename)
    except OSError:
        return ()
    return _static_stacks(filename, mtime)


def repeated_stacks(model: Any) -> list[StackStats]:
    """ModuleList / Sequential containers of at least two blocks of one class and one parameter layout."""
    from torch import nn

    found = []
    for path, module in model.named_modules():
        if not isinstance(module, (nn.ModuleList, nn.Sequential)):
            continue
        children = [child for child in module.children() if has_parameters(child)]
        if len(children) < 2 or len({type(child) for child in children}) != 1:
            continue
        layouts = {tuple((name, tuple(p.shape)) for name, p in child.named_parameters()) for child in children}
        if len(layouts) == 1:
            found.append(StackStats(name=path, blocks=container_blocks(model, path), origin="repeated"))
    return found


def outermost(stacks: list[StackStats]) -> list[StackStats]:
    """One stack per container (the facts' first), and none inside a block of another stack."""
    unique: dict[str, StackStats] = {}
    for stack in stacks:
        unique.setdefault(stack.name, stack)
    kept = []
    for stack in unique.values():
        inside = any(stack.name == block or stack.name.startswith(block + ".")
                     for other in unique.values() if other is not stack for block in other.blocks)
        if not inside:
            kept.append(stack)
    return kept


def frontier(model: Any, containers: set[str], blocks: list[str]) -> list[str]:
    """Groups in registration order: the blocks, and the outermost other modules with parameters."""
    block_set = set(blocks)
    groups: list[str] = []
    if any(True for _ in model.parameters(recurse=False)):
        groups.append(MODEL_GROUP)

    def visit(path: str, module: Any) -> None:
        for name, child in module.named_children():
            child_path = f"{path}.{name}" if path else name
            if child_path in block_set:
                groups.append(child_path)
                continue
            if not has_parameters(child):
                continue
            holds_stack = any(c == child_path or c.startswith(child_path + ".") for c in containers)
            if holds_stack or isinstance(child, torch_containers()):
                if any(True for _ in child.parameters(recurse=False)):
                    groups.append(child_path)  # its own parameters; its children are visited too
                visit(child_path, child)
            else:
                groups.append(child_path)

    visit("", model)
    if not groups and has_parameters(model):
        groups.append(MODEL_GROUP)
    return groups


# ---------------------------------------------------------------------------------------------
# Source locations: where a module is constructed (`self.pos = nn.Embedding(...)`)


@functools.lru_cache(maxsize=128)
def _parsed(filename: str, mtime: float) -> ast.Module | None:
    try:
        with open(filename, "rb") as handle:
            return ast.parse(handle.read(), filename=filename)
    except (OSError, SyntaxError, ValueError):
        return None


def parsed(filename: str) -> ast.Module | None:
    try:
        return _parsed(filename, os.path.getmtime(filename))
    except OSError:
        return None


def class_span(cls: type) -> Span | None:
    """Where the class is defined; for a class made at run time (FSDP2's FSDPBlock), its first defined base."""
    for klass in cls.__mro__:
        span = own_class_span(klass)
        if span is not None:
            return span
    return None


@functools.lru_cache(maxsize=1024)
def own_class_span(cls: type) -> Span | None:
    filename = source_file(cls)
    if filename is None:
        return None
    try:
        return Span(filename, inspect.getsourcelines(cls)[1])
    except (OSError, TypeError):
        return None


def assignment_span(cls: type, attribute: str) -> Span | None:
    """Where a class (or a user base class) assigns `self.<attribute>`: the assigned value's position."""
    for klass in cls.__mro__:
        span = own_class_span(klass)
        if span is None:
            continue
        tree = parsed(span.path)
        if tree is None:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name == klass.__name__ and node.lineno <= span.line <= node.end_lineno:
                found = find_assignment(node, attribute)
                if found is not None:
                    return Span(span.path, found.lineno, found.col_offset + 1)
    return None


def find_assignment(class_node: ast.ClassDef, attribute: str) -> ast.AST | None:
    for node in ast.walk(class_node):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                "add_module", "register_module", "register_parameter") and len(node.args) == 2:
            name = node.args[0]
            if isinstance(name, ast.Constant) and name.value == attribute:
                return node.args[1]
            continue
        else:
            continue
        for target in targets:
            for item in (target.elts if isinstance(target, ast.Tuple) else [target]):
                if (isinstance(item, ast.Attribute) and item.attr == attribute
                        and isinstance(item.value, ast.Name) and item.value.id == "self"):
                    return value
    return None


def module_span(model: Any, path: str) -> Span | None:
    """Where the module (or parameter) at `path` is constructed, walking up through torch containers."""
    if not path or path == MODEL_GROUP:
        return class_span(type(model))
    parts = path.split(".")
    chain = [model]
    for part in parts[:-1]:
        chain.append(getattr(chain[-1], part, None))
        if chain[-1] is None:
            return class_span(type(model))
    for depth in range(len(parts) - 1, -1, -1):
        owner, attribute = chain[depth], parts[depth]
        if isinstance(owner, torch_containers()):
            continue
        span = assignment_span(type(owner), attribute)
        if span is not None:
            return span
    return class_span(type(model))


def attribute_label(model: Any, path: str) -> str:
    """`self.blocks of GPT` for the module at `path`: the attribute as its owner's code names it."""
    parts = path.split(".")
    chain = [model]
    for part in parts[:-1]:
        chain.append(getattr(chain[-1], part))
    for depth in range(len(parts) - 1, -1, -1):
        owner = chain[depth]
        if not isinstance(owner, torch_containers()):
            from reslint.probing.distributed import original_class

            return f"self.{'.'.join(parts[depth:])} of {original_class(owner).__name__}"
    return path


def locate_stacks(model: Any, stacks: list[StackStats]) -> None:
    for stack in stacks:
        if stack.origin == "facts":
            continue
        if stack.name:
            span = module_span(model, stack.name)
            stack.label = attribute_label(model, stack.name)
        else:
            span = class_span(type(model))
            stack.label = f"the children of {type(model).__name__}"
        if span is not None:
            stack.path, stack.line, stack.column = span.path, span.line, span.column


def shown_path(filename: str) -> str:
    return display_path(filename) if filename else ""
