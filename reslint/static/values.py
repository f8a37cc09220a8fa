"""The evaluator's abstract values and work limits, apart from the evaluator so that shared_inlines, which
records and replays the evaluator's inlined calls, can read them without importing the evaluator."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from reslint.static.graph import Node

if TYPE_CHECKING:
    import libcst as cst

    from reslint.static.dataflow import Scope
    from reslint.static.index import ClassInfo, ModuleSpec

MAX_INLINE_DEPTH = 12
# The evaluator's budget: a checked file must not make it build huge values or do unbounded work
# (`a = a * a` doubles an integer's size per line, `t = t + t` a tuple's length, helpers calling
# the next one three times over 12 levels inline 3**12 calls). Going over a limit is reported (RL904).
MAX_INTEGER_BITS = 4096
MAX_SEQUENCE_LENGTH = 10_000
MAX_STRING_LENGTH = 100_000
MAX_STEPS_PER_FILE = 1_000_000  # expressions and statements evaluated, over every class of the file
# Times one function may be inlined in one class's evaluation (transformers' largest files: 14);
# beyond it, calls to it are opaque.
MAX_INLINES_PER_FUNCTION = 200


# ----- abstract values ------------------------------------------------------------


@dataclass(eq=False)
class SelfRef:
    cls: ClassInfo
    spec: ModuleSpec | None


@dataclass(eq=False)
class ModRef:
    spec: ModuleSpec
    path: str  # "self.blocks"
    stack_key: str = ""


@dataclass(eq=False)
class ElemRef:
    container: ModRef
    index: int | None


@dataclass(eq=False)
class QualName:
    name: str  # "torch.nn.functional.relu"


@dataclass(eq=False)
class Method:
    owner: SelfRef
    func: cst.FunctionDef


@dataclass(eq=False)
class Function:
    func: cst.FunctionDef


@dataclass(eq=False)
class Lambda:
    node: cst.Lambda
    closure: dict
    scope: Scope


@dataclass(eq=False)
class TensorMethod:
    target: Node
    name: str


@dataclass(eq=False)
class TupleValue:
    items: tuple


@dataclass(eq=False)
class Const:
    value: object


class Shape:
    """A value derived only from a tensor's shape, device or dtype: not a data dependency."""


class Unknown:
    pass


SHAPE = Shape()
UNKNOWN_VALUE = Unknown()


@dataclass(eq=False)
class ZipValue:
    parts: tuple


@dataclass(eq=False)
class EnumerateValue:
    inner: object


class SplitValue(TupleValue):
    """`x.chunk(2, -1)`: unpacking yields pieces of one tensor."""

    def __init__(self, node: Node):
        super().__init__((node, node))
        self.node = node


class RecordValue(TupleValue):
    """A model-output object: positional items, plus the same values by field name."""

    def __init__(self, args: list, fields: dict):
        super().__init__(tuple(args) + tuple(fields.values()))
        self.fields = fields


class DictValue(RecordValue):
    """A dict literal: its values by key; iterating or unpacking it gives keys, which the engine does not hold."""


def optional_input(node: Node) -> bool:
    """A root's forward argument that defaults to None, or a merge of it with what a branch put in its place."""
    return bool(node.info.get("optional")) or node.op == "phi" and any(
        parent.info.get("optional") for parent in node.inputs)
