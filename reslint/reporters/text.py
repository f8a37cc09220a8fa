"""Human output: `path:line:col: CODE [severity] message`, a model summary, and a total."""

from __future__ import annotations

import os
from typing import TextIO

from reslint.catalog import RULES
from reslint.findings import Finding, ModelSummary, placement_label, stack_summary_line
from reslint.prefilter import SKIP_REASON
from reslint.reporters.common import counts_by_code, plural, skipped_counts, trace_counts
from reslint.runner import Report
from reslint.settings import Settings

BOLD, RESET = "\033[1m", "\033[0m"
SEVERITY_COLORS = {"error": "\033[31m", "warning": "\033[33m", "info": "\033[36m"}


def use_color(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Painter:
    def __init__(self, enabled: bool):
        self.enabled = enabled

    def __call__(self, text: str, *styles: str) -> str:
        if not self.enabled or not styles:
            return text
        return "".join(styles) + text + RESET


def render_text(report: Report, settings: Settings, stream: TextIO) -> None:
    paint = Painter(use_color(stream))
    lines = statistics_lines(report) if settings.statistics else [finding_line(f, paint) for f in report.findings]
    models = model_lines(report.models)
    if models:
        if lines:
            lines.append("")
        lines.append(paint("Models:", BOLD))
        lines.extend("  " + line for line in models)
    if lines:
        lines.append("")
    lines.extend(trace_lines(report, settings.verbose))
    lines.extend(skipped_lines(report, settings.verbose))
    lines.append(summary_line(report, paint))
    stream.write("\n".join(lines) + "\n")


def finding_line(finding: Finding, paint: Painter) -> str:
    severity = finding.effective_severity
    color = SEVERITY_COLORS[severity]
    location = paint(f"{finding.path}:{finding.line}:{finding.column}:", BOLD)
    return f"{location} {paint(finding.code, BOLD, color)} {paint(f'[{severity}]', color)} {finding.message}"


def statistics_lines(report: Report) -> list[str]:
    counts = counts_by_code(report.findings)
    if not counts:
        return []
    width = max(len(str(count)) for _, count in counts)
    return [f"{count:>{width}}  {code}  {RULES[code].name}" for code, count in counts]


def model_lines(models: list[ModelSummary]) -> list[str]:
    lines = []
    for model in models:
        location = f"{model.path}:{model.line}:"
        for stack in model.stacks:
            lines.append(f"{location} {stack_summary_line(model, stack)} [{model.engine}]")
        if not model.stacks and model.placement != "none":
            lines.append(f"{location} {model.name}: {placement_label(model.placement)} [{model.engine}]")
        if model.stacks or model.placement != "none":
            lines.extend(f"    note: {note}" for note in model.notes)
            if model.warmup:
                lines.append(f"    warmup: {model.warmup}")
    return lines


def trace_lines(report: Report, verbose: bool) -> list[str]:
    """The full check's coverage: "Traced N of M models", and why the rest used the static facts."""
    if not report.traces:
        return []
    counts = trace_counts(report.traces)
    text = f"Traced {counts['models_traced']} of {plural(counts['models_total'], 'model')}"
    untraced = counts["models_total"] - counts["models_traced"]
    if untraced:
        reasons = ", ".join(f"{count} {kind}" for kind, count in counts["not_traced"].items())
        text += f"; static facts for {untraced} ({reasons}; see RL902/RL903)"
    if counts["files_not_imported"]:
        text += f"; {plural(counts['files_not_imported'], 'file')} not imported"
    lines = [text + "."]
    if verbose:
        lines.extend(f"  {trace.path}:{trace.line}: {trace.name or '(the file)'}: {trace.reason}"
                     for trace in report.traces if not trace.traced)
    return lines


def skipped_lines(report: Report, verbose: bool) -> list[str]:
    """What discovery did not check and why: no file is skipped silently."""
    if not report.skipped:
        return []
    reasons = ", ".join(f"{reason}: {count}" for reason, count in skipped_counts(report.skipped).items())
    hint = "" if verbose else "; --verbose lists them"
    lines = [f"Skipped {plural(len(report.skipped), 'path')} ({reasons}{hint})."]
    if verbose:
        lines.extend(f"  {entry.display}{'/' if entry.directory else ''}: {entry.reason}" for entry in report.skipped)
    return lines


def summary_line(report: Report, paint: Painter) -> str:
    files = plural(report.files_checked, "file")
    if report.files_skipped:
        files += f", {report.files_skipped} skipped: {SKIP_REASON}"
    if not report.findings:
        return paint(f"All checks passed! ({files})", BOLD)
    counts = ", ".join((
        plural(report.count("error"), "error"),
        plural(report.count("warning"), "warning"),
        plural(report.count("info"), "info"),
    ))
    if report.files_skipped:
        files = f"{plural(report.files_checked, 'file')} ({report.files_skipped} skipped: {SKIP_REASON})"
    return paint(f"Found {plural(len(report.findings), 'finding')} ({counts}) in {files}.", BOLD)
