"""Turn a model's output into the scalar the probe differentiates.

`auto` (the default) is the output's `.loss` when it has one (Hugging Face outputs given labels),
else the sum of the output, as the lessons do (`h.sum().backward()`). `sum` and `mean` reduce the
output's main tensor: the output itself, its `.logits`, or the first floating-point tensor of a
tuple, list or dict. A callable receives the output, or the output and the model's inputs when it
takes more than one parameter: `loss(output, *args, **kwargs)`.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

LOSS_KINDS = ("auto", "sum", "mean")


class LossError(Exception):
    """The output cannot be turned into a loss (one-line reason)."""


def floating_tensors(value: Any, depth: int = 0):
    """Floating-point tensors of an output, depth first: tensors, tuples, lists, dicts, dataclass-like outputs."""
    import torch

    if depth > 4:
        return
    if isinstance(value, torch.Tensor):
        if value.is_floating_point() or value.is_complex():
            yield value
        return
    if isinstance(value, dict):
        items = list(value.values())
    elif isinstance(value, (tuple, list)):
        items = list(value)
    elif hasattr(value, "__dataclass_fields__"):
        items = [getattr(value, name, None) for name in value.__dataclass_fields__]
    else:
        return
    for item in items:
        yield from floating_tensors(item, depth + 1)


def output_field(output: Any, name: str) -> Any:
    if isinstance(output, dict):
        return output.get(name)
    if isinstance(output, (tuple, list)) or output is None:
        return None
    import torch

    if isinstance(output, torch.Tensor):
        return None
    return getattr(output, name, None)


def main_tensor(output: Any) -> Any:
    import torch

    if isinstance(output, torch.Tensor):
        return output
    logits = output_field(output, "logits")
    if isinstance(logits, torch.Tensor):
        return logits
    for tensor in floating_tensors(output):
        return tensor
    raise LossError(f"the model returned {type(output).__name__} with no floating-point tensor to take a loss of; "
                    "pass --loss MODULE:FUNC")


def resolve_loss(loss: str | Callable) -> tuple[Callable[[Any, Any], Any], str]:
    """(function of (output, inputs) -> scalar tensor, how reports name it)."""
    if callable(loss):
        name = getattr(loss, "__qualname__", None) or type(loss).__name__
        return call_user_loss(loss, name), name
    if loss not in LOSS_KINDS:
        raise LossError(f"unknown loss {loss!r}: expected one of {', '.join(LOSS_KINDS)} or a function")
    return (lambda output, inputs: reduce(output, loss)), loss


def reduce(output: Any, kind: str) -> Any:
    import torch

    if kind == "auto":
        value = output_field(output, "loss")
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            return value.reshape(())
        kind = "sum"
    tensor = main_tensor(output)
    return tensor.sum() if kind == "sum" else tensor.mean()


def call_user_loss(function: Callable, name: str) -> Callable[[Any, Any], Any]:
    try:
        parameters = list(inspect.signature(function).parameters.values())
        positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        takes_inputs = len(positional) > 1 or any(p.kind is p.VAR_POSITIONAL for p in parameters)
    except (TypeError, ValueError):
        takes_inputs = False

    def compute(output: Any, inputs: Any) -> Any:
        import torch

        value = function(output, *inputs.args, **inputs.kwargs) if takes_inputs else function(output)
        if not isinstance(value, torch.Tensor):
            raise LossError(f"the loss function {name} returned {type(value).__name__}, not a tensor")
        if value.numel() != 1:
            raise LossError(f"the loss function {name} returned a tensor of shape {tuple(value.shape)}, not a scalar")
        return value.reshape(())

    return compute


def loss_label(kind: str, output_had_loss: bool) -> str:
    if kind == "auto":
        return "output.loss" if output_had_loss else "sum"
    return kind
