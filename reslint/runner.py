"""`reslint check`'s pipeline: discover → (cache | analyse) → suppress → filter → dedupe → sort → link files."""

from __future__ import annotations

import dataclasses
import os
import signal
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, TextIO

from reslint.discovery import Skipped, SourceFile, find_sources, matches_glob, root_relative
from reslint.findings import FileResult, Finding, ModelSummary, TraceOutcome
from reslint.project_facts import FileLinks
from reslint.settings import Settings
from reslint.suppression import filter_suppressed

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor


@dataclass(frozen=True)
class InternalError:
    """An exception raised while analysing one file; the run goes on with the other files."""

    path: str
    error: str  # "ValueError: message"
    traceback: str


@dataclass
class FileOutcome:
    findings: list[Finding] = field(default_factory=list)
    models: list[ModelSummary] = field(default_factory=list)
    error: InternalError | None = None
    links: FileLinks | None = None
    skipped: bool = False
    display: str = ""  # the file it is about (outcomes come back in another order than the sources)
    traces: list[TraceOutcome] = field(default_factory=list)


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
    internal_errors: list[InternalError] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)  # paths discovery did not check, with the reason
    traces: list[TraceOutcome] = field(default_factory=list)  # the full check: each model it tried, traced or not
    settings: Settings = field(default_factory=Settings, repr=False, compare=False)

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

    def write(self, stream: TextIO, output_format: str = "text", *, statistics: bool | None = None) -> None:
        """Write the report as `reslint check --output-format` does: "text" (colored on a terminal
        unless NO_COLOR is set), "json", "sarif" or "github"; `statistics`: counts per code (text, json)."""
        from reslint.errors import UsageError
        from reslint.reporters import FORMATS, render

        if output_format.lower() not in FORMATS:
            raise UsageError(f"unknown output format {output_format!r} (expected one of {', '.join(FORMATS)})")
        settings = self.settings if statistics is None else dataclasses.replace(self.settings, statistics=statistics)
        render(self, output_format.lower(), settings, stream)

    def render(self, output_format: str = "text", *, statistics: bool | None = None) -> str:
        """The report in one output format as a string (text without color); see `write`."""
        import io

        buffer = io.StringIO()
        self.write(buffer, output_format, statistics=statistics)
        return buffer.getvalue()

    def to_dict(self) -> dict:
        """The JSON document of `--output-format json`: version, findings, models, summary."""
        from reslint.reporters.json import report_document

        return report_document(self)


def check_paths(paths: Iterable[str], settings: Settings) -> Report:
    """Check files and directories; raises DiscoveryError for a path that does not exist."""
    discovery = find_sources(paths, settings.root, settings.exclude)
    report = check_sources(discovery.sources, settings)
    report.skipped = discovery.skipped
    return report


def check_sources(sources: list[SourceFile], settings: Settings) -> Report:
    outcomes: list[FileOutcome] = []
    pending = sources
    if settings.cache and len(sources) > 1:
        # Cache hits cost a read and a hash: answer them here, and start workers (which import the
        # engines) only for the files that need analysing.
        pending = []
        for source in sources:
            outcome = check_source(source, settings, cached_only=True)
            if outcome is None:
                pending.append(source)
            else:
                outcomes.append(outcome)
    jobs = settings.jobs or available_cpus()
    if len(pending) > 1 and jobs > 1:
        from concurrent.futures import ProcessPoolExecutor  # not imported on the one-file path

        preload_engine(settings)
        workers = min(jobs, len(pending))
        # Largest files first, in small chunks, so that no worker is left with a big file at the end;
        # the report is sorted afterwards, so the order of work never shows.
        ordered = sorted(pending, key=file_size, reverse=True)
        chunksize = max(1, min(8, len(pending) // (workers * 16)))
        pool = ProcessPoolExecutor(max_workers=workers, initializer=stop_on_sigterm)
        try:
            outcomes += pool.map(check_source, ordered, [settings] * len(ordered), chunksize=chunksize)
        except KeyboardInterrupt:
            stop_workers(pool)
            raise
        pool.shutdown()
    else:
        outcomes += [check_source(source, settings) for source in pending]
    report = merge(outcomes, len(sources))
    link_project(report, sources, outcomes, settings)
    return report


def available_cpus() -> int:
    """The CPUs this process may run on (a container's or taskset's limit, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def file_size(source: SourceFile) -> int:
    try:
        return os.path.getsize(source.path)
    except OSError:
        return 0


def link_project(report: Report, sources: list[SourceFile], outcomes: list[FileOutcome], settings: Settings) -> None:
    """The cross-file stage: RL301 findings and the warmup line of Post-LN models' summaries."""
    from reslint.project import Project, model_warmup, training_scripts
    from reslint.rules import rl301_post_ln_without_warmup

    project = Project(settings)
    by_display = {source.display: source for source in sources}
    for outcome in outcomes:
        if outcome.links is not None and outcome.display in by_display:
            project.add(by_display[outcome.display].path, outcome.display, outcome.links)
    train_everything = {source.display for source in sources
                        if any(matches_glob(source.relative, glob) for glob in settings.train)}
    for path in training_scripts(settings, {source.path for source in sources}):
        display = project.known(Path(path))
        project.links_of(display)
        train_everything.add(display)
    links = project.training_links({source.display for source in sources}, train_everything)
    findings = []
    for finding in rl301_post_ln_without_warmup.check(links):
        absolute = project.paths[finding.path]
        source = SourceFile(absolute, finding.path, root_relative(absolute, settings.root))
        if not is_reported(finding, source, settings):
            continue
        try:
            with open(absolute, "rb") as handle:
                text = decoded(handle.read())
        except OSError:
            text = None
        findings.extend(filter_suppressed([finding], text))
    if findings:
        report.findings = dedupe(sorted(report.findings + findings, key=lambda finding: finding.sort_key))
    report.models = [
        dataclasses.replace(model, warmup=model_warmup(project, links, model, settings.verbose))
        for model in report.models
    ]


def stop_on_sigterm() -> None:
    """In a worker: SIGTERM kills the child tracing user code, then the worker."""
    def stop(signum, frame):
        from reslint.isolation import kill_running_children

        kill_running_children()
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)


def stop_workers(pool: ProcessPoolExecutor) -> None:
    """Ctrl-C: drop the queued files and end the workers now instead of waiting for their files."""
    processes = list(getattr(pool, "_processes", {}).values())  # no public API for this
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(timeout=5)
        if process.is_alive():
            process.kill()


def preload_engine(settings: Settings) -> None:
    """Import the engines before forking, so workers share them instead of each importing them."""
    try:
        import libcst  # noqa: F401
        import reslint.rules  # noqa: F401
        import reslint.static.engine  # noqa: F401
    except Exception:  # noqa: BLE001 - a broken engine is reported per file by the workers
        pass
    if not settings.static:
        preload_torch()
    import gc

    gc.freeze()  # what is loaded now lives as long as the workers: their collector need not walk it


def preload_torch() -> None:
    """torch imports most of what tracing needs on first use (meta kernels, export: seconds); do that
    use once here, on meta tensors only, so no compute thread pool exists when the workers fork."""
    import contextlib
    import io
    import sys
    import warnings

    if "torch" not in sys.modules:  # the full check imported it already; without it there is no tracing
        return
    try:
        import torch
        import torch.export

        class Warmup(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.linear = torch.nn.Linear(2, 2)

            def forward(self, x):
                return self.linear(x) + x

        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()), \
                contextlib.redirect_stdout(io.StringIO()), torch.device("meta"):
            warnings.simplefilter("ignore")
            torch.export.export(Warmup(), (torch.empty(1, 2),), strict=False)
    except Exception:  # noqa: BLE001 - only a head start: the workers do without it
        pass


def merge(outcomes: list[FileOutcome], files_checked: int) -> Report:
    report = Report(files_checked=files_checked)
    for outcome in outcomes:
        report.findings.extend(outcome.findings)
        report.models.extend(outcome.models)
        report.traces.extend(outcome.traces)
        report.files_skipped += outcome.skipped
        if outcome.error is not None:
            report.internal_errors.append(outcome.error)
    report.findings = dedupe(sorted(report.findings, key=lambda finding: finding.sort_key))
    report.models.sort(key=lambda model: (model.path, model.line, model.name))
    report.traces.sort(key=lambda trace: (trace.path, trace.line, trace.name))
    report.internal_errors.sort(key=lambda error: error.path)
    return report


def dedupe(findings: list[Finding]) -> list[Finding]:
    """One finding per (path, line, code): both engines may report the same place."""
    seen: set[tuple[str, int, str]] = set()
    unique = []
    for finding in findings:
        key = (finding.path, finding.line, finding.code)
        if key not in seen:
            seen.add(key)
            unique.append(finding)
    return unique


def check_source(source: SourceFile, settings: Settings, cached_only: bool = False) -> FileOutcome | None:
    """Everything for one file; runs in a worker process, so it never raises.

    With `cached_only`, None unless the cache holds the file's result."""
    try:
        result, data = analyse_source(source, settings, cached_only)
        if result is None:
            return None
        findings = filter_suppressed(result.findings, decoded(data)) if result.findings else []
        findings = [finding for finding in findings if is_reported(finding, source, settings)]
        return FileOutcome(findings=findings, models=list(result.models), links=result.links,
                           skipped=result.skipped, display=source.display, traces=list(result.traces))
    except Exception as error:  # noqa: BLE001 - one broken file must not end the run
        return FileOutcome(error=InternalError(
            path=source.display,
            error=f"{type(error).__name__}: {error}",
            traceback=traceback.format_exc(),
        ), display=source.display)


def analyse_source(source: SourceFile, settings: Settings,
                   cached_only: bool = False) -> tuple[FileResult | None, bytes | None]:
    """The file's unfiltered result (from the cache when possible; with `cached_only`, None when it is
    not there) and its bytes (None: unreadable)."""
    from reslint.analysis import analyze_file

    try:
        with open(source.path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        if cached_only:
            return None, None
        reason = error.strerror or str(error)
        return FileResult(source.display, [Finding("RL901", f"cannot read file: {reason}", source.display, 1, 1)]), None
    cache = None
    if settings.cache:
        from reslint.cache import FileCache

        cache = FileCache(settings.root, settings)
    result = cache.load(source.display, data, source.path) if cache else None
    if result is None and cached_only:
        return None, data
    if result is None:
        result = analyze_file(source.display, data, settings)
        if cache and result.cacheable:
            cache.store(source.display, data, source.path, result)
    return result, data


def decoded(data: bytes | None) -> str | None:
    """The text the suppression comments are read from; None when the file cannot be decoded."""
    from reslint.analysis import decode_source

    if data is None:
        return None
    try:
        return decode_source(data)
    except (UnicodeDecodeError, SyntaxError, LookupError):
        return None


def is_reported(finding: Finding, source: SourceFile, settings: Settings) -> bool:
    if not settings.enabled(finding.code):
        return False
    return not any(
        finding.code in codes and matches_glob(source.relative, glob)
        for glob, codes in settings.per_file_ignores
    )

