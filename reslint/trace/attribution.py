"""Attribution of graph nodes to the user's code: the module performing a node (its `nn_module_stack`),
its block and stack, and its `file:line` in the checked file (from `meta["stack_trace"]`, else from the
line that constructs its module)."""

from __future__ import annotations

import os
import re

from reslint.facts import Span
from reslint.static import torch_api
from reslint.trace.op_tables import BUILTIN_LAYERS, BUILTIN_STACKS
from reslint.trace.source_index import SourceIndex

FRAME_RE = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')


def clean_path(path: str) -> str:
    """nn_module_stack paths of `.module()` graphs look like `L['self'].blocks[0]`; keep `blocks.0`."""
    path = re.sub(r"^L\['self'\]\.?", "", path)
    path = re.sub(r"\[(\d+)\]", r".\1", path)
    path = re.sub(r"\._modules\['([^']+)'\]", r".\1", path)
    path = re.sub(r"\['([^']+)'\]", r".\1", path)
    return path.strip(".")


def resolve(path: str) -> str:
    try:
        return os.path.realpath(os.path.abspath(path))
    except OSError:
        return path


class Attribution:
    """Where the nodes of one captured graph come from, in the checked file `path`."""

    def __init__(self, graph, path: str):
        self.graph = graph
        self.path = path
        self.real_path = resolve(path)
        self.class_line = int(getattr(graph.capture, "class_line", 1) or 1)
        self.source_index = SourceIndex.of(self.real_path)
        self.stacks: dict = {}  # node -> its module_stack (asked for every node near each residual add)

    def module_stack(self, node) -> list[tuple[str, str]]:
        """[(module path, class qualname)] outermost first, from nn_module_stack (or the call_module)."""
        if node not in self.stacks:
            self.stacks[node] = self._module_stack(node)
        return self.stacks[node]

    def _module_stack(self, node) -> list[tuple[str, str]]:
        stack = node.meta.get("nn_module_stack") or {}
        entries = []
        for value in stack.values():
            path, kind = value[0], value[1]
            if not isinstance(kind, str):
                kind = f"{getattr(kind, '__module__', '')}.{getattr(kind, '__qualname__', kind)}"
            entries.append((clean_path(path), kind))
        if node.op == "call_module":
            module = self.graph.modules.get(node.target)
            if module is not None:
                entries.append((str(node.target), f"{type(module).__module__}.{type(module).__qualname__}"))
        return entries

    def owner_path(self, node) -> str:
        stack = self.module_stack(node)
        return stack[-1][0] if stack else ""

    def module_parent(self, node) -> str:
        stack = self.module_stack(node)
        if not stack:
            return ""
        path, kind = stack[-1]
        name = kind.rsplit(".", 1)[-1]
        if name.startswith(("Dropout", "Identity")) or name in torch_api.DROPOUT_MODULES:
            return path.rsplit(".", 1)[0] if "." in path else ""
        return path

    def same_block(self, add, norm) -> bool:
        owner = self.owner_path(add)
        norm_path = self.owner_path(norm)
        return norm_path == owner or norm_path.startswith(owner + ".") or owner == ""

    def class_of(self, path: str) -> str:
        module = self.graph.model_modules.get(path)
        return type(module).__name__ if module is not None else ""

    def block_of(self, node) -> tuple[str, str]:
        """(block class name, builtin label) of the innermost module performing the node."""
        stack = self.module_stack(node)
        if not stack:
            return (getattr(self.graph.capture, "model_name", "") or self.class_of("")), ""
        for path, kind in reversed(stack):
            name = kind.rsplit(".", 1)[-1]
            if kind.startswith("torch.nn.") and name in BUILTIN_LAYERS:
                return f"nn.{name}", f"nn.{name}"
        path, kind = stack[-1]
        return kind.rsplit(".", 1)[-1], ""

    def stack_of(self, node):
        """(stack key, owner class, attribute, container module path, container) or None."""
        stack = self.module_stack(node)
        for path, _kind in reversed(stack):
            parent, _, last = path.rpartition(".")
            if not last.isdigit():
                continue
            container = self.graph.model_modules.get(parent)
            if container is None:
                continue
            children = list(container.children())
            if not children or len({type(c) for c in children}) != 1:
                continue
            holder_path = parent
            grand, _, attr = holder_path.rpartition(".")
            owner = self.graph.model_modules.get(grand)
            if owner is not None and type(owner).__name__ in BUILTIN_STACKS and type(owner).__module__.startswith(
                    "torch.nn"):
                holder_path = grand
                grand, _, attr = holder_path.rpartition(".")
                owner = self.graph.model_modules.get(grand)
            attr_path = attr
            import torch.nn as nn

            while owner is not None and isinstance(owner, (nn.ModuleDict, nn.ModuleList, nn.Sequential)) and grand:
                grand, _, step = grand.rpartition(".")
                attr_path = f"{step}.{attr_path}"
                owner = self.graph.model_modules.get(grand)
            if owner is None:
                continue
            return f"{type(owner).__name__}.{attr_path}", type(owner).__name__, attr_path, holder_path
        return None

    def grouped_stack_of(self, add, branches):
        """`stack_of` for a stack whose blocks are groups of modules run by the owner's own loop,
        `for attn, ff in self.layers: x = attn(x) + x` (vit-pytorch): the add runs in the owner, its branch in
        a member of one group (`layers.3.0`). None when no branch comes from such a group."""
        from torch.nn import ModuleList, Sequential

        GROUP_CONTAINERS = (ModuleList, Sequential)
        owner = self.owner_path(add)
        prefix = owner + "." if owner else ""
        pending, seen = list(branches), set()
        while pending and len(seen) < 64:
            node = pending.pop(0)
            if node in seen or not hasattr(node, "meta"):
                continue
            seen.add(node)
            called = {path for path, _kind in self.module_stack(node)}
            for path, _kind in self.module_stack(node):
                if not path.startswith(prefix) or path == owner:
                    continue
                parts = path[len(prefix):].split(".")
                for i in range(1, len(parts) - 1):
                    if not (parts[i].isdigit() and parts[i + 1].isdigit()):
                        continue
                    holder = prefix + ".".join(parts[:i])
                    if f"{holder}.{parts[i]}" in called:
                        continue  # the group called whole (`for layer in self.layers: x = x + layer(x)`)
                    container = self.graph.model_modules.get(holder)
                    groups = list(container.children()) if isinstance(container, GROUP_CONTAINERS) else []
                    if groups and all(type(g) in GROUP_CONTAINERS for g in groups):
                        attr = ".".join(parts[:i])
                        name = self.class_of(owner)
                        return f"{name}.{attr}", name, attr, holder
            if self.graph.ops.get(node) not in ("linear", "conv1d", "conv2d", "conv3d", "convolution"):
                pending.extend(self.graph.data_inputs(node))
        return None

    def grouped_iteration_span(self, add, attr: str) -> Span | None:
        """Where the owner's loop runs such a stack: the `for` statement around the add that iterates `attr`."""
        lines = self.user_lines(add)
        if not lines or self.source_index is None:
            return None
        found = self.source_index.loop_over(lines[-1], attr.split(".")[-1])
        return Span(self.path, *found) if found else None

    # ----- source mapping ------------------------------------------------------------------------

    def user_lines(self, node) -> list[int]:
        """Lines of the checked file on the node's stack trace, outermost first."""
        text = node.meta.get("stack_trace") or ""
        return [int(m.group("line")) for m in FRAME_RE.finditer(text) if resolve(m.group("file")) == self.real_path]

    def iteration_span(self, add, attr: str, builtin: bool) -> Span | None:
        """Where the owner's forward runs the stack: the user frame that calls into the block."""
        lines = self.user_lines(add)
        if not builtin:
            lines = lines[:-1]  # the deepest user frame is the add itself
        if not lines or self.source_index is None:
            return None
        return Span(self.path, lines[-1], self.source_index.call_column(lines[-1], attr.split(".")[-1]))

    def span_of(self, node, kind: str = "") -> Span:
        line = None
        text = node.meta.get("stack_trace") or ""
        for match in FRAME_RE.finditer(text):
            if resolve(match.group("file")) == self.real_path:
                line = int(match.group("line"))  # deepest frame in the checked file wins
        if line is None:
            line = self._constructed_line(node)
        if line is None:
            return Span(self.path, self.class_line, 1)
        column = self.source_index.column(line, kind) if self.source_index else 1
        return Span(self.path, line, column)

    def _constructed_line(self, node) -> int | None:
        found = self._constructed(node)
        return found[0] if found else None

    def _constructed(self, node) -> tuple[int, int] | None:
        """(line, column) in the checked file that constructs the innermost known module of the node."""
        if self.source_index is None:
            return None
        for path, _kind in reversed(self.module_stack(node)):
            if not path:
                continue
            parent, _, attr = path.rpartition(".")
            owner = self.class_of(parent)
            found = self.source_index.attributes.get((owner, attr.split(".")[0])) if owner else None
            if found is not None:
                return found
        return None
