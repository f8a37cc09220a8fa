"""One (or --steps) real forward and backward pass with hooks that keep norms only.

What is recorded per step: the loss, the norm of every parameter's gradient (None where
`.grad` stays None), and for every group of the depth order the order of its first call and
the norm of the activation leaving it (the last call's); for every stack, the RMS of the
activation entering its first block. Hooks compute 0-d norms and keep nothing else, so no
activation outlives the autograd graph; the norms are read back (one device sync each for the
loss, the gradients and the activations) after each step's backward.

Everything the pass changes is put back when it ends, even when it raises: hooks removed, each
module's training flag, BatchNorm running statistics, the RNG state (CPU and the device's), and
the parameters' `.grad` as they were before the probe.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Callable

from reslint.probing.distributed import is_dtensor, loaded, sharded
from reslint.probing.structure import MODEL_GROUP, Layout, has_parameters
from reslint.trace.inputs import Inputs


class ForwardFailed(Exception):
    """The model's forward or backward raised; `error` is the original exception."""

    def __init__(self, stage: str, error: BaseException):
        super().__init__(f"{stage} raised {type(error).__name__}: {error}")
        self.stage = stage
        self.error = error


@dataclass
class StepRecord:
    loss: float
    grad_norms: list[float | None]  # per parameter, in named_parameters order
    activation_norms: dict[str, float]  # group -> norm of its output
    activation_rms: dict[str, float]
    stack_input_rms: dict[str, float]  # stack -> RMS of its first block's input


@dataclass
class Measurement:
    names: list[str]
    shapes: list[tuple[int, ...]]
    trainable: list[bool]
    param_norms: list[float]
    steps: list[StepRecord]
    first_call: dict[str, int]  # group -> order of its first call
    called: set[str]  # module paths called during the pass
    watched: set[str]  # module paths whose calls were recorded (those with parameters)

    def nonfinite_step(self) -> int | None:
        for index, step in enumerate(self.steps):
            if not math.isfinite(step.loss) or any(v is not None and not math.isfinite(v) for v in step.grad_norms):
                return index
        return None


def first_tensor(value: Any, depth: int = 0) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value
    if depth > 3:
        return None
    if isinstance(value, (tuple, list)):
        items = value
    elif isinstance(value, dict):
        items = list(value.values())
    elif hasattr(value, "__dataclass_fields__"):
        items = [getattr(value, name, None) for name in value.__dataclass_fields__]
    else:
        return None
    for item in items:
        found = first_tensor(item, depth + 1)
        if found is not None:
            return found
    return None


def local(tensor: Any) -> Any:
    return tensor.to_local() if is_dtensor(tensor) else tensor


def norm_of(tensor: Any) -> Any:
    """A 0-d float32 (at least) norm of a tensor, without a float32 copy of a float32 tensor."""
    import torch

    upcast = torch.float32 if tensor.dtype in (torch.float16, torch.bfloat16) else None
    return torch.linalg.vector_norm(tensor.detach(), dtype=upcast)


def norms(tensors: list[Any]) -> list[float | None]:
    """Norms of tensors (None stays None); DTensor shards are combined over their mesh."""
    import torch
    import torch.distributed as dist

    results: list[float | None] = [None] * len(tensors)
    plain: list[tuple[int, Any]] = []
    shards: dict[Any, list[tuple[int, Any]]] = {}
    distributed = loaded("torch.distributed.tensor") is not None  # else no tensor can be a DTensor
    for index, tensor in enumerate(tensors):
        if tensor is None:
            continue
        if not distributed:
            plain.append((index, norm_of(tensor)))
        elif sharded(tensor):
            shards.setdefault(tensor.device_mesh, []).append((index, norm_of(tensor.to_local()).double() ** 2))
        elif is_dtensor(tensor):
            plain.append((index, norm_of(tensor).full_tensor()))
        else:
            plain.append((index, norm_of(tensor)))
    for mesh, entries in shards.items():
        squares = torch.stack([square for _, square in entries])
        dist.all_reduce(squares, group=mesh.get_group())
        for (index, _), value in zip(entries, squares.sqrt().tolist()):
            results[index] = value
    by_device: dict[Any, list[tuple[int, Any]]] = {}
    for index, value in plain:
        by_device.setdefault(value.device, []).append((index, value))
    for entries in by_device.values():
        values = torch.stack([value.float() if value.dtype != torch.float64 else value for _, value in entries]).tolist()
        for (index, _), value in zip(entries, values):
            results[index] = float(value)
    return results


class Recorder:
    """Forward hooks on the groups and on every module that owns parameters; norms only."""

    def __init__(self, model: Any, layout: Layout):
        self.model = model
        self.layout = layout
        self.handles: list[Any] = []
        self.first_call: dict[str, int] = {}
        self.called: set[str] = set()
        self.watched: set[str] = set()
        self.outputs: dict[str, tuple[Any, int]] = {}  # group -> (0-d norm, numel)
        self.stack_inputs: dict[str, tuple[Any, int]] = {}

    def attach(self) -> None:
        groups = {group for group in self.layout.groups if group != MODEL_GROUP}
        first_blocks = {stack.blocks[0]: stack.name for stack in self.layout.stacks if stack.blocks}
        from torch import nn

        for path, module in self.model.named_modules():
            # Every module that holds parameters and can be called: RL604 tells "never called" from "called".
            watched = has_parameters(module) and not isinstance(module, (nn.ModuleList, nn.ModuleDict))
            if watched:
                self.watched.add(path)
            if path in groups or watched or path in first_blocks:
                self.handles.append(module.register_forward_pre_hook(self.pre_hook(path, path in groups,
                                                                                   first_blocks.get(path))))
            if path in groups:
                self.handles.append(module.register_forward_hook(self.post_hook(path)))

    def detach(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles.clear()

    def pre_hook(self, path: str, is_group: bool, stack: str | None) -> Callable:
        def hook(module: Any, args: tuple) -> None:
            self.called.add(path)
            if is_group and path not in self.first_call:
                self.first_call[path] = len(self.first_call)
            if stack is not None and stack not in self.stack_inputs:
                tensor = first_tensor(args)
                if tensor is not None and tensor.is_floating_point():
                    self.stack_inputs[stack] = (norm_of(local(tensor)), local(tensor).numel())
        return hook

    def post_hook(self, path: str) -> Callable:
        def hook(module: Any, args: tuple, output: Any) -> None:
            tensor = first_tensor(output)
            if tensor is not None and (tensor.is_floating_point() or tensor.is_complex()):
                self.outputs[path] = (norm_of(local(tensor)), local(tensor).numel())
        return hook

    def take_step(self) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
        """Activation norms and RMS of the step that just ran, as floats; resets for the next step."""
        names = list(self.outputs)
        values = tensor_floats([self.outputs[name][0] for name in names])
        norms_ = dict(zip(names, values))
        rms = {name: rms_of(norms_[name], self.outputs[name][1]) for name in names}
        stacks = list(self.stack_inputs)
        stack_values = tensor_floats([self.stack_inputs[name][0] for name in stacks])
        stack_rms = {name: rms_of(value, self.stack_inputs[name][1]) for name, value in zip(stacks, stack_values)}
        self.outputs.clear()
        self.stack_inputs.clear()
        return norms_, rms, stack_rms


def rms_of(norm: float, numel: int) -> float:
    return norm / math.sqrt(numel) if numel else 0.0


def tensor_floats(values: list[Any]) -> list[float]:
    import torch

    if not values:
        return []
    return [float(v) for v in torch.stack([value.float().to(values[0].device) for value in values]).tolist()]


@contextlib.contextmanager
def preserved_state(model: Any, train: bool) -> Iterator[None]:
    """Training flags, BatchNorm running statistics and `.grad`s as they were, whatever happens."""
    import torch
    from torch.nn.modules.batchnorm import _NormBase

    modes = [(module, module.training) for module in model.modules()]
    stats = []
    for module in model.modules():
        if isinstance(module, _NormBase) and module.track_running_stats:
            stats.append((module, {name: buffer.detach().clone() for name, buffer in module.named_buffers(recurse=False)
                                   if buffer is not None}))
    parameters = list(model.parameters())
    grads = [parameter.grad for parameter in parameters]
    try:
        model.train(train)
        yield
    finally:
        for module, mode in modes:
            module.training = mode
        with torch.no_grad():
            for module, saved in stats:
                for name, value in saved.items():
                    getattr(module, name).copy_(value)
        for parameter, grad in zip(parameters, grads):
            parameter.grad = grad


def rng_devices(device: Any) -> tuple[list[int], str]:
    if device.type == "cuda":
        import torch

        return [device.index if device.index is not None else torch.cuda.current_device()], "cuda"
    if device.type == "mps":
        return [0], "mps"
    return [], "cuda"


def capture_rng(device: Any) -> tuple:
    import torch

    state = torch.get_rng_state()
    if device.type == "cuda":
        return state, torch.cuda.get_rng_state(device)
    if device.type == "mps":
        return state, torch.mps.get_rng_state()
    return state, None


def restore_rng(device: Any, saved: tuple) -> None:
    import torch

    torch.set_rng_state(saved[0])
    if saved[1] is not None:
        if device.type == "cuda":
            torch.cuda.set_rng_state(saved[1], device)
        elif device.type == "mps":
            torch.mps.set_rng_state(saved[1])


@dataclass
class Pass:
    """Everything one probe pass needs: the module to call, the one the names come from, and how to feed it."""

    call: Any  # what forward is called on (a DDP wrapper, or the model)
    model: Any  # the unwrapped model: parameter names, hooks
    make_inputs: Callable[[int], Inputs]  # step -> inputs
    loss: Callable[[Any, Inputs], Any]
    device: Any  # torch.device
    layout: Layout
    steps: int = 1
    seed: int | None = 0
    train: bool = True
    rng_states: list[tuple] = field(default_factory=list)

    def forward_loss(self, step: int) -> Any:
        from reslint.probing.losses import LossError

        inputs = self.make_inputs(step)
        try:
            output = self.call(*inputs.args, **inputs.kwargs)
        except Exception as error:
            raise ForwardFailed("the forward pass", error) from error
        try:
            return self.loss(output, inputs), output
        except LossError:
            raise
        except Exception as error:
            raise ForwardFailed("the loss", error) from error


def run_pass(job: Pass, diagnose: Callable[[Pass, Measurement, int], Any] | None = None) -> tuple[Measurement, Any]:
    """Measure; on a non-finite step, call `diagnose(job, measurement, step)` while the state is still forked."""
    import torch

    from reslint.probing.losses import LossError

    named = list(job.model.named_parameters())
    parameters = [parameter for _, parameter in named]
    recorder = Recorder(job.model, job.layout)
    devices, device_type = rng_devices(job.device)
    diagnosis = None
    with preserved_state(job.model, job.train), torch.random.fork_rng(devices=devices, device_type=device_type), \
            torch.enable_grad():
        if job.seed is not None:
            torch.manual_seed(job.seed)
        recorder.attach()
        try:
            records: list[StepRecord] = []
            for step in range(job.steps):
                job.rng_states.append(capture_rng(job.device))
                for parameter in parameters:
                    parameter.grad = None
                loss, output = job.forward_loss(step)
                del output
                if not isinstance(loss, torch.Tensor) or not loss.requires_grad:
                    raise LossError("the loss does not require grad: the output depends on no trainable parameter "
                                    "(is the forward under torch.no_grad, or is every parameter frozen?)")
                loss_value = loss.detach()
                try:
                    loss.backward()
                except Exception as error:
                    raise ForwardFailed("the backward pass", error) from error
                del loss
                grad_norms = norms([parameter.grad for parameter in parameters])
                activation_norms, activation_rms, stack_rms = recorder.take_step()
                records.append(StepRecord(float(loss_value.float().item()), grad_norms, activation_norms,
                                          activation_rms, stack_rms))
            recorder.detach()
            param_norms = [value if value is not None else 0.0 for value in norms(parameters)]
            measurement = Measurement(
                names=[name for name, _ in named],
                shapes=[tuple(parameter.shape) for parameter in parameters],
                trainable=[parameter.requires_grad for parameter in parameters],
                param_norms=param_norms,
                steps=records,
                first_call=dict(recorder.first_call),
                called=set(recorder.called),
                watched=set(recorder.watched),
            )
            step = measurement.nonfinite_step()
            if step is not None and diagnose is not None:
                diagnosis = diagnose(job, measurement, step)
        finally:
            recorder.detach()
            for parameter in parameters:
                parameter.grad = None
    return measurement, diagnosis
