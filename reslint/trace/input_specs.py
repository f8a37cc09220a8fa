"""The pieces every input inference shares: a tensor spec, its tensor, the forward's parameters."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

BATCH, SEQ = 2, 16


class InputError(Exception):
    """The inputs cannot be parsed, evaluated or inferred (one-line reason)."""


@dataclass(frozen=True)
class TensorSpec:
    dtype: str  # torch dtype name
    shape: tuple[int, ...]
    high: int | None = None  # integer values lie in [0, high)
    name: str = ""  # keyword argument name, "" for positional
    fill: int | None = None  # every value (lengths: the full sequence), instead of random ones


Candidate = tuple  # (tensor specs, extra keyword arguments, where they come from)


def forward_parameters(model: Any) -> dict:
    import inspect

    try:
        return dict(inspect.signature(model.forward).parameters)
    except (TypeError, ValueError):
        return {}


def make_tensor(spec: TensorSpec, device: str) -> Any:
    import torch

    dtype = getattr(torch, spec.dtype)
    if device == "meta":
        return torch.empty(spec.shape, dtype=dtype, device="meta")
    generator = torch.Generator().manual_seed(0)
    if spec.fill is not None:
        return torch.full(spec.shape, spec.fill, dtype=dtype)
    if dtype == torch.bool:
        return torch.ones(spec.shape, dtype=dtype)
    if dtype.is_floating_point:
        return torch.randn(spec.shape, generator=generator).to(dtype)
    return torch.randint(0, spec.high or 2, spec.shape, generator=generator, dtype=dtype)
