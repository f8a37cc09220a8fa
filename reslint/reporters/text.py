"""Human output: `path:line:col: CODE [severity] message`, a model summary, and a total."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, TextIO

from reslint.catalog import RULES
from reslint.findings import Finding, ModelSummary, placement_label, stack_summary_line
from reslint.prefilter import SKIP_REASON
from reslint.reporters.common import counts_by_code, plural, skipped_counts, trace_counts
from reslint.reporters.escaping import terminal_safe
from reslint.settings import Settings

if TYPE_CHECKING:
    from reslint.report import Report

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


def render_text(report: Report, settings: Settings, stream: TextIO, code_frames: bool = True) -> None:
    """The text output: findings (each with its source line under it unless `code_frames` is off: the
    concise format), the model summary when `settings.show_models`, skipped paths and a total line;
    with `settings.quiet` the findings only."""
    paint = Painter(use_color(stream))
    if settings.statistics:
        lines = statistics_lines(report)
    elif code_frames:
        frames = SourceLines(report.texts)
        lines = [line for f in report.findings for line in (finding_line(f, paint), *frames.frame(f, paint))]
        if lines and not lines[-1]:
            lines.pop()
    else:
        lines = [finding_line(f, paint) for f in report.findings]
    if settings.quiet:
        if lines:
            stream.write("\n".join(lines) + "\n")
        return
    models = model_lines(report.models) if settings.show_models else []
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
    lines.extend(fix_lines(report))
    styles = (BOLD, RESET, *SEVERITY_COLORS.values()) if paint.enabled else ()
    stream.write("\n".join(terminal_safe(line, styles) for line in lines) + "\n")


def finding_line(finding: Finding, paint: Painter) -> str:
    severity = finding.effective_severity
    color = SEVERITY_COLORS[severity]
    location = paint(f"{finding.path}:{finding.line}:{finding.column}:", BOLD)
    marker = "" if finding.fix is None else " [*]" if finding.fix.safe else " [unsafe fix]"
    return f"{location} {paint(finding.code, BOLD, color)} {paint(f'[{severity}]', color)}{marker} {finding.message}"


def fix_lines(report: Report) -> list[str]:
    """How many findings `--fix` would repair (ruff's `[*] N fixable`), and what `--fix` did."""
    lines = []
    if report.fixed is not None:
        lines.append(f"{report.fixed} fixed, {len(report.findings)} remaining.")
    safe = sum(1 for finding in report.findings if finding.fix is not None and finding.fix.safe)
    unsafe = sum(1 for finding in report.findings if finding.fix is not None and not finding.fix.safe)
    if safe or unsafe:
        more = f" ({unsafe} more with --unsafe-fixes)" if unsafe else ""
        lines.append(f"[*] {safe} fixable with --fix{more}.")
    return lines


class SourceLines:
    """The checked files' lines, read once per file, for the code frames under findings."""

    def __init__(self, texts: dict[str, str]) -> None:
        self.files: dict[str, list[str] | None] = {path: text.splitlines() for path, text in texts.items()}

    def line(self, path: str, number: int) -> str | None:
        if path not in self.files:
            try:
                with open(path, encoding="utf-8", errors="replace") as handle:
                    self.files[path] = handle.read().splitlines()
            except (OSError, ValueError):
                self.files[path] = None  # stdin, a file gone since, a path of check_model's class
        lines = self.files[path]
        return lines[number - 1] if lines is not None and 0 < number <= len(lines) else None

    def frame(self, finding: Finding, paint: Painter) -> list[str]:
        """ruff's full output: the offending line under the finding, a caret at its column."""
        source = self.line(finding.path, finding.line)
        if source is None or not source.strip():
            return []
        number = str(finding.line)
        gutter = " " * len(number)
        caret = " " * len(printable(source[:max(0, finding.column - 1)]))
        marker = paint(f"^ {finding.code}", BOLD, SEVERITY_COLORS[finding.effective_severity])
        return [f"{gutter} |", f"{number} | {printable(source)}", f"{gutter} | {caret}{marker}", f"{gutter} |", ""]


def printable(text: str) -> str:
    """A source line as the terminal should show it: tabs as spaces, control characters escaped."""
    text = text.expandtabs(4)
    return "".join(char if char.isprintable() else ascii(char)[1:-1] for char in text)


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
        engine = f"{model.engine}, built from {model.built_from}" if model.built_from else model.engine
        for stack in model.stacks:
            lines.append(f"{location} {stack_summary_line(model, stack)} [{engine}]")
        if not model.stacks and model.placement != "none":
            lines.append(f"{location} {model.name}: {placement_label(model.placement)} [{engine}]")
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
