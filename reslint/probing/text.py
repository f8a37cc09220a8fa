"""The probe's text output: a header, one table row per parameter in depth order, a line per stack, the findings.

Columns: block (on the first row of each group), parameter, shape, grad norm, param norm,
grad/param, "vs last" (for a block of a stack: this gradient norm over the same parameter's in
the stack's last block), and a bar whose length is the gradient norm on a log scale.
"""

from __future__ import annotations

import math
from typing import TextIO

from reslint.findings import Finding
from reslint.probing.report import ProbeReport, comparison_rows
from reslint.reporters.common import plural
from reslint.reporters.text import BOLD, Painter, finding_line, use_color

BAR_WIDTH = 24
BLOCKS = " ▏▎▍▌▋▊▉█"


def render_text(report: ProbeReport, stream: TextIO, compared: ProbeReport | None = None) -> None:
    paint = Painter(use_color(stream))
    findings = list(report.findings) + (list(compared.findings) if compared is not None else [])
    lines = [paint(header(report), BOLD)]
    if report.inputs:
        lines.append(f"inputs: {report.inputs}")
    lines.append("")
    lines.extend(table(report))
    stacks = stack_lines(report)
    if stacks:
        lines.append("")
        lines.extend(stacks)
    lines.extend(f"note: {note}" for note in report.notes)
    if compared is not None:
        lines.append("")
        lines.extend(comparison_lines(report, compared))
    if findings:
        lines.append("")
        lines.extend(finding_line(finding, paint) for finding in findings)
    lines.append("")
    lines.append(paint(summary(findings), BOLD))
    stream.write("\n".join(lines) + "\n")


def name_of(report: ProbeReport) -> str:
    """`GPT(GPTConfig(n_layer=2))`, or `without_residual() -> LessonStack` when the expression does not name the class."""
    expression = report.expression
    if not expression or expression == report.model:
        return report.model
    if expression.startswith(report.model + "("):
        return expression
    return f"{expression} -> {report.model}"


def header(report: ProbeReport) -> str:
    where = f" ({report.path})" if report.path else ""
    steps = plural(report.steps, "step")
    seed = f", seed {report.seed}" if report.seed is not None else ""
    world = f", {report.world_size} ranks ({report.wrap})" if report.world_size > 1 else ""
    return (f"reslint probe: {name_of(report)}{where} on {report.device}, {report.dtype}{world}, "
            f"loss {report.loss_kind} = {short(report.loss)}, {steps}{seed}")


def short(value: float | None) -> str:
    if value is None:
        return "-"
    if not math.isfinite(value):
        return str(value)
    return f"{value:.6g}"


def counterpart_ratios(report: ProbeReport) -> dict[str, float]:
    """parameter -> its gradient norm over the same parameter's in the last block of its stack."""
    ratios: dict[str, float] = {}
    grads = {p.name: p.grad_norm for p in report.parameters}
    for stack in report.stacks:
        called = [block for block in report.blocks if block.name in set(stack.blocks) and block.grad_norm is not None]
        if len(called) < 2:
            continue
        last = called[-1].name
        for block in called:
            for name in block.parameters:
                relative = name[len(block.name) + 1:]
                reference = grads.get(f"{last}.{relative}")
                value = grads.get(name)
                if reference and value is not None and math.isfinite(reference):
                    ratios[name] = value / reference
    return ratios


def bar(value: float | None, low: float, high: float) -> str:
    if value is None or not math.isfinite(value) or value <= 0:
        return ""
    span = max(high - low, 1.0)  # at least one decade, so that equal norms do not look dramatic
    eighths = round(8 * (1 + (BAR_WIDTH - 1) * (math.log10(value) - (high - span)) / span))
    eighths = max(1, min(eighths, 8 * BAR_WIDTH))
    return "█" * (eighths // 8) + (BLOCKS[eighths % 8] if eighths % 8 else "")


def table(report: ProbeReport) -> list[str]:
    ratios = counterpart_ratios(report)
    positive = [p.grad_norm for p in report.parameters
                if p.grad_norm is not None and math.isfinite(p.grad_norm) and p.grad_norm > 0]
    low = math.log10(min(positive)) if positive else 0.0
    high = math.log10(max(positive)) if positive else 0.0
    rows = [("block", "parameter", "shape", "grad norm", "param norm", "grad/param", "vs last", "grad norm (log)")]
    previous = None
    for stats in report.parameters:
        group = stats.group if stats.group != previous else ""
        previous = stats.group
        grad = "no grad" if stats.grad_norm is None else short(stats.grad_norm)
        if not stats.trainable:
            grad = "frozen"
        ratio = ratios.get(stats.name)
        rows.append((
            group,
            stats.name,
            "(" + ", ".join(map(str, stats.shape)) + ("," if len(stats.shape) == 1 else "") + ")",
            grad,
            short(stats.param_norm),
            short(stats.ratio) if stats.ratio is not None and stats.param_norm else "-",
            (f"{ratio:.3g}x" if math.isfinite(ratio) else short(ratio)) if ratio is not None else "",
            bar(stats.grad_norm, low, high),
        ))
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    right = {3, 4, 5, 6}
    lines = []
    for row in rows:
        cells = [cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(row)]
        lines.append("  ".join(cells).rstrip())
    return lines


def stack_lines(report: ProbeReport) -> list[str]:
    lines = []
    by_name = {block.name: block for block in report.blocks}
    for stack in report.stacks:
        blocks = [by_name[name] for name in stack.blocks if name in by_name and by_name[name].grad_norm is not None]
        if not blocks:
            continue
        label = stack.label or stack.name or "blocks"
        lines.append(f"stack {label}: {plural(len(stack.blocks), 'block')}, input side to output side")
        grads = " · ".join(f"{block.name} {short3(block.grad_norm)}" for block in elided(blocks))
        ratio = (blocks[0].grad_norm / blocks[-1].grad_norm
                 if len(blocks) > 1 and blocks[-1].grad_norm and math.isfinite(blocks[-1].grad_norm) else None)
        first_vs_last = f"   (first/last {ratio:.3g}x)" if ratio is not None and math.isfinite(ratio) else ""
        lines.append(f"  grad norm       {grads}{first_vs_last}")
        rms = [block for block in blocks if block.activation_rms is not None]
        if rms:
            entry = f"input {short3(stack.input_rms)} · " if stack.input_rms is not None else ""
            lines.append(f"  activation rms  {entry}" + " · ".join(f"{block.name} {short3(block.activation_rms)}"
                                                                 for block in elided(rms)))
    return lines


def elided(blocks: list, keep: int = 6) -> list:
    """At most `keep` blocks, evenly spaced, always the first and the last."""
    if len(blocks) <= keep:
        return blocks
    indices = sorted({round(i * (len(blocks) - 1) / (keep - 1)) for i in range(keep)})
    return [blocks[i] for i in indices]


def short3(value: float | None) -> str:
    if value is None:
        return "-"
    if not math.isfinite(value):
        return str(value)
    if value == 0 or 0.01 <= abs(value) < 1000:
        return f"{value:.3g}"
    return f"{value:.2g}"


def comparison_lines(report: ProbeReport, compared: ProbeReport) -> list[str]:
    """The lessons' comparison: each parameter's gradient norm in both models, and their ratio."""
    mine = report.expression or report.model
    theirs = compared.expression or compared.model
    lines = [f"compared with {name_of(compared)}: same inputs, loss and seed; "
             f"loss {compared.loss_kind} = {short(compared.loss)}"]
    rows = [("parameter", f"grad norm, {mine}", f"grad norm, {theirs}", "ratio")]
    for name, here, there, ratio in comparison_rows(report, compared):
        shown = "" if ratio is None else (f"{ratio:.3g}x" if math.isfinite(ratio) else short(ratio))
        rows.append((name, "no grad" if here is None else short(here), "no grad" if there is None else short(there), shown))
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    for row in rows:
        lines.append("  ".join([row[0].ljust(widths[0])] + [cell.rjust(width) for cell, width in zip(row[1:], widths[1:])]))
    return lines


def summary(findings: list[Finding]) -> str:
    if not findings:
        return "No gradient-flow problems found (RL601-RL604)."
    counts = ", ".join((
        plural(sum(1 for f in findings if f.effective_severity == "error"), "error"),
        plural(sum(1 for f in findings if f.effective_severity == "warning"), "warning"),
        plural(sum(1 for f in findings if f.effective_severity == "info"), "info"),
    ))
    return f"Found {plural(len(findings), 'finding')} ({counts})."
