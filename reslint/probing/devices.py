"""Choosing the device, and turning an out-of-memory error into advice.

`auto` picks CUDA, then MPS, then the CPU. A device that is not there is a usage error (exit 2,
one line), never a silent fallback: a probe on the wrong device measures the wrong numbers
(dtype support, kernels) and takes the wrong memory.
"""

from __future__ import annotations

import re
from typing import Any

DEVICES = ("auto", "cpu", "cuda", "mps")
DTYPES = ("float32", "bfloat16", "float16")
TRIED = re.compile(r"Tried to allocate ([\d.]+ ?[KMGT]i?B)")


class DeviceError(Exception):
    """The requested device cannot be used here (one-line reason)."""


def resolve_device(name: Any, local_rank: int = 0) -> Any:
    import torch

    if isinstance(name, torch.device):
        name = str(name)
    name = (name or "auto").lower()
    kind, _, index = name.partition(":")
    if kind == "auto":
        if torch.cuda.is_available():
            kind = "cuda"
        elif mps_available():
            kind = "mps"
        else:
            kind = "cpu"
    if kind == "cpu":
        return torch.device("cpu")
    if kind == "cuda":
        if not torch.cuda.is_available():
            build = "this torch was built without CUDA" if torch.version.cuda is None else "no CUDA device is visible"
            raise DeviceError(f"--device {name}: CUDA is not available ({build}; torch {torch.__version__}); "
                              "use --device cpu or auto")
        number = int(index) if index.isdigit() else local_rank
        if number >= torch.cuda.device_count():
            raise DeviceError(f"--device {name}: there are {torch.cuda.device_count()} CUDA devices")
        return torch.device("cuda", number)
    if kind == "mps":
        if not mps_available():
            raise DeviceError(f"--device {name}: MPS (Apple GPU) is not available; use --device cpu or auto")
        return torch.device("mps")
    raise DeviceError(f"--device {name}: unknown device (expected one of {', '.join(DEVICES)})")


def mps_available() -> bool:
    import torch

    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def torch_dtype(name: str | None) -> Any:
    import torch

    if name is None:
        return None
    if not isinstance(name, str):
        return name
    if name not in DTYPES:
        raise DeviceError(f"unknown dtype {name!r} (expected one of {', '.join(DTYPES)})")
    return getattr(torch, name)


def is_out_of_memory(error: BaseException) -> bool:
    import torch

    if isinstance(error, (getattr(torch, "OutOfMemoryError", ()), torch.cuda.OutOfMemoryError)):
        return True
    text = str(error)
    return isinstance(error, RuntimeError) and ("out of memory" in text.lower() or "can't allocate memory" in text)


def size_text(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if count < 1024 or unit == "TiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} TiB"


def parameters_text(count: int) -> str:
    if count >= 1e9:
        return f"{count / 1e9:.2f}B"
    if count >= 1e6:
        return f"{count / 1e6:.1f}M"
    if count >= 1e3:
        return f"{count / 1e3:.1f}K"
    return str(count)


def out_of_memory_message(error: BaseException, device: Any, model: Any, inputs: str, dtype: str, stage: str) -> str:
    """One line: where it ran out, the sizes tried, and what to try next."""
    parts = [f"out of memory on {device} while {stage}"]
    if model is not None:
        count = sum(parameter.numel() for parameter in model.parameters())
        size = sum(parameter.numel() * parameter.element_size() for parameter in model.parameters())
        parts.append(f"{type(model).__name__}: {parameters_text(count)} parameters, {size_text(size)} of weights in {dtype}")
    if inputs:
        parts.append(f"inputs {inputs}")
    tried = TRIED.search(str(error))
    if tried:
        parts.append(f"tried to allocate {tried.group(1)}")
    peak = peak_memory(device)
    if peak:
        parts.append(f"peak allocated {size_text(peak)}")
    advice = "try --dtype bfloat16, smaller --inputs (fewer or shorter sequences), or torchrun with --wrap fsdp"
    return "; ".join(parts) + f"; {advice}"


def peak_memory(device: Any) -> int:
    try:
        import torch

        if getattr(device, "type", "") == "cuda" and torch.cuda.is_available():
            return int(torch.cuda.max_memory_allocated(device))
    except Exception:  # noqa: BLE001 - a report about memory must not fail for want of statistics
        return 0
    return 0


def release_memory(device: Any) -> None:
    try:
        import gc

        import torch

        gc.collect()
        if getattr(device, "type", "") == "cuda" and torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001
        pass
