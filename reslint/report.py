"""The report stage's data: what `reslint check`, `reslint.check()` and `reslint.check_model()` return.

The reporters (reslint.reporters) render a `Report`; `Report.write` picks one by output format.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Callable, TextIO

from reslint.discovery import Skipped
from reslint.findings import Finding, ModelSummary, TraceOutcome
from reslint.settings import Settings


@dataclass(frozen=True)
class InternalError:
    """An exception raised while analysing one file; the run goes on with the other files."""

    path: str
    error: str  # "ValueError: message"
    traceback: str


@dataclass
class Report:
    """The result of `reslint check`, `reslint.check()` or `reslint.check_model()`.

    `findings` (sorted by path, line, column, code) are `Finding` dataclasses whose `to_dict()` has
    DESIGN.md's JSON keys; `models` are the per-model summaries (stacks, depth, norm placement,
    final norm, engine); `internal_errors` are files reslint itself failed on. `settings` are the
    resolved settings the check ran with (the config's `fail-on` is `settings.fail_on`).
    """

    findings: list[Finding] = field(default_factory=list)
    models: list[ModelSummary] = field(default_factory=list)
    files_checked: int = 0
    files_skipped: int = 0  # of files_checked: the pre-filter found no model or training code in them
    fixed: int | None = None  # findings `--fix` repaired before this report was made; None: no --fix
    internal_errors: list[InternalError] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)  # paths discovery did not check, with the reason
    traces: list[TraceOutcome] = field(default_factory=list)  # the full check: each model it tried, traced or not
    settings: Settings = field(default_factory=Settings, repr=False, compare=False)
    # The text of checked sources that are not files on disk (stdin), for the code frames: {path: text}
    texts: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    # A static check's fixes, checked by the workers beside each file's analysis: {path: FileFixes}
    prepared_fixes: dict = field(default_factory=dict, repr=False, compare=False)

    def defer_models(self, finish: Callable[[list[ModelSummary]], list[ModelSummary]]) -> None:
        """`models` becomes `finish(models)` when first read: the project stage's part of the summaries (warmup
        line, final norms decided across files) reads other files, and text output without --show-models never
        reads the summaries."""
        self.__dict__["_finish_models"] = finish

    def count(self, severity: str) -> int:
        """How many findings have this effective severity ("info", "warning" or "error")."""
        return sum(1 for finding in self.findings if finding.effective_severity == severity)

    def fails(self, fail_on: str | None = None) -> bool:
        """Whether a finding is at or above `fail_on` (default: the settings', "warning" unless configured)."""
        threshold = (fail_on or self.settings.fail_on).lower()
        return any(finding.at_least(threshold) for finding in self.findings)

    def exit_code(self, fail_on: str | None = None) -> int:
        """What `reslint check` exits with: 2 if reslint failed on a file, 1 if `fails(fail_on)`, else 0."""
        if self.internal_errors:
            return 2
        return 1 if self.fails(fail_on) else 0

    def write(self, stream: TextIO, output_format: str = "text", *, statistics: bool | None = None,
              show_models: bool | None = None, quiet: bool | None = None) -> None:
        """Write the report as `reslint check --output-format` does: "text" (each finding with its source
        line; colored on a terminal unless NO_COLOR is set), "concise" (one line per finding), "json",
        "sarif" or "github"; `statistics`: counts per code (text, json); `show_models`: the per-model
        summary in text (default: shown); `quiet`: text with the findings only."""
        from reslint.errors import UsageError
        from reslint.reporters import FORMATS, render

        if output_format.lower() not in FORMATS:
            raise UsageError(f"unknown output format {output_format!r} (expected one of {', '.join(FORMATS)})")
        options = {"statistics": statistics, "show_models": show_models, "quiet": quiet}
        settings = dataclasses.replace(self.settings, **{key: value for key, value in options.items() if value is not None})
        render(self, output_format.lower(), settings, stream)

    def render(self, output_format: str = "text", *, statistics: bool | None = None,
               show_models: bool | None = None, quiet: bool | None = None) -> str:
        """The report in one output format as a string (text without color); see `write`."""
        import io

        buffer = io.StringIO()
        self.write(buffer, output_format, statistics=statistics, show_models=show_models, quiet=quiet)
        return buffer.getvalue()

    def to_dict(self) -> dict:
        """The JSON document of `--output-format json`: version, findings, models, summary."""
        from reslint.reporters.json import report_document

        return report_document(self)


def _finished_models(report: Report) -> list[ModelSummary]:
    finish = report.__dict__.pop("_finish_models", None)
    if finish is not None:
        report.__dict__["_models"] = finish(report.__dict__["_models"])
    return report.__dict__["_models"]


def _set_models(report: Report, models: list[ModelSummary]) -> None:
    report.__dict__["_models"] = models


# A property under the dataclass field: __init__, replace(), asdict() and == all read and write through it.
Report.models = property(_finished_models, _set_models, doc="The per-model summaries.")  # type: ignore[assignment]
