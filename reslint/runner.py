"""`reslint check`'s pipeline: the discovered files → (cache | analyse: engines → facts → rules) → filter
(reslint.filtering) → link the files (the project stage: RL301, RL103 across files) → the Report."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import signal
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from reslint.analysis import analyse_source, collector_paused, preload_torch
from reslint.discovery import SourceFile, matches_glob, root_relative
from reslint.filtering import decoded, file_text, is_reported, reported, unique
from reslint.findings import FileResult, Finding, ModelSummary, StackSummary, TraceOutcome
from reslint.project_facts import FileLinks
from reslint.report import InternalError, Report
from reslint.settings import Settings
from reslint.suppression import unused_noqa_findings

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

    from reslint.fixes.prepared import FileFixes


# progress(done, total, phase): files done of total; phase "cache", "parsing", "tracing" or "linking"
Progress = Callable[[int, int, str], None]


@dataclass
class FileOutcome:
    findings: list[Finding] = field(default_factory=list)
    models: list[ModelSummary] = field(default_factory=list)
    error: InternalError | None = None
    links: FileLinks | None = None
    skipped: bool = False
    display: str = ""  # the file it is about (outcomes come back in another order than the sources)
    traces: list[TraceOutcome] = field(default_factory=list)
    fixes: FileFixes | None = None  # a static check's fixes of the file, checked beside its analysis


def check_sources(sources: list[SourceFile], settings: Settings, progress: Progress | None = None,
                  fixes: Callable | None = None) -> Report:
    """Check the files; `progress(done, total, phase)` hears of each file done (see api.check). `fixes`: a
    static check's workers also check the fixes of each file they analyse with it (fixes.apply.worker_fixes,
    passed in: the fixes come after the check; `Report.prepared_fixes`)."""
    check = functools.partial(check_source, fixes=fixes) if fixes is not None and settings.static else check_source
    new_project_run()
    tell = progress or (lambda done, total, phase: None)
    total = len(sources)
    outcomes: list[FileOutcome] = []
    pending = sources
    if settings.cache and len(sources) > 1:
        # Cache hits cost a read and a hash: answer them here, and start workers (which import the
        # engines) only for the files that need analysing.
        pending = []
        for source in sources:
            tell(len(outcomes), total, "cache")
            outcome = check(source, settings, cached_only=True)  # with the fixes the cache keeps beside the result
            if outcome is None:
                pending.append(source)
            else:
                outcomes.append(outcome)
    phase = "parsing" if settings.static else "tracing"
    tell(len(outcomes), total, phase)
    jobs = settings.jobs or available_cpus()
    scan = prebuilt_scan(pending, jobs)
    try:
        if len(pending) > 1 and jobs > 1:
            preload_engine(settings, pending)
            workers = min(jobs, len(pending))
            # Largest files first, one per task, so that no worker is left with a big file at the end;
            # the report is sorted afterwards, so the order of work never shows.
            ordered = sorted(pending, key=file_size, reverse=True)
            finished = [len(outcomes)]

            def one_more() -> None:
                finished[0] += 1
                tell(finished[0], total, phase)

            done, lost = run_pool(check, ordered, settings, workers, one_more)
            outcomes += done
            if lost:  # a worker died (a crash, the OOM killer): each unfinished file again, in its own child
                done, lost = run_pool(check_source_isolated, lost, settings, workers)
                outcomes += done + [stopped_outcome(source, settings, "the process checking it died") for source in lost]
        else:
            for source in pending:
                outcomes.append(check(source, settings))
                tell(len(outcomes), total, phase)
        tell(total, total, "linking")
        report = merge(outcomes, len(sources))
        report.prepared_fixes = {outcome.display: outcome.fixes for outcome in outcomes if outcome.fixes is not None}
        link_project(report, sources, outcomes, settings)
    finally:
        if scan is not None:
            scan.close()
    return report


def prebuilt_scan(pending: list[SourceFile], jobs: int):
    """The helper scanning the project once for a pool's workers (reslint.prebuilt_index), where they will inherit
    it: a pool of forked workers in a process of reslint's own (a caller's other threads make forking a
    helper unsafe), with a core to spare for it."""
    if len(pending) < 2 or jobs < 2 or not own_process or available_cpus() < 2:
        return None
    import multiprocessing

    if multiprocessing.get_start_method() != "fork":
        return None
    from reslint.prebuilt_index import start_prebuilt_scan

    return start_prebuilt_scan([source.path for source in pending])


def run_pool(check, sources: list[SourceFile], settings: Settings, workers: int,
             progress: Callable[[], None] = lambda: None) -> tuple[list[FileOutcome], list[SourceFile]]:
    """`check` for each source in a process pool: the outcomes, and the sources whose worker died
    before finishing them (the pool breaks then; the other files' outcomes are kept)."""
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    pool = ProcessPoolExecutor(max_workers=workers, initializer=stop_on_sigterm)
    outcomes, lost = [], []
    try:
        futures = {pool.submit(check, source, settings): source for source in sources}
        for future in completed(futures):
            try:
                outcomes.append(future.result())
                progress()
            except BrokenProcessPool:
                lost.append(futures[future])
    except KeyboardInterrupt:
        stop_workers(pool)
        raise
    pool.shutdown()
    return outcomes, sorted(lost, key=lambda source: source.display)


def completed(futures) -> Iterator:
    """The futures as they finish (`as_completed`), waited for in slices: Ctrl-C taken by another thread of
    this process (the pool's) runs its handler, KeyboardInterrupt, in the main thread only between two waits."""
    from concurrent.futures import FIRST_COMPLETED, wait

    from reslint.isolation import SIGNAL_POLL_SECONDS

    pending = set(futures)
    while pending:
        done, pending = wait(pending, timeout=SIGNAL_POLL_SECONDS, return_when=FIRST_COMPLETED)
        yield from done


def check_source_isolated(source: SourceFile, settings: Settings) -> FileOutcome:
    """check_source in a child process of its own: if the file kills it, only that file is lost."""
    from reslint.isolation import ChildFailure, run_isolated

    document = run_isolated(outcome_document, source, settings, timeout=None)
    if not isinstance(document, ChildFailure):
        try:
            return outcome_from_document(document, source)
        except (KeyError, TypeError, ValueError, AttributeError):
            document = ChildFailure("sent back a malformed result", "")
    return stopped_outcome(source, settings, f"the process checking it ended: {document.cause}")


def stopped_outcome(source: SourceFile, settings: Settings, why: str) -> FileOutcome:
    """A file whose check was lost: one RL904 finding says so, and the run goes on."""
    from reslint.analysis import limit_finding

    finding = limit_finding(f"not analysed: {why}; its findings are missing", source.display)
    return FileOutcome(findings=[finding] if is_reported(finding, source, settings) else [], display=source.display)


def outcome_document(source: SourceFile, settings: Settings) -> dict:
    outcome = check_source(source, settings)
    return {
        "findings": [finding.to_dict() for finding in outcome.findings],
        "models": [model.to_dict() for model in outcome.models],
        "error": dataclasses.asdict(outcome.error) if outcome.error else None,
        "links": outcome.links.to_dict() if outcome.links is not None else None,
        "skipped": outcome.skipped,
        "traces": [trace.to_dict() for trace in outcome.traces],
    }


def outcome_from_document(document: dict, source: SourceFile) -> FileOutcome:
    return FileOutcome(
        findings=[Finding.from_dict(finding) for finding in document["findings"]],
        models=[ModelSummary.from_dict(model) for model in document["models"]],
        error=InternalError(**document["error"]) if document["error"] else None,
        links=FileLinks.from_dict(document["links"]) if document["links"] is not None else None,
        skipped=bool(document["skipped"]),
        display=source.display,
        traces=[TraceOutcome.from_dict(trace) for trace in document["traces"]],
    )


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
    """The cross-file stage: RL301 findings, RL103 decided in the file that builds the stack's class, and the
    warmup line of Post-LN models' summaries (made when the summaries are first read: Report.defer_models)."""
    from reslint.project import Project, model_warmup, training_scripts
    from reslint.rules import run_project_rules

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
    report.findings = final_norm_findings(project, report.findings)
    findings = []
    for finding in run_project_rules(links, settings):
        # A file of the run is matched against per-file-ignores by its own root-relative path (stdin's is
        # its --stdin-filename's, not its temporary copy's); a training script found by the project stage by its path.
        absolute = project.paths[finding.path]
        source = by_display.get(finding.path) or SourceFile(absolute, finding.path, root_relative(absolute, settings.root))
        findings += reported([finding], source, file_text(source.path), settings)
    if findings:
        report.findings = unique(report.findings + findings)
    report.defer_models(lambda models: [
        dataclasses.replace(model, warmup=model_warmup(project, links, model, settings.verbose),
                            stacks=tuple(normed_elsewhere(project, model.path, stack) for stack in model.stacks))
        for model in models
    ])


def final_norm_findings(project, findings: list[Finding]) -> list[Finding]:
    """RL103 decided across files: dropped where the files building the stack's class normalise its stream;
    reported once, in the file of the stack, when a traced model of another file runs that stack."""
    at_stack = {(finding.path, finding.symbol) for finding in findings if finding.code == "RL103"
                and finding.symbol in getattr(project.files.get(finding.path), "open_streams", {})}
    for path, symbol in at_stack:
        project.link_builders(path, symbol)
    stacks = {symbol for _, symbol in at_stack}
    return [finding for finding in findings if finding.code != "RL103" or (
        not project.normalised_elsewhere(finding.path, finding.symbol)
        and ((finding.path, finding.symbol) in at_stack or finding.symbol not in stacks))]


def normed_elsewhere(project, path: str, stack: StackSummary) -> StackSummary:
    """A stack summary whose "final norm no" another file of the run overrules (it normalises the stream)."""
    links = project.files.get(path)
    if stack.final_norm is not False or links is None:
        return stack
    attribute = stack.attribute.removeprefix("self.")
    if any(key.endswith("." + attribute) and project.normalised_elsewhere(path, key) for key in links.open_streams):
        return dataclasses.replace(stack, final_norm=True)
    return stack


def stop_on_sigterm() -> None:
    """In a worker: SIGTERM kills the child tracing user code, then the worker. Ctrl-C is the parent's to handle
    (it reaches the whole process group): a worker that raised KeyboardInterrupt in its task would send it back
    through the result pipe while the parent terminates it, and a message cut halfway leaves the pool's
    manager thread reading forever."""
    global own_process
    own_process = True

    def stop(signum, frame):
        from reslint.isolation import kill_running_children

        kill_running_children()
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


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


def preload_engine(settings: Settings, sources: Sequence[SourceFile] = ()) -> None:
    """Import the engines before forking, so workers share them instead of each importing them: the modules a
    static analysis imports, and the parse's node `__init__`s (30 ms per worker). libcst and its engine only when
    one of `sources` may need them (`may_need_libcst`; all when none are given): a pool of training scripts and
    configurations is analysed from CPython's AST (static.without_libcst), and libcst's import is 0.2 s. Not the
    fixes: reslint.fixes.apply imports this module."""
    try:
        import reslint.rules  # noqa: F401
        import reslint.static.training  # noqa: F401
        import reslint.static.training_factories  # noqa: F401
        import reslint.static.without_libcst  # noqa: F401
        from reslint.prefilter import may_need_libcst

        if not sources or any(may_need_libcst(source.path) for source in sources):
            import libcst  # noqa: F401
            import libcst.native  # noqa: F401
            import reslint.static.engine  # noqa: F401
            from reslint.static.unvalidated_parse import prepare_parse

            prepare_parse()
    except Exception:  # noqa: BLE001 - a broken engine is reported per file by the workers
        pass
    if not settings.static:
        preload_torch()
    import gc

    gc.freeze()  # what is loaded now lives as long as the workers: their collector need not walk it


def merge(outcomes: list[FileOutcome], files_checked: int) -> Report:
    report = Report(files_checked=files_checked)
    for outcome in outcomes:
        report.findings.extend(outcome.findings)
        report.models.extend(outcome.models)
        report.traces.extend(outcome.traces)
        report.files_skipped += outcome.skipped
        if outcome.error is not None:
            report.internal_errors.append(outcome.error)
    report.findings = unique(report.findings)
    report.models.sort(key=lambda model: (model.path, model.line, model.name))
    report.traces.sort(key=lambda trace: (trace.path, trace.line, trace.name))
    report.internal_errors.sort(key=lambda error: error.path)
    return report


def check_source(source: SourceFile, settings: Settings, cached_only: bool = False,
                 fixes: Callable | None = None) -> FileOutcome | None:
    """Everything for one file; runs in a worker process, so it never raises.

    With `cached_only`, None unless the cache holds the file's result; with `fixes`, the file's fixes
    are checked here, while the engine's parse of it is at hand (a static check)."""
    try:
        with collector_paused() if settings.static else contextlib.nullcontext() as collecting:
            prepared: list = []  # the fixes of a file analysed here, checked before its result is cached

            def reported_of(result: FileResult, text: str) -> list[Finding]:
                return reported([*result.findings, *unused_noqa_findings(text, source.display)], source, text, settings)

            def prepare(result: FileResult, data: bytes) -> None:
                text = decoded(data)
                findings = reported_of(result, text)
                ready = fixes(source, data, text, result, findings, settings) if result.module is not None else None
                prepared.append((findings, ready))
                result.prepared_fixes = ready.to_dict(settings) if ready is not None else None

            result, data = analyse_source(source, settings, cached_only, prepare if fixes is not None else None)
            if result is None:
                return None
            text = decoded(data)
            if prepared:
                findings, ready = prepared[0]
            else:
                findings = reported_of(result, text)
                ready = None
                if fixes is not None and result.prepared_fixes is not None:  # kept in the cache with the result
                    from reslint.fixes.prepared import FileFixes

                    ready = FileFixes.from_dict(result.prepared_fixes, settings)
            outcome = FileOutcome(findings=findings, models=list(result.models), links=result.links,
                                  skipped=result.skipped, display=source.display, traces=list(result.traces),
                                  fixes=ready)
            del result
            if collecting:
                settle_collector()
        return outcome
    except Exception as error:  # noqa: BLE001 - one broken file must not end the run
        return FileOutcome(error=InternalError(
            path=source.display,
            error=f"{type(error).__name__}: {error}",
            traceback=traceback.format_exc(),
        ), display=source.display)


# Whether this process is reslint's own (the console script, a pool worker): see settle_collector.
own_process = False


def settle_collector() -> None:
    """At the end of a file of a static check, the collector still paused (collector_paused): what survives
    the file (the project index's trees, the outcomes) is frozen, so that later collections do not walk it
    again and again (they walked each file's survivors twice more: a sixth of a check's CPU). The analysis
    leaves no reference cycle, so no collection runs first: one walked a file's survivors once more to find
    none (0.24 CPU-s over 325 transformers files). Only in a process of reslint's own: freezing keeps a
    caller's garbage of the moment for good. Objects frozen here are still freed when no longer referenced;
    a cycle among them is not (tests/test_static_around.py checks none is left)."""
    import gc

    if own_process:
        gc.freeze()


def thaw_collector() -> None:
    """Before Python's own exit: what settle_collector froze goes back to the collector, so that the exit's
    collection finalises its cycles as it would have (a finalizer in a frozen cycle would never run)."""
    import gc

    if own_process:
        gc.unfreeze()


def new_project_run() -> None:
    """The project index looks at each project file once per run (see ProjectIndex.new_run)."""
    from reslint.project_index import ProjectIndex

    ProjectIndex.new_run()
