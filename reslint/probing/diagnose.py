"""Where a NaN or Inf comes from: the failing step is run again, with scanners, only when it failed.

The healthy path pays nothing for this. On a non-finite step the probe replays that step from
its saved RNG state:

- forward under a TorchFunctionMode that checks the output of every torch call: the first call
  that makes a NaN out of NaN-free inputs (else the first that makes an Inf out of finite inputs,
  not counting fills and constructors, where `-inf` masks are deliberate) is reported with the
  innermost frame of the user's code that made it;
- backward with a hook per parameter that records the order in which gradients arrive, so the
  first parameter hit is the one the non-finite gradient reached first;
- when the forward pass was finite (the NaN is born in backward, e.g. sqrt or norm of 0), once
  more under `torch.autograd.detect_anomaly`, whose error names the backward function and the
  forward line it belongs to (single process only: an exception in the middle of a distributed
  backward would leave the other ranks waiting).
"""

from __future__ import annotations

import math
import re
import sys
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any

from reslint.probing.measure import Measurement, Pass, local, restore_rng
from reslint.probing.structure import is_library_file

DELIBERATE_INF = frozenset({
    "masked_fill", "masked_fill_", "fill_", "fill", "full", "full_like", "new_full", "where", "index_put",
    "index_put_", "scatter", "scatter_", "__setitem__", "tensor", "as_tensor", "zeros", "ones", "empty",
    "arange", "triu", "tril", "clone", "to", "contiguous", "view", "reshape", "expand", "__getitem__",
    "unsqueeze", "squeeze", "transpose", "permute", "float", "type_as", "copy_", "repeat", "cat", "stack",
})
ANOMALY_FUNCTION = re.compile(r"Function '(\w+)' returned (nan|inf)")
FRAME = re.compile(r'File "(.+?)", line (\d+)')


@dataclass
class Origin:
    operation: str  # "softmax", "SqrtBackward0"
    kind: str  # "nan" | "inf"
    path: str  # absolute file of the innermost user frame ("" when none)
    line: int = 0
    column: int = 1


@dataclass
class Diagnosis:
    step: int
    inputs_nonfinite: bool = False
    forward: Origin | None = None
    backward: Origin | None = None
    backward_order: list[str] = field(default_factory=list)


def operation_name(func: Any) -> str:
    name = getattr(func, "__name__", None) or str(func)
    if name.startswith("__") and name.endswith("__"):
        name = name[2:-2]
    return name


def backward_name(function: str) -> str:
    """`MulBackward0` -> `the backward of mul (MulBackward0)`."""
    base = re.sub(r"Backward\d*$", "", function)
    if base == function or not base:
        return function
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", base).lower()
    return f"the backward of {snake} ({function})"


def user_frame(stack: list[traceback.FrameSummary]) -> tuple[str, int, int]:
    """(file, line, column) of the innermost frame of the user's code; the column where Python 3.11+ knows it."""
    for frame in reversed(stack):
        if frame.filename and not frame.filename.startswith("<") and not is_library_file(frame.filename):
            column = getattr(frame, "colno", None)
            return frame.filename, frame.lineno or 0, (column + 1) if isinstance(column, int) else 1
    return "", 0, 1


def calling_frame() -> tuple[str, int, int]:
    """(file, line, column) of the innermost user frame on the stack; the column where Python 3.11+ knows it."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename and not filename.startswith("<") and not is_library_file(filename):
            column = 1
            positions = getattr(frame.f_code, "co_positions", None)
            if positions is not None:
                try:
                    start = list(positions())[frame.f_lasti // 2][2]
                    column = start + 1 if isinstance(start, int) else 1
                except (IndexError, TypeError):
                    column = 1
            return filename, frame.f_lineno or 0, column
        frame = frame.f_back
    return "", 0, 1


def tensors(value: Any, depth: int = 0):
    import torch

    if isinstance(value, torch.Tensor):
        yield local(value)
    elif depth < 2 and isinstance(value, (tuple, list)):
        for item in value:
            yield from tensors(item, depth + 1)
    elif depth < 2 and isinstance(value, dict):
        for item in value.values():
            yield from tensors(item, depth + 1)


def has_nan(value: Any) -> bool:
    import torch

    return any((t.is_floating_point() or t.is_complex()) and t.numel() and bool(torch.isnan(t).any())
               for t in tensors(value))


def has_inf(value: Any) -> bool:
    import torch

    return any((t.is_floating_point() or t.is_complex()) and t.numel() and bool(torch.isinf(t).any())
               for t in tensors(value))


def scanner() -> Any:
    from torch.overrides import TorchFunctionMode

    class Scanner(TorchFunctionMode):
        def __init__(self) -> None:
            super().__init__()
            self.nan: Origin | None = None
            self.inf: Origin | None = None

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            result = func(*args, **kwargs)
            if self.nan is None:
                try:
                    self.inspect(func, args, kwargs, result)
                except Exception:  # noqa: BLE001 - a check that cannot run must not change the model's behaviour
                    pass
            return result

        def inspect(self, func, args, kwargs, result) -> None:
            name = operation_name(func)
            if has_nan(result) and not has_nan((args, kwargs)):
                self.nan = Origin(name, "nan", *calling_frame())
            elif self.inf is None and name not in DELIBERATE_INF and has_inf(result) and not has_inf((args, kwargs)) \
                    and not has_nan((args, kwargs)):
                self.inf = Origin(name, "inf", *calling_frame())

    return Scanner()


def diagnose(job: Pass, measurement: Measurement, step: int) -> Diagnosis:
    import torch

    diagnosis = Diagnosis(step)
    named = [(name, parameter) for name, parameter in job.model.named_parameters()]
    order: list[str] = []
    handles = []
    for name, parameter in named:
        if parameter.requires_grad:
            handles.append(parameter.register_post_accumulate_grad_hook(lambda p, name=name: order.append(name)))
    restore_rng(job.device, job.rng_states[step])
    for _, parameter in named:
        parameter.grad = None
    inputs = job.make_inputs(step)
    diagnosis.inputs_nonfinite = has_nan((inputs.args, inputs.kwargs)) or has_inf((inputs.args, inputs.kwargs))
    scan = scanner()
    try:
        with scan:
            output = job.call(*inputs.args, **inputs.kwargs)
            loss = job.loss(output, inputs)
        del output
        loss.backward()
    except Exception:  # noqa: BLE001 - the pass succeeded once; a replay that fails only loses detail
        pass
    finally:
        for handle in handles:
            handle.remove()
    diagnosis.forward = scan.nan or scan.inf
    diagnosis.backward_order = order
    forward_finite = diagnosis.forward is None and not diagnosis.inputs_nonfinite
    if forward_finite and not torch.distributed.is_initialized():
        diagnosis.backward = anomaly_origin(job, step)
    for _, parameter in named:
        parameter.grad = None
    return diagnosis


def anomaly_origin(job: Pass, step: int) -> Origin | None:
    import torch

    restore_rng(job.device, job.rng_states[step])
    for parameter in job.model.parameters():
        parameter.grad = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with torch.autograd.detect_anomaly(check_nan=True):
                inputs = job.make_inputs(step)
                loss = job.loss(job.call(*inputs.args, **inputs.kwargs), inputs)
                loss.backward()
        except RuntimeError as error:
            match = ANOMALY_FUNCTION.search(str(error))
            if match is None:
                return None
            path, line = "", 0
            for warning in caught:
                frames = FRAME.findall(str(warning.message))
                user = [(f, int(n)) for f, n in frames if not f.startswith("<") and not is_library_file(f)]
                if user:
                    path, line = user[-1]
            return Origin(backward_name(match.group(1)), match.group(2), path, line, 1)
        except Exception:  # noqa: BLE001
            return None
    return None


def finite(value: float | None) -> bool:
    return value is None or math.isfinite(value)
