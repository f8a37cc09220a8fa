"""Inputs from what a forward documents: each required parameter's shape from its docstring, a parameter typed
as a dataclass (or TypedDict) of tensors built field by field from that class's docstring.

transformers documents every forward argument as ``name (`torch.Tensor` of shape `(batch_size, num_tokens)`)``;
a bundle of inputs (EsmFold2's `EsmFold2AtomInputs`) documents its fields as ``name: `(batch_size, num_atoms, 3)```.
A dimension named by an int field of the config (or a sub-config) takes its value, `batch_size` the batch, an
integer its value, any other name (`num_tokens`, `num_atoms`) the sequence length. The dtype follows the name:
masks are all-true bools, indices, ids and types zeros (a valid index into anything), the rest random floats.
An input the model's own source one-hot encodes (`F.one_hot(ref_element, num_classes=self.config.max_atomic_number)`)
is given as the indices: integers below that class count, without the one-hot dimension the docstring may show
(documentation that describes the encoded form the forward makes of it).
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import sys
import typing
from dataclasses import dataclass
from typing import Any

from reslint.trace.input_specs import BATCH, SEQ, TensorSpec, make_tensor

DOCUMENTED_SHAPE = re.compile(r"^\s*(\w+)(?: \(`[^`]*` of shape |: )`\(([^`]*)\)`", re.MULTILINE)
ONE_HOT = re.compile(r"one_hot\(\s*(?:\w+\.)*(\w+)\s*,\s*(?:num_classes\s*=\s*)?[\w.]*?(\w+)\s*\)")
MASK = re.compile(r"mask$")
INDEX = re.compile(r"(index|indices|_ids?|_type|uid|_to_\w+)$")


@dataclass(frozen=True)
class StructSpec:
    """A dataclass (or TypedDict, or dict) argument: its class and one TensorSpec per field; `nones`: keys that
    hold None (a mapping's optional entries)."""
    name: str
    cls: type
    fields: tuple = ()
    nones: tuple = ()

    @property
    def dtype(self) -> str:  # what a caller reading `specs[0].dtype` of a candidate sees
        return "struct"


def make_value(spec: Any, device: str) -> Any:
    if isinstance(spec, StructSpec):
        values = {field.name: make_tensor(field, device) for field in spec.fields}
        values.update(dict.fromkeys(spec.nones))
        if dataclasses.is_dataclass(spec.cls):
            register(spec.cls)
            return spec.cls(**values)
        return values  # a TypedDict is a dict
    return make_tensor(spec, device)


def register(cls: type) -> None:
    """torch.export takes a dataclass argument once it is registered as a pytree node (for this process)."""
    import torch
    from torch.utils._pytree import SUPPORTED_NODES

    if cls not in SUPPORTED_NODES:
        torch.export.register_dataclass(cls)


def documented_specs(model: Any, config: Any) -> list | None:
    """One spec a required forward parameter, from the docstrings, for a forward that takes a dataclass or
    TypedDict of tensors (no other guess can make one); None otherwise, or when a parameter is not documented."""
    forward = inspect.unwrap(type(model).forward)
    hints = type_hints(forward)
    if not any(struct_class(hint) is not None for name, hint in hints.items() if name != "return"):
        return None
    shapes = documented_shapes(inspect.getdoc(type(model).forward) or "")
    encoded = one_hot_classes(model)
    specs: list = []
    for parameter in list(inspect.signature(forward).parameters.values())[1:]:
        if parameter.default is not inspect.Parameter.empty or parameter.kind in (
                parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        cls = struct_class(hints.get(parameter.name))
        if cls is not None:
            fields = struct_fields(cls, config, encoded)
            if fields is None:
                return None
            specs.append(StructSpec(parameter.name, cls, tuple(fields)))
        elif parameter.name in shapes:
            specs.append(tensor_spec(parameter.name, shapes[parameter.name], config, encoded))
        else:
            return None
    return specs or None


def documented_shapes(doc: str) -> dict[str, list[str]]:
    return {name: [dim.strip() for dim in dims.split(",") if dim.strip()] for name, dims in DOCUMENTED_SHAPE.findall(doc)}


def type_hints(function: Any) -> dict:
    try:
        return typing.get_type_hints(function)
    except Exception:  # noqa: BLE001 - an annotation that does not resolve: no struct arguments
        return {}


def struct_class(hint: Any) -> type | None:
    """The dataclass or TypedDict a parameter is annotated with (also inside `X | None`)."""
    for candidate in (hint, *typing.get_args(hint)):
        if isinstance(candidate, type) and (dataclasses.is_dataclass(candidate) or typing.is_typeddict(candidate)):
            return candidate
    return None


def struct_fields(cls: type, config: Any, encoded: dict[str, str]) -> list[TensorSpec] | None:
    """A TensorSpec per field, or None where a field is not a tensor with a documented shape."""
    import torch

    shapes = documented_shapes(inspect.getdoc(cls) or "")
    hints = type_hints(cls)
    names = [field.name for field in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else list(hints)
    if not names or any(hints.get(name) is not torch.Tensor or name not in shapes for name in names):
        return None
    return [tensor_spec(name, shapes[name], config, encoded) for name in names]


def tensor_spec(name: str, dims: list[str], config: Any, encoded: dict[str, str]) -> TensorSpec:
    if name in encoded:  # indices the model one-hot encodes itself
        classes = config_int(config, encoded[name]) or 2
        if dims and dims[-1] == encoded[name]:
            dims = dims[:-1]
        return TensorSpec("int64", shape(dims, config), classes, name)
    if MASK.search(name):
        return TensorSpec("bool", shape(dims, config), name=name)
    if INDEX.search(name):
        return TensorSpec("int64", shape(dims, config), name=name, fill=0)
    return TensorSpec("float32", shape(dims, config), name=name)


def shape(dims: list[str], config: Any) -> tuple[int, ...]:
    sizes = []
    for dim in dims:
        if dim.isdigit():
            sizes.append(int(dim))
        elif dim in ("batch_size", "batch"):
            sizes.append(BATCH)
        else:
            sizes.append(config_int(config, dim) or SEQ)
    return tuple(sizes)


def config_int(config: Any, name: str) -> int | None:
    from reslint.trace.config_reduction import config_holders

    for _, holder in config_holders(config):
        value = getattr(holder, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def one_hot_classes(model: Any) -> dict[str, str]:
    """name -> the config field of its class count, for every `one_hot(name, num_classes=...field)` in the
    source of the model's module."""
    module = sys.modules.get(type(model).__module__)
    try:
        source = inspect.getsource(module) if module is not None else ""
    except (OSError, TypeError):
        return {}
    return dict(ONE_HOT.findall(source))
