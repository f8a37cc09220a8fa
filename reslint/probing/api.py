"""`reslint.probe(model, inputs, ...)`: measure gradient flow from a test suite or a notebook.

    import reslint

    report = reslint.probe(model, torch.randint(0, 50257, (2, 64)))
    assert report.codes == []                      # no RL601-RL604
    assert report.parameter("blocks.0.attn.weight").grad_norm > 1e-3

`inputs` is a tensor (one positional argument), a tuple (the positional arguments), a dict (the
keyword arguments), a shape spec string as for `--inputs` (`"long[2,64]<50257"`), a callable
returning one of those (called again for every step; it may take the step number), or None to
infer them from the first layer as `reslint check` does.

The model is put back as it was found: hooks removed, training flags, BatchNorm statistics, the
RNG state and the parameters' `.grad`. With `device`, it is moved there for the probe and back
afterwards; with `dtype`, it is converted in place (as `model.to(dtype)` does) and stays so.
Errors of the model (its forward raising, running out of memory) raise `ProbeError` with a
one-line message.
"""

from __future__ import annotations

import inspect
import math
from typing import Any, Callable

from reslint.errors import ReslintError
from reslint.probing.report import BlockStats, ParameterStats, ProbeReport, StackStats
from reslint.probing.verdicts import Thresholds


class ProbeError(ReslintError):
    """The probe could not measure the model (one-line reason)."""


def probe(
    model: Any,
    inputs: Any = None,
    *,
    loss: str | Callable = "auto",
    device: Any = None,
    dtype: Any = None,
    steps: int = 1,
    seed: int | None = 0,
    train: bool = True,
    vanishing_gradient_factor: float = 100.0,
    exploding_gradient_factor: float = 100.0,
    activation_growth_factor: float = 100.0,
) -> ProbeReport:
    """Run `steps` forward+backward passes of `model` and return the measurements and findings."""
    import torch

    from reslint.probing.devices import DeviceError, resolve_device, torch_dtype
    from reslint.probing.distributed import current_world, unwrap

    if steps < 1:
        raise ProbeError(f"steps must be at least 1, got {steps}")
    thresholds = Thresholds(vanishing_gradient_factor, exploding_gradient_factor, activation_growth_factor)
    inner, wrapping = unwrap(model)
    first = next(inner.parameters(), None)
    try:
        target = resolve_device(device) if device is not None else (first.device if first is not None else torch.device("cpu"))
        cast = torch_dtype(dtype)
    except DeviceError as error:
        raise ProbeError(str(error)) from None
    if getattr(target, "type", "") == "meta":
        raise ProbeError("the model is on the meta device: it has no weights to probe; build it on a real device")
    original = first.device if first is not None else None
    moved = original is not None and original != target and wrapping == "none"
    try:
        if moved:
            inner.to(target)
        if cast is not None:
            inner.to(cast)
        make_inputs, description = input_maker(inputs, inner, target, cast)
        return measure_model(model, inner, make_inputs, loss=loss, device=target, steps=steps, seed=seed,
                             train=train, thresholds=thresholds, wrap=wrapping, world_size=current_world().size,
                             inputs_description=description, dtype=cast)
    finally:
        if moved:
            inner.to(original)


def input_maker(inputs: Any, model: Any, device: Any, dtype: Any) -> tuple[Callable[[int], Any], str]:
    """(step -> Inputs on the device, a description)."""
    from reslint.trace.inputs import (
        InputError,
        Inputs,
        as_inputs,
        from_specs,
        infer_inputs,
        parse_shape_spec,
    )

    def placed(value: Inputs) -> Inputs:
        return Inputs(to_device(value.args, device, dtype), to_device(value.kwargs, device, dtype), value.description)

    if inputs is None:
        try:
            inferred = infer_inputs(model, "cpu")
        except InputError as error:
            raise ProbeError(str(error)) from None
        return (lambda step: placed(inferred)), inferred.description
    if isinstance(inputs, str):
        specs = parse_shape_spec(inputs)
        if specs is None:
            raise ProbeError(f"inputs {inputs!r} is not a shape spec such as long[2,64]<50257 or float[2,16,512]")
        fixed = from_specs(specs, "cpu")
        return (lambda step: placed(fixed)), fixed.description
    if callable(inputs) and not hasattr(inputs, "shape"):
        takes_step = accepts_argument(inputs)
        return (lambda step: placed(as_inputs(inputs(step) if takes_step else inputs()))), getattr(inputs, "__name__", "")
    fixed = as_inputs(inputs)
    return (lambda step: placed(fixed)), fixed.description


def accepts_argument(function: Callable) -> bool:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in parameters)


def to_device(value: Any, device: Any, dtype: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        if dtype is not None and value.is_floating_point():
            return value.to(device=device, dtype=dtype)
        return value.to(device) if value.device != device else value
    if isinstance(value, tuple):
        return tuple(to_device(item, device, dtype) for item in value)
    if isinstance(value, list):
        return [to_device(item, device, dtype) for item in value]
    if isinstance(value, dict):
        return {key: to_device(item, device, dtype) for key, item in value.items()}
    return value


def measure_model(call: Any, model: Any, make_inputs: Callable[[int], Any], *, loss: Any, device: Any, steps: int,
                  seed: int | None, train: bool, thresholds: Thresholds, wrap: str = "none", world_size: int = 1,
                  inputs_description: str = "", dtype: Any = None, source_path: str = "",
                  fallback_line: int = 1, layout: Any = None, model_class: type | None = None) -> ProbeReport:
    """Measure an already placed (and possibly wrapped) model; raises ProbeError.

    `model_class` is the model's class before wrapping (FSDP2 swaps in a subclass of its own).
    """
    from reslint.probing.devices import (
        is_out_of_memory,
        out_of_memory_message,
        release_memory,
    )
    from reslint.probing.diagnose import diagnose
    from reslint.probing.losses import LossError, loss_label, resolve_loss, vocabulary_sizes
    from reslint.probing.measure import ForwardFailed, Pass, run_pass
    from reslint.probing.structure import find_layout

    try:
        loss_function, loss_name = resolve_loss(loss, vocabulary_sizes(model), seed)
    except LossError as error:
        raise ProbeError(str(error)) from None
    layout = layout if layout is not None else find_layout(model)
    job = Pass(call=call, model=model, make_inputs=make_inputs, loss=loss_function, device=device, layout=layout,
               steps=steps, seed=seed, train=train)
    shown_dtype = str(dtype).removeprefix("torch.") if dtype is not None else parameter_dtype(model)
    try:
        measurement, diagnosis = run_pass(job, diagnose)
    except LossError as error:
        raise ProbeError(str(error)) from None
    except ForwardFailed as error:
        cause = error.error
        if is_out_of_memory(cause):
            release_memory(device)
            raise ProbeError(out_of_memory_message(cause, device, model, inputs_description, shown_dtype,
                                                   "running the forward and backward pass")) from cause
        raise ProbeError(one_line_error(error, source_path)) from error
    except Exception as error:
        if is_out_of_memory(error):
            release_memory(device)
            raise ProbeError(out_of_memory_message(error, device, model, inputs_description, shown_dtype,
                                                   "running the forward and backward pass")) from error
        raise
    model_class = model_class or type(model)
    report = build_report(measurement, layout, model_class, loss_label(loss_name, loss_function), device,
                          shown_dtype, steps, seed)
    report.world_size, report.wrap, report.inputs = world_size, wrap, inputs_description
    report.findings = findings_for(report, measurement, diagnosis, model, model_class, thresholds, source_path,
                                   fallback_line)
    return report


def parameter_dtype(model: Any) -> str:
    first = next(model.parameters(), None)
    return str(first.dtype).removeprefix("torch.") if first is not None else "float32"


def one_line_error(error: Any, source_path: str) -> str:
    """`the forward pass raised ValueError: boom at model.py:12`: the probed file's deepest frame, else the user's."""
    import traceback

    from reslint.discovery import display_path
    from reslint.probing.diagnose import user_frame
    from reslint.trace.loader import locate, one_line

    cause = error.error
    found = locate(cause, source_path) if source_path else None
    if found is not None:
        path, line = source_path, found.line
    else:
        path, line, _ = user_frame(list(traceback.extract_tb(cause.__traceback__)))
    where = f" at {display_path(path)}:{line}" if path else ""
    return f"{error.stage} raised {one_line(cause)}{where}"


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def build_report(measurement: Any, layout: Any, model_class: type, loss_kind: str, device: Any, dtype: str,
                 steps: int, seed: int | None) -> ProbeReport:
    from reslint.probing.structure import MODEL_GROUP, class_span, shown_path

    order = sorted((g for g in layout.groups if g in measurement.first_call), key=measurement.first_call.get)
    order += [g for g in layout.groups if g not in measurement.first_call]
    position = {group: index for index, group in enumerate(order)}
    registration = {name: index for index, name in enumerate(measurement.names)}
    parameters = []
    for index, name in enumerate(measurement.names):
        present = [step.grad_norms[index] for step in measurement.steps if step.grad_norms[index] is not None]
        parameters.append(ParameterStats(
            name=name,
            shape=measurement.shapes[index],
            grad_norm=mean(present) if present else None,
            param_norm=measurement.param_norms[index],
            group=layout.group_of.get(name, MODEL_GROUP),
            trainable=measurement.trainable[index],
        ))
    parameters.sort(key=lambda stats: (position.get(stats.group, len(order)), registration[stats.name]))
    stack_of = {block: stack.name for stack in layout.stacks for block in stack.blocks}
    blocks = []
    for index, group in enumerate(order):
        members = [stats for stats in parameters if stats.group == group]
        grads = [stats.grad_norm for stats in members if stats.grad_norm is not None]
        norms = [step.activation_norms[group] for step in measurement.steps if group in step.activation_norms]
        rms = [step.activation_rms[group] for step in measurement.steps if group in step.activation_rms]
        blocks.append(BlockStats(
            name=group,
            stack=stack_of.get(group, ""),
            index=index,
            parameters=[stats.name for stats in members],
            grad_norm=math.sqrt(sum(g * g for g in grads)) if grads else None,
            activation_norm=mean(norms) if norms else None,
            activation_rms=mean(rms) if rms else None,
            called=group in measurement.first_call or group == MODEL_GROUP,
        ))
    stacks = []
    for stack in layout.stacks:
        ordered = [block.name for block in blocks if block.name in set(stack.blocks)]
        inputs = [step.stack_input_rms[stack.name] for step in measurement.steps if stack.name in step.stack_input_rms]
        stacks.append(StackStats(name=stack.name, blocks=ordered, origin=stack.origin, path=shown_path(stack.path),
                                 line=stack.line, column=stack.column, label=stack.label,
                                 input_rms=mean(inputs) if inputs else None))
        members = [block for block in blocks if block.name in set(stack.blocks) and block.grad_norm is not None]
        if members and members[-1].grad_norm:
            for block in members:
                block.ratio_to_last = block.grad_norm / members[-1].grad_norm
    span = class_span(model_class)
    return ProbeReport(
        model=model_class.__name__,
        device=str(device),
        dtype=dtype,
        loss_kind=loss_kind,
        losses=[step.loss for step in measurement.steps],
        steps=steps,
        seed=seed,
        parameters=parameters,
        blocks=blocks,
        stacks=stacks,
        path=shown_path(span.path) if span else "",
    )


def findings_for(report: ProbeReport, measurement: Any, diagnosis: Any, model: Any, model_class: type,
                 thresholds: Thresholds, source_path: str, fallback_line: int) -> list:
    from reslint.discovery import display_path
    from reslint.probing.structure import Span, attribute_label, class_span, module_span
    from reslint.probing.verdicts import gradient_flow, non_finite, without_gradient

    def locate(path: str) -> Span | None:
        span = module_span(model, path)
        return Span(display_path(span.path), span.line, span.column) if span else None

    model_span = class_span(model_class)
    if model_span is not None:
        fallback = (display_path(model_span.path), model_span.line, 1)
    else:
        fallback = (display_path(source_path) if source_path else f"<{model_class.__name__}>", fallback_line, 1)
    if not report.path:
        report.path = fallback[0]

    def label(path: str) -> str:
        try:
            return attribute_label(model, path)
        except AttributeError:
            return path

    for stack in report.stacks:
        if not stack.path:
            stack.path, stack.line, stack.column = fallback
    findings = non_finite(report, diagnosis, locate, fallback)
    if not findings:
        findings = gradient_flow(report, thresholds)
    findings += without_gradient(report, measurement.called, measurement.watched, locate, label, fallback)
    return sorted(findings, key=lambda finding: finding.sort_key)
