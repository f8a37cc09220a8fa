"""RL601-RL604 from what the probe measured. Pure functions of the report; the thresholds are settings.

Defaults, and why:

- RL601 `vanishing-gradient-factor = 100`: the last block of a stack (output side) has a gradient
  norm at least 100 times its first block's. Healthy stacks measured at initialisation stay within
  a factor of a few (Pre-LN GPTs: under 3 over 12 blocks; Post-LN BERT-style: under 10), and
  Adam's per-parameter normalisation absorbs a factor of 10; two orders of magnitude mean the
  first blocks' gradients are in the noise of the last blocks' (and near fp16's floor).
- RL602 `exploding-gradient-factor = 100`: the first block's gradient norm is at least 100 times
  the last block's (gradients grow on their way back to the input).
- RL602 `activation-growth-factor = 100`: the RMS of the activation leaving the last block is at
  least 100 times the RMS entering the first block. A Pre-LN residual stream grows about like
  the square root of the depth (7x over 48 blocks), not by orders of magnitude.
- RL603 has no threshold: any NaN or Inf in the loss or a gradient.
- RL604 has no threshold: a trainable parameter whose `.grad` is None after backward. A gradient
  of exact zeros is not reported: a ReZero gate initialised to 0 legitimately zeroes its branch's
  gradients at the first step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from reslint.findings import Finding
from reslint.probing.diagnose import Diagnosis
from reslint.probing.report import BlockStats, ProbeReport, StackStats, is_finite
from reslint.probing.structure import MODEL_GROUP, Span

Locate = Callable[[str], "Span | None"]  # module path -> where it is constructed


@dataclass(frozen=True)
class Thresholds:
    vanishing_gradient_factor: float = 100.0
    exploding_gradient_factor: float = 100.0
    activation_growth_factor: float = 100.0


def number(value: float) -> str:
    if value == 0:
        return "0"
    if not math.isfinite(value):
        return str(value)
    if 0.01 <= abs(value) < 1000:
        return f"{value:.3g}"
    return f"{value:.2g}"


def factor(value: float) -> str:
    return f"{value:.3g}x" if value < 1000 else f"{value:.2g}x"


def stack_blocks(report: ProbeReport, stack: StackStats) -> list[BlockStats]:
    """The stack's blocks that ran and got a gradient, in forward order."""
    members = set(stack.blocks)
    return [block for block in report.blocks if block.name in members and block.called and block.grad_norm is not None]


def where(stack: StackStats) -> tuple[str, int, int]:
    return stack.path, stack.line or 1, stack.column or 1


def depth_text(stack: StackStats, count: int) -> str:
    return f"{count} blocks of {stack.label}" if stack.label else f"{count} blocks"


def gradient_flow(report: ProbeReport, thresholds: Thresholds) -> list[Finding]:
    findings = []
    for stack in report.stacks:
        blocks = stack_blocks(report, stack)
        if len(blocks) < 2:
            continue
        first, last = blocks[0], blocks[-1]
        if not (is_finite(first.grad_norm) and is_finite(last.grad_norm)):
            continue
        path, line, column = where(stack)
        span = depth_text(stack, len(blocks))
        if last.grad_norm > 0 and first.grad_norm * thresholds.vanishing_gradient_factor <= last.grad_norm:
            fall = "to 0" if first.grad_norm == 0 else factor(last.grad_norm / first.grad_norm)
            message = (f"gradient norm falls {fall} from {last.name} ({number(last.grad_norm)}) to {first.name} "
                       f"({number(first.grad_norm)}) over the {span} (vanishing-gradient-factor "
                       f"{thresholds.vanishing_gradient_factor:g}): the blocks near the input barely learn; "
                       "wrap each block in a residual connection (x + F(norm(x)), Pre-LN), or fix the initialisation scale")
            findings.append(Finding("RL601", message, path, line, column, symbol=stack.name, engine="probe"))
        growth = []
        if first.grad_norm > 0 and last.grad_norm * thresholds.exploding_gradient_factor <= first.grad_norm:
            rise = "from 0" if last.grad_norm == 0 else factor(first.grad_norm / last.grad_norm)
            growth.append(f"gradient norm grows {rise} from {last.name} ({number(last.grad_norm)}) to "
                          f"{first.name} ({number(first.grad_norm)}) (exploding-gradient-factor "
                          f"{thresholds.exploding_gradient_factor:g})")
        output_rms = last.activation_rms
        if (is_finite(stack.input_rms) and is_finite(output_rms) and stack.input_rms > 0
                and output_rms >= stack.input_rms * thresholds.activation_growth_factor):
            growth.append(f"activation RMS grows {factor(output_rms / stack.input_rms)} from the input of {first.name} "
                          f"({number(stack.input_rms)}) to the output of {last.name} ({number(output_rms)}) "
                          f"(activation-growth-factor {thresholds.activation_growth_factor:g})")
        if growth:
            message = ("; ".join(growth) + f" over the {span}: lower the initialisation scale (std about "
                       "1/sqrt(fan_in); scale residual-branch outputs by 1/sqrt(2 * depth) as GPT-2 does), "
                       "normalise the input of every branch (Pre-LN with a final norm), or gate the branches (ReZero)")
            findings.append(Finding("RL602", message, path, line, column, symbol=stack.name, engine="probe"))
    return findings


def listed(names: list[str], limit: int = 3) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def non_finite(report: ProbeReport, diagnosis: Diagnosis | None, locate: Locate,
               fallback: tuple[str, int, int]) -> list[Finding]:
    bad_values = [p.name for p in report.parameters if not is_finite(p.param_norm)]
    step = diagnosis.step if diagnosis is not None else None
    hit = [p for p in report.parameters if p.grad_norm is not None and not math.isfinite(p.grad_norm)]
    loss_value = report.losses[step] if step is not None and step < len(report.losses) else report.loss
    if not hit and math.isfinite(loss_value) and not bad_values:
        return []
    parts = []
    if not math.isfinite(loss_value):
        parts.append(f"loss is {loss_value}" + (f" at step {step + 1} of {report.steps}" if report.steps > 1 else ""))
    with_grads = [p for p in report.parameters if p.grad_norm is not None]
    first_hit = None
    if hit:
        kinds = "NaN" if any(math.isnan(p.grad_norm) for p in hit) else "Inf"
        hit_names = {p.name for p in hit}
        order = [name for name in (diagnosis.backward_order if diagnosis else []) if name in hit_names]
        first_hit = order[0] if order else hit[-1].name
        parts.append(f"{len(hit)} of {len(with_grads)} parameters have {kinds} gradients "
                     f"({listed([p.name for p in hit])}); first hit in the backward pass: {first_hit}")
    if bad_values:
        parts.append(f"parameters already hold NaN/Inf values: {listed(bad_values)}")
    location = None
    if diagnosis is not None:
        if diagnosis.inputs_nonfinite:
            parts.append("the inputs contain NaN/Inf")
        origin = diagnosis.forward or diagnosis.backward
        if origin is not None:
            label = "NaN" if origin.kind == "nan" else "Inf"
            at = f" at {shown(origin.path)}:{origin.line}" if origin.path else ""
            if origin is diagnosis.forward:
                parts.append(f"first {label} produced by {origin.operation} in the forward pass{at}")
            else:
                parts.append(f"the forward pass is finite; first {label} produced by {origin.operation}{at}")
            if origin.path:
                location = (shown(origin.path), origin.line, origin.column)
    if location is None and first_hit is not None:
        span = locate(first_hit)
        if span is not None:
            location = (span.path, span.line, span.column)
    path, line, column = location or fallback
    message = ("; ".join(parts) + ": make that operation finite (an all -inf softmax row: fill with "
               "torch.finfo(dtype).min; log/sqrt/division of 0: add eps; fp16 overflow: bfloat16 or smaller "
               "activations), then lower the learning rate if the weights themselves overflow")
    return [Finding("RL603", message, path, line, column, symbol=first_hit or "", engine="probe")]


def shown(path: str) -> str:
    from reslint.discovery import display_path

    return display_path(path) if path else path


def without_gradient(report: ProbeReport, called: set[str], watched: set[str], locate: Locate,
                     label: Callable[[str], str], fallback: tuple[str, int, int]) -> list[Finding]:
    """RL604: trainable parameters whose .grad is None, one finding per place that builds them."""
    missing = [p for p in report.parameters if p.trainable and p.grad_norm is None]
    units: dict[tuple, list[tuple[str, str]]] = {}
    for stats in missing:
        owner = stats.name.rpartition(".")[0]
        unit, never_called = owner, False
        parts = owner.split(".") if owner else []
        for depth in range(1, len(parts) + 1):
            ancestor = ".".join(parts[:depth])
            if ancestor in watched and ancestor not in called:
                unit, never_called = ancestor, True
                break
        span = locate(unit) if unit else None
        key = (span.path, span.line, span.column) if span else fallback
        units.setdefault((key, never_called, label(unit) if unit else MODEL_GROUP), []).append(
            (stats.name, shape_text(stats.shape)))
    findings = []
    for (key, never_called, unit_label), parameters in units.items():
        names = [f"{name} {shape}" for name, shape in parameters]
        subject = listed(names) + " received no gradient"
        if never_called:
            why = (f"{unit_label} is never called in forward; call it, delete it, or freeze it "
                   "(requires_grad_(False)) if it is frozen on purpose")
        else:
            why = (f"{unit_label} runs but its output does not reach the loss (dropped, detached, or computed "
                   "under no_grad); use the output, move the cut, or freeze it (requires_grad_(False))")
        path, line, column = key
        findings.append(Finding("RL604", f"{subject}: {why}", path, line, column,
                                symbol=parameters[0][0].rpartition(".")[0], engine="probe"))
    return findings


def shape_text(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(dim) for dim in shape) + ("," if len(shape) == 1 else "") + ")"
