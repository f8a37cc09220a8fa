"""The dataflow graph the static engine builds from `forward` code.

Each tensor-valued expression becomes a `Node`; calls into the file's own modules are
inlined, so one graph holds a whole model with `frames` recording which module each
node belongs to (like torch.fx's `nn_module_stack`).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

PARAMETRISED_OPS = ("module", "call")


@dataclass(frozen=True)
class Frame:
    kind: str  # "module" (an inlined module call) or "stack" (a block of a stack)
    name: str  # class name
    key: str = ""  # stack key for "stack" frames


_serials = itertools.count()


class Node:
    """One value of the graph. A plain class with slots (not a dataclass): a file's evaluations build
    tens of thousands of them."""

    __slots__ = ("op", "inputs", "place", "frames", "condition", "info", "users", "serial")

    def __init__(self, op: str, inputs: tuple[Node, ...],
                 place: tuple[int, int] | Callable[[], tuple[int, int]], frames: tuple[Frame, ...] = (),
                 condition: tuple = (), info: dict | None = None, users: list[Node] | None = None):
        self.op = op
        self.inputs = inputs
        # (line, column), or a function giving them: most nodes' places are never read, and placing
        # a node costs more than building it
        self.place = place
        self.frames = frames
        self.condition = condition
        self.info = {} if info is None else info
        self.users = [] if users is None else users
        # The order nodes are made in: a node's inputs are all made before it (see `reaches`).
        self.serial = next(_serials)

    @property
    def line(self) -> int:
        return self.position[0]

    @property
    def column(self) -> int:
        return self.position[1]

    @property
    def position(self) -> tuple[int, int]:
        place = self.place
        if type(place) is not tuple:
            place = self.place = place()
        return place

    @property
    def parametrised(self) -> bool:
        return self.op in PARAMETRISED_OPS

    @property
    def owner(self) -> str:
        for frame in reversed(self.frames):
            if frame.kind == "module":
                return frame.name
        return ""

    @property
    def stack_frame(self) -> Frame | None:
        for frame in reversed(self.frames):
            if frame.kind == "stack":
                return frame
        return None

    def __repr__(self) -> str:
        return f"<{self.op}@{self.line} {self.info.get('name', '')}>"


class Graph:
    def __init__(self) -> None:
        scopes = _open_scopes()
        if scopes:
            scopes[-1].append(self)
        self.nodes: list[Node] = []
        self.outputs: list[Node] = []
        # stack key -> nodes returned by its blocks
        self.stack_outputs: dict[str, list[Node]] = {}
        # stack key -> (line, column) where forward runs the blocks, or, as a Node's `place`, the call that finds it
        # when read (positions are found by generating the statement's code, and most loops' are never read)
        self.stack_iterations: dict[str, tuple[int, int] | Callable[[], tuple[int, int]]] = {}
        # The root's forward took an argument that defaults to None as given where the call without it would
        # bind another value in its place (`if residual is None: residual = x`): see engine's `_default_call`.
        self.default_call_differs = False
        # `x is None` was asked of a forward argument of the root that defaults to None: the ordinary call (that
        # argument left out) may take another way through the forward (see engine's `_ordinary_call`).
        self.optional_input_tested = False
        self.stack_members: tuple[int, dict] | None = None  # see stream_end.stack_members

    def add(self, op: str, inputs, place, frames=(), condition=(), **info) -> Node:
        return self.add_node(op, inputs, place, frames, condition, info)

    def add_node(self, op: str, inputs, place, frames, condition, info: dict) -> Node:
        """`add` with the node's info given as a dict, which the node takes as it is."""
        node = Node(op, tuple(inputs), place, tuple(frames), tuple(condition), info, [])
        for parent in node.inputs:
            parent.users.append(node)
        self.nodes.append(node)
        return node


# The graphs built inside each open `cut_when_done` scope of the thread, innermost last (per thread: a library
# caller may analyse files in several threads at once).
_scopes = threading.local()


def _open_scopes() -> list[list[Graph]]:
    if not hasattr(_scopes, "open"):
        _scopes.open = []
    return _scopes.open


@contextmanager
def cut_when_done() -> Iterator[None]:
    """The graphs built inside are cut apart when it ends: each node's `users` (the back edges of `inputs`) is
    dropped, so that reference counting frees the graphs and what they hold (the file's libcst tree, through
    specs and places) instead of the cyclic collector. Nothing may read a graph after its scope."""
    graphs: list[Graph] = []
    scopes = _open_scopes()
    scopes.append(graphs)
    try:
        yield
    finally:
        scopes.pop()
        for graph in graphs:
            for node in graph.nodes:
                node.users = None


def strip_passthrough(node: Node, allow_scale: bool = True) -> tuple[Node, list[Node]]:
    """Walk from a value down to its source through dropout, casts, views and scalar scaling."""
    walked: list[Node] = []
    while True:
        if node.op in ("dropout", "pass") and node.inputs:
            walked.append(node)
            node = node.inputs[0]
        elif allow_scale and node.op in ("mul", "div") and is_scaling(node):
            walked.append(node)
            node = data_inputs(node)[0]
        else:
            return node, walked


def data_inputs(node: Node) -> list[Node]:
    return [parent for parent in node.inputs if parent.op not in ("const", "attr")]


def is_scaling(node: Node) -> bool:
    """`alpha * x`, `x * self.gamma`, `x / 2`: exactly one data operand."""
    return node.op in ("mul", "div") and len(data_inputs(node)) == 1 and len(node.inputs) == 2 and (
        node.op == "mul" or node.inputs[0] is data_inputs(node)[0])


def reaches(target: Node, source: Node, through_parameters: bool, limit: int = 20000) -> bool:
    """Whether `source` is an ancestor of `target` (through a parametrised op when asked), found within `limit`
    steps of a depth-first search.

    Every value on a path from `target` up to `source` is computed from `source`, so made after it: the search
    first follows only nodes made after `source`. Where that finds no path the answer is no (the whole search
    finds none either, most queries, which would walk all of `target`'s ancestors); where it finds one, the whole
    search answers, as the step limit counts its steps."""
    if _search(target, source, through_parameters, limit, oldest=source.serial) is False:
        return False
    return _search(target, source, through_parameters, limit, oldest=0) is True


def _search(target: Node, source: Node, through_parameters: bool, limit: int, oldest: int) -> bool | None:
    """Whether a path leads from `target` up to `source` through nodes made at or after `oldest` (0: every
    node); None where the search takes over `limit` steps."""
    if target.serial < oldest:
        return False
    stack = [(target, False)]
    # The nodes visited before or after crossing a parametrised op, apart: a node is searched once each way.
    seen_before, seen_after = set(), set()
    steps = 0
    while stack:
        node, crossed = stack.pop()
        steps += 1
        if steps > limit:
            return None
        if node is source:
            if crossed or not through_parameters:
                return True
            continue
        seen = seen_after if crossed else seen_before
        if node in seen:
            continue
        seen.add(node)
        crossed_here = crossed or node.op in PARAMETRISED_OPS
        for parent in node.inputs:
            if parent.serial >= oldest:
                stack.append((parent, crossed_here))
    return False


def ancestors(node: Node, limit: int = 20000) -> set[int]:
    seen: set[int] = set()
    stack = [node]
    while stack and len(seen) < limit:
        current = stack.pop()
        for parent in current.inputs:
            if id(parent) not in seen:
                seen.add(id(parent))
                stack.append(parent)
    return seen

