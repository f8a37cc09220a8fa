"""`reslint check`'s pipeline: discover → (cache | analyse) → suppress → filter → dedupe → sort."""

from __future__ import annotations

import os
import traceback
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Iterable

from reslint.cache import FileCache
from reslint.discovery import Skipped, SourceFile, find_sources, matches_glob
from reslint.findings import FileResult, Finding, ModelSummary
from reslint.settings import Settings
from reslint.suppression import filter_suppressed


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


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    models: list[ModelSummary] = field(default_factory=list)
    files_checked: int = 0
    internal_errors: list[InternalError] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)  # paths discovery did not check, with the reason

    def count(self, severity: str) -> int:
        return sum(1 for finding in self.findings if finding.effective_severity == severity)

    def fails(self, fail_on: str) -> bool:
        return any(finding.at_least(fail_on) for finding in self.findings)


def check_paths(paths: Iterable[str], settings: Settings) -> Report:
    """Check files and directories; raises DiscoveryError for a path that does not exist."""
    discovery = find_sources(paths, settings.root, settings.exclude)
    report = check_sources(discovery.sources, settings)
    report.skipped = discovery.skipped
    return report


def check_sources(sources: list[SourceFile], settings: Settings) -> Report:
    jobs = settings.jobs or os.cpu_count() or 1
    if len(sources) > 1 and jobs > 1:
        preload_engine()
        with ProcessPoolExecutor(max_workers=min(jobs, len(sources))) as pool:
            chunksize = max(1, len(sources) // (min(jobs, len(sources)) * 4))
            outcomes = list(pool.map(check_source, sources, [settings] * len(sources), chunksize=chunksize))
    else:
        outcomes = [check_source(source, settings) for source in sources]
    return merge(outcomes, len(sources))


def preload_engine() -> None:
    """Import the engine before forking, so workers share it instead of each importing libcst."""
    try:
        import libcst  # noqa: F401
        import reslint.rules  # noqa: F401
        import reslint.static.engine  # noqa: F401
    except Exception:  # noqa: BLE001 - a broken engine is reported per file by the workers
        pass


def merge(outcomes: list[FileOutcome], files_checked: int) -> Report:
    report = Report(files_checked=files_checked)
    for outcome in outcomes:
        report.findings.extend(outcome.findings)
        report.models.extend(outcome.models)
        if outcome.error is not None:
            report.internal_errors.append(outcome.error)
    report.findings = dedupe(sorted(report.findings, key=lambda finding: finding.sort_key))
    report.models.sort(key=lambda model: (model.path, model.line, model.name))
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


def check_source(source: SourceFile, settings: Settings) -> FileOutcome:
    """Everything for one file; runs in a worker process, so it never raises."""
    try:
        result, data = analyse_source(source, settings)
        findings = filter_suppressed(result.findings, decoded(data)) if result.findings else []
        findings = [finding for finding in findings if is_reported(finding, source, settings)]
        return FileOutcome(findings=findings, models=list(result.models))
    except Exception as error:  # noqa: BLE001 - one broken file must not end the run
        return FileOutcome(error=InternalError(
            path=source.display,
            error=f"{type(error).__name__}: {error}",
            traceback=traceback.format_exc(),
        ))


def analyse_source(source: SourceFile, settings: Settings) -> tuple[FileResult, bytes | None]:
    """The file's unfiltered result (from the cache when possible) and its bytes (None: unreadable)."""
    from reslint.analysis import analyze_file

    try:
        with open(source.path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        reason = error.strerror or str(error)
        return FileResult(source.display, [Finding("RL901", f"cannot read file: {reason}", source.display, 1, 1)]), None
    cache = FileCache(settings.root, settings) if settings.cache else None
    result = cache.load(source.display, data) if cache else None
    if result is None:
        result = analyze_file(source.display, data, settings)
        if cache and result.cacheable:
            cache.store(source.display, data, result)
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

