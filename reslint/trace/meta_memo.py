"""Memoized ops on meta tensors, for fast_capture's shape propagation.

A meta tensor is nothing but its metadata, so an op of torch given arguments of the same metadata
(shape, stride, dtype, device, requires_grad) and the same plain values returns a result of the same
metadata, or raises alike. A 12-block model runs each block's ops twelve times over: on meta, each
through torch's Python references (a LayerNorm's alone is a few hundred Python calls). The result of
the first run is described here and rebuilt, as fresh meta tensors of that metadata, for the others:
the trace engine reads nothing of `meta["val"]` but shapes and dtypes. Kept for the process, so a
fixed file traced after its original (fixes.traced_check) or a head after its backbone is served too.

Memoized: torch's own functions and Tensor methods, and torch.nn's leaf layers (their forward reads
only their attributes and parameters) without hooks. Anything else, or an argument that is not plain
data, runs as always.
"""

from __future__ import annotations

import operator
from typing import Any

ENABLED = True  # off: every op runs (the tests compare both)
MAX_ENTRIES = 20_000
PLAIN = (int, float, bool, str, type(None), type(Ellipsis))
MODULE_STATE = ("_parameters", "_buffers", "_modules")
_results: dict[tuple, Any] = {}


class Unmemoizable(Exception):
    pass


def memoized(run, kind: str, target: Any, args: tuple, kwargs: dict, module: Any = None) -> Any:
    """`run()`, or the rebuilt result of an earlier call of the same op on arguments of the same metadata."""
    if not ENABLED:
        return run()
    try:
        key = (kind, op_key(target, module), described(args), described(kwargs), global_state())
    except Unmemoizable:
        return run()
    if key in _results:
        return rebuilt(_results[key])
    result = run()
    try:
        description = described(result)
    except Unmemoizable:
        return result
    if len(_results) >= MAX_ENTRIES:
        _results.clear()
    _results[key] = description
    return result


def op_key(target: Any, module: Any) -> Any:
    if module is not None:
        return layer_key(module)
    if isinstance(target, str):  # a Tensor method: its self is the first argument, described there
        return target
    if target in (operator.add, operator.sub, operator.mul, operator.truediv, operator.neg, operator.getitem,
                  operator.matmul) or getattr(target, "__module__", "").startswith("torch"):
        return target
    raise Unmemoizable


def layer_key(module: Any) -> tuple:
    """A torch.nn layer as what its forward reads: its class, attributes, parameters and buffers, sublayers."""
    if not type(module).__module__.startswith("torch.nn"):
        raise Unmemoizable
    state = []
    for name, value in vars(module).items():
        if name in MODULE_STATE:
            continue
        if "hook" in name:
            if value:
                raise Unmemoizable
            continue
        state.append((name, described(value)))
    tensors = tuple((name, described(value)) for kind in ("_parameters", "_buffers")
                    for name, value in vars(module)[kind].items())
    children = tuple((name, layer_key(child) if child is not None else None)
                     for name, child in vars(module)["_modules"].items())
    return type(module), tuple(state), tensors, children


def global_state() -> tuple:
    import torch
    from torch.nn.modules import module

    if module._global_forward_hooks or module._global_forward_pre_hooks or module._global_module_registration_hooks:
        raise Unmemoizable
    return torch.is_grad_enabled(), torch.get_default_dtype(), torch.get_default_device(), torch.is_autocast_enabled()


def described(value: Any) -> Any:
    """Hashable metadata of a value: plain values as they are, meta tensors by their metadata."""
    import torch

    if isinstance(value, PLAIN):
        return type(value), value
    if isinstance(value, torch.Tensor):
        if type(value) not in (torch.Tensor, torch.nn.Parameter) or not value.is_meta:
            raise Unmemoizable
        return ("tensor", type(value) is torch.nn.Parameter, tuple(value.shape), value.stride(),
                value.storage_offset(), value.dtype, value.requires_grad)
    if isinstance(value, torch.Size):
        return "size", tuple(value)
    if isinstance(value, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return type(value), value
    if isinstance(value, slice):
        return "slice", described(value.start), described(value.stop), described(value.step)
    if type(value) in (tuple, list):
        return type(value), tuple(described(item) for item in value)
    if type(value) in (set, frozenset):
        return frozenset, frozenset(described(item) for item in value)
    if type(value) is dict or type(value).__name__ == "immutable_dict":  # fx's kwargs
        return dict, tuple((described(name), described(item)) for name, item in value.items())
    raise Unmemoizable


def rebuilt(description: Any) -> Any:
    import torch

    kind = description[0]
    if kind == "tensor":
        _, parameter, shape, stride, offset, dtype, requires_grad = description
        tensor = torch.empty_strided(shape, stride, dtype=dtype, device="meta")
        if offset:
            tensor = tensor.as_strided(shape, stride, offset)
        if parameter:
            return torch.nn.Parameter(tensor, requires_grad=requires_grad)
        return tensor.requires_grad_(requires_grad) if requires_grad else tensor
    if kind == "size":
        return torch.Size(description[1])
    if kind == "slice":
        return slice(*(rebuilt(part) for part in description[1:]))
    if kind in (tuple, list):
        return kind(rebuilt(item) for item in description[1])
    if kind is dict:
        return {rebuilt(name): rebuilt(item) for name, item in description[1]}
    return description[1]
