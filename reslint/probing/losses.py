"""Turn a model's output into the scalar the probe differentiates.

`auto` (the default) is a loss whose gradient cannot vanish by construction: the output's `.loss`
when it has one (Hugging Face outputs given labels); else, for logits (an output's `.logits`, or a
main tensor whose last dimension is the model's vocabulary: an `nn.Embedding`'s size or
`config.vocab_size`), `cross-entropy` against random targets; else `random-projection`, the
output's dot product with a fixed random tensor. Both draw from their own generator seeded with
the probe's seed, so they are the same for every step and for a `--compare`d model.

`sum` and `mean` reduce the output's main tensor as the lessons do (`h.sum().backward()`); they
are not the default because the sum of a normalised output is constant, so a model ending in a
LayerNorm gets almost no gradient from it. The main tensor is the output itself, its `.logits`,
or the first floating-point tensor of a tuple, list or dict. A callable receives the output, or
the output and the model's inputs when it takes more than one parameter: `loss(output, *args, **kwargs)`.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

LOSS_KINDS = ("auto", "sum", "mean", "random-projection", "cross-entropy")


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


def resolve_loss(loss: str | Callable, vocabulary: frozenset[int] = frozenset(),
                 seed: int | None = 0) -> tuple[Callable[[Any, Any], Any], str]:
    """(function of (output, inputs) -> scalar tensor, how reports name it).

    `vocabulary`: the sizes a logits dimension may have; `seed`: the random targets' and projection's.
    """
    if callable(loss):
        name = getattr(loss, "__qualname__", None) or type(loss).__name__
        return call_user_loss(loss, name), name
    if loss not in LOSS_KINDS:
        raise LossError(f"unknown loss {loss!r}: expected one of {', '.join(LOSS_KINDS)} or a function")
    if loss in ("sum", "mean"):
        return (lambda output, inputs: reduce(output, loss)), loss
    return RandomLoss(loss, vocabulary, seed or 0), loss


def vocabulary_sizes(model: Any) -> frozenset[int]:
    """The sizes a logits dimension of this model may have: its embeddings' and its config's vocab_size."""
    from torch import nn

    sizes = {module.num_embeddings for module in model.modules() if isinstance(module, nn.Embedding)}
    size = getattr(getattr(model, "config", None), "vocab_size", None)
    if isinstance(size, int):
        sizes.add(size)
    return frozenset(size for size in sizes if size > 1)


class RandomLoss:
    """`auto`, `cross-entropy` or `random-projection`; `chosen` says which one the last output got."""

    def __init__(self, kind: str, vocabulary: frozenset[int], seed: int):
        self.kind = kind
        self.vocabulary = vocabulary
        self.seed = seed
        self.chosen = kind
        self.drawn: dict[tuple, Any] = {}  # (kind, shape) -> the targets or the projection, on the CPU

    def __call__(self, output: Any, inputs: Any) -> Any:
        import torch

        if self.kind == "auto":
            value = output_field(output, "loss")
            if isinstance(value, torch.Tensor) and value.numel() == 1:
                self.chosen = "output.loss"
                return value.reshape(())
        tensor = main_tensor(output)
        kind = self.kind
        if kind == "auto":
            logits = isinstance(output_field(output, "logits"), torch.Tensor) or (
                tensor.dim() >= 2 and tensor.shape[-1] in self.vocabulary)
            kind = "cross-entropy" if logits and not tensor.is_complex() else "random-projection"
        self.chosen = kind
        if kind == "cross-entropy":
            return self.cross_entropy(tensor)
        return self.projection(tensor)

    def draw(self, kind: str, shape: tuple, make: Callable[[Any], Any]) -> Any:
        import torch

        if (kind, shape) not in self.drawn:
            generator = torch.Generator().manual_seed(self.seed)
            self.drawn[(kind, shape)] = make(generator)
        return self.drawn[(kind, shape)]

    def cross_entropy(self, logits: Any) -> Any:
        import torch
        import torch.nn.functional as F

        if logits.dim() < 1 or logits.shape[-1] < 2:
            raise LossError(f"cross-entropy needs logits with at least 2 classes in the last dimension, got shape "
                            f"{tuple(logits.shape)}; pass --loss random-projection")
        classes = logits.shape[-1]
        shape = tuple(logits.shape[:-1])
        targets = self.draw("cross-entropy", (*shape, classes),
                            lambda generator: torch.randint(0, classes, shape, generator=generator))
        flat = logits.reshape(-1, classes).float()
        return F.cross_entropy(flat, targets.reshape(-1).to(logits.device))

    def projection(self, tensor: Any) -> Any:
        import torch

        shape = tuple(tensor.shape)
        # unit norm overall: the loss is on the scale of the output's RMS, whatever its size
        direction = self.draw("random-projection", shape,
                              lambda generator: torch.randn(shape, generator=generator) / max(1, tensor.numel()) ** 0.5)
        if tensor.is_complex():
            tensor = torch.view_as_real(tensor)
            direction = torch.stack((direction, direction), dim=-1)
        return (tensor.float() * direction.to(tensor.device)).sum()


def reduce(output: Any, kind: str) -> Any:
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


def loss_label(kind: str, function: Any) -> str:
    """How reports name the loss: what the auto loss chose, else the kind asked for."""
    return getattr(function, "chosen", kind)
