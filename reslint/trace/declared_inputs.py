"""The example inputs a plain-torch model declares itself: Lightning's `example_input_array`, or a method that
describes them (`describe_inputs()`, `example_inputs()`, `dummy_inputs`), returning tensors (one, a tuple, a dict
by forward parameter) or a mapping of forward parameters to specs that carry a `shape` and a `dtype` (a forecasting
model's `InputSpec` of past targets, observed values and features, sized by its own context length).

What the model says it takes is tried before anything inferred from its layers. Integer inputs declared by spec
only are zeros (an index valid for any table), as a spec's own `zeros()` makes them.
"""

from __future__ import annotations

import inspect
from typing import Any

from reslint.trace.input_specs import BATCH, Candidate, TensorSpec, forward_parameters

DECLARING = ("example_input_array", "describe_inputs", "example_inputs", "get_example_inputs", "dummy_inputs",
             "input_spec")


def declared_candidate(model: Any) -> Candidate | None:
    """The inputs the model declares, or None when it declares none this module can read."""
    for name in DECLARING:
        value = declared_value(model, name)
        specs = value_specs(model, value) if value is not None else None
        if specs:
            return specs, {}, f"{type(model).__name__}.{name}"
    return None


def declared_value(model: Any, name: str) -> Any:
    """The attribute's value, called when it is a method that needs no argument (a batch size given BATCH)."""
    try:
        value = getattr(model, name, None)
        if not callable(value) or isinstance(value, type):
            return value
        parameters = inspect.signature(value).parameters
        if any(parameter.default is inspect.Parameter.empty and parameter.kind not in
               (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD) for parameter in parameters.values()):
            return None
        return value(batch_size=BATCH) if "batch_size" in parameters else value()
    except Exception:  # noqa: BLE001 - the checked code's own method
        return None


def value_specs(model: Any, value: Any) -> list[TensorSpec] | None:
    """Specs of declared tensors or tensor specs; None when `value` is neither (or names no forward parameter)."""
    import torch

    if isinstance(value, torch.Tensor):
        return [tensor_spec(value, "")]
    if isinstance(value, (tuple, list)) and value and all(isinstance(item, torch.Tensor) for item in value):
        return [tensor_spec(item, "") for item in value]
    if not hasattr(value, "items"):
        return None
    parameters = forward_parameters(model)
    takes_any = any(parameter.kind is parameter.VAR_KEYWORD for parameter in parameters.values())
    specs = []
    for key, item in value.items():
        if not isinstance(key, str) or not (key in parameters or takes_any):
            return None
        spec = tensor_spec(item, key) if isinstance(item, torch.Tensor) else described_spec(item, key)
        if spec is None:
            return None
        specs.append(spec)
    return specs


def tensor_spec(tensor: Any, name: str) -> TensorSpec:
    import torch

    dtype = str(tensor.dtype).removeprefix("torch.")
    integral = not tensor.is_floating_point() and tensor.dtype is not torch.bool
    high = int(tensor.max()) + 1 if integral and tensor.numel() and tensor.device.type != "meta" else None
    return TensorSpec(dtype, tuple(tensor.shape), high, name, fill=0 if integral and high is None else None)


def described_spec(item: Any, name: str) -> TensorSpec | None:
    """A spec object's `shape` and `dtype` (a torch dtype), or None."""
    import torch

    shape, dtype = getattr(item, "shape", None), getattr(item, "dtype", None)
    if not isinstance(dtype, torch.dtype) or not isinstance(shape, (tuple, list, torch.Size)) or \
            not all(isinstance(size, int) and size >= 0 for size in shape):
        return None
    floating = dtype.is_floating_point or dtype is torch.bool
    return TensorSpec(str(dtype).removeprefix("torch."), tuple(shape), None, name, fill=None if floating else 0)
