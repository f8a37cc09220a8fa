"""reslint's Python API: the checks of the command line, callable from a test suite or a notebook.

    import reslint

    report = reslint.check("src/", static=True)       # what `reslint check --static src/` does
    print(report.render())                            # the CLI's text output; also "json", "sarif", "github"
    assert not report.fails()                         # nothing at or above the config's fail-on

    report = reslint.check_model(model)               # an nn.Module in memory, traced like the CLI traces
    assert [f.code for f in report.findings] == []

    report = reslint.probe(model, torch.randint(0, 100, (2, 16)))   # RL601-RL604, see reslint.probing.api

`check` is the code path of `reslint check` itself. Problems with how reslint is called (a bad
config, a path that does not exist, an unknown rule code, PyTorch missing for a full check) raise
`ReslintError` with a one-line message; problems *in the checked code* are findings, never
exceptions. `Report` and `Finding` are plain dataclasses: `Finding.to_dict()` has the JSON keys
of `--output-format json` (code, name, severity, message, path, line, column, symbol, engine, help).

Only `check(static=True)` is torch-free; `check()` (the full check), `check_model` and `probe`
need PyTorch (`pip install 'reslint[torch]'`). Importing this module imports neither.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterable, Iterator
from typing import Any, Union

from reslint.catalog import SEVERITIES
from reslint.config import Overrides, load_settings, split_codes
from reslint.discovery import Discovery, SourceFile, display_path, find_sources, root_relative
from reslint.errors import ReslintError, UsageError
from reslint.filtering import file_text, reported, unique
from reslint.findings import Finding, ModelSummary
from reslint.report import Report
from reslint.runner import Progress, check_sources
from reslint.settings import Settings

__all__ = [
    "Finding", "ModelSummary", "ProbeError", "ProbeReport", "Report", "ReslintError", "UsageError",
    "check", "check_model", "probe",
]


def __getattr__(name: str):
    """The probe's API, imported when first asked for: a check does not load the probe's modules."""
    if name in ("ProbeError", "probe"):
        from reslint.probing import api as probing_api

        return getattr(probing_api, name)
    if name == "ProbeReport":
        from reslint.probing.report import ProbeReport

        return ProbeReport
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


PathLike = Union[str, "os.PathLike[str]"]
Codes = Union[str, Iterable[str], None]

TORCH_MISSING = "the full check needs PyTorch: install it (pip install 'reslint[torch]') or run with --static"
TORCH_API_MISSING = "the full check needs PyTorch: install it (pip install 'reslint[torch]') or pass static=True"
PROBE_TORCH_MISSING = ("reslint probe needs PyTorch: it runs the model forward and backward; install it "
                       "(pip install 'reslint[torch]'), or use reslint check --static for what needs no torch")
# check(cwd=...) changes the process's working directory for the call: one such call at a time.
WORKING_DIRECTORY_LOCK = threading.RLock()


def check(
    paths: PathLike | Iterable[PathLike] = ".",
    *,
    static: bool = False,
    select: Codes = None,
    ignore: Codes = None,
    config: PathLike | None = None,
    fail_on: str | None = None,
    models: str | Iterable[str] | None = None,
    inputs: str | None = None,
    timeout: float | None = None,
    jobs: int | None = None,
    cache: bool = True,
    cwd: PathLike | None = None,
    verbose: bool = False,
    fixes: bool = True,
    extend_select: Codes = None,
    extend_ignore: Codes = None,
    exclude: str | Iterable[str] | None = None,
    extend_exclude: str | Iterable[str] | None = None,
    stdin: str | None = None,
    stdin_filename: str | None = None,
    progress: Progress | None = None,
) -> Report:
    """Check Python files and directories, exactly as `reslint check` does, and return the report.

    Args:
        paths: A file or directory, or several (default: the current directory). Directories are
            walked, skipping virtualenvs, VCS and build directories and the config's `exclude`.
        static: Static analysis only (`--static`): never import or run the checked code; no torch needed.
        select: Codes or prefixes to report (`"RL1,RL201"` or `["RL1", "RL201"]`); replaces the config's.
        ignore: Codes or prefixes not to report; replaces the config's.
        config: A pyproject.toml (`[tool.reslint]`) or TOML file (top-level keys) to use instead of
            searching upwards from `cwd` for the nearest pyproject.toml with a `[tool.reslint]` table.
        fail_on: The lowest severity that makes `Report.fails()` true and `Report.exit_code()` 1:
            "info", "warning" or "error" (default: the config's, else "warning").
        models: Model factories `FILE_OR_MODULE:EXPR` (e.g. `"model.py:GPT(GPTConfig(n_layer=2))"`);
            replace the config's `[[tool.reslint.models]]`. Full check only.
        inputs: Example inputs for tracing: a shape spec (`"long[2,64]<50257"`) or an expression in
            the model file's namespace. Full check only.
        timeout: Seconds per file for importing it and building and tracing its models (default 60).
        jobs: Files analysed in parallel (default: the number of CPUs).
        cache: Read and write `.reslint_cache/` (unchanged files are not analysed again).
        cwd: The directory relative `paths` and `config` are taken from, where the config search
            starts and what finding paths are relative to (default: the current directory). While
            the call runs, the process's working directory is changed to it.
        verbose: Longer model summaries (e.g. which schedule counts as warmup, and why).
        fixes: Give each finding the checked fix that would repair it (`Finding.fix`); in the full
            check that traces the fixed file once more for each file with fixable findings.
        extend_select: Codes or prefixes to report on top of the config's `select`.
        extend_ignore: Codes or prefixes not to report, on top of the config's `ignore`.
        exclude: Globs of paths not to check; replace the config's `exclude`.
        extend_exclude: Globs of paths not to check, on top of the config's `exclude`.
        stdin: Source text to check instead of `paths` (what `reslint check -` reads from stdin),
            reported as `stdin_filename` (default `-`); never cached.
        stdin_filename: The file `stdin` stands for: its path in findings, and what per-file-ignores match.
        progress: Called as `progress(done, total, phase)` while files are analysed (phase: "cache",
            "parsing", "tracing", "linking"); the CLI draws its progress line on a terminal with it.

    A model factory of `models` naming a `.py` file outside `paths` adds that file to the check.

    Returns:
        The `Report`: findings (after `# noqa` / per-file-ignores / select / ignore, each with the
        checked fix that would repair it, `Finding.fix`, or None), per-model
        summaries, the number of files checked, and files reslint itself failed on (`internal_errors`).

    Raises:
        ReslintError: A bad config or argument, a path that does not exist, or (without `static`)
            PyTorch not installed. The message is one line.
    """
    path_list = path_arguments(paths)
    model_list = [models] if isinstance(models, str) else list(models) if models is not None else None
    overrides = Overrides(
        select=codes_argument(select),
        ignore=codes_argument(ignore),
        extend_select=codes_argument(extend_select),
        extend_ignore=codes_argument(extend_ignore),
        exclude=globs_argument(exclude),
        extend_exclude=globs_argument(extend_exclude),
        fail_on=severity_argument(fail_on),
        static=static,
        jobs=positive_argument("jobs", jobs, integer=True),
        cache=cache and stdin is None,
        verbose=verbose,
        models=tuple(model_list) if model_list is not None else None,
        inputs=inputs,
        timeout=positive_argument("timeout", timeout),
    )
    if inputs is not None:
        check_inputs_spec(inputs)
    with working_directory(cwd) as directory:
        for spec in model_list or ():
            check_model_spec(spec)
        settings = load_settings(directory, os.fspath(config) if config is not None else None, overrides)
        check_selection(settings)
        if not static:
            require_torch()
        with stdin_source(stdin, stdin_filename, settings.root) as source:
            if source is not None:
                discovery = Discovery(sources=[source])
            else:
                discovery = find_sources(path_list, settings.root, settings.exclude, cwd=directory)
                add_model_files(discovery, model_list or (), settings, directory)
            worker_fixes = None
            if fixes and source is None and settings.static:
                from reslint.fixes.worker import worker_fixes  # the workers check a file's fixes beside its analysis
            from reslint.fixes.handed_back import for_this_check

            fix_check = None
            if fixes and source is None and not settings.static:
                # A full check's trace children check their files' fixes after tracing them.
                from reslint.fixes.checked_in_trace_child import check_fixes_here as fix_check
            with for_this_check(fix_check):
                report = check_sources(discovery.sources, settings, progress=progress, fixes=worker_fixes)
                if source is not None:
                    report.texts[source.display] = stdin
                if fixes and source is None and report.findings:  # text read from stdin is never fixed
                    from reslint.fixes.apply import with_fixes  # imported here, so that importing this module stays light

                    traced = report.models if not settings.static else ()  # a static check's fixes compare no traces
                    report.findings = with_fixes(report.findings, settings, traced, report.prepared_fixes)
    report.skipped = discovery.skipped
    report.settings = settings
    return report


def check_selection(settings: Settings) -> None:
    """A selection of probe rules only would check nothing: say so instead of passing silently."""
    from reslint.catalog import RULES

    if settings.select and all(RULES[code].engine == "probe" for code in settings.select):
        codes = ", ".join(sorted(settings.select))
        raise UsageError(f"only probe rules selected ({codes}): `reslint probe` reports them, check never does",
                         option="select")


def add_model_files(discovery: Discovery, specs: Iterable[str], settings: Settings, directory: str) -> None:
    """The files of `--model FILE.py:EXPR` factories are checked even when no PATH holds them."""
    if not specs:  # a static check: the trace engine's modules are not imported for nothing
        return
    from reslint.trace.models import split_factory

    known = {os.path.normcase(os.path.realpath(source.path)) for source in discovery.sources}
    files = []
    for spec in specs:
        target = split_factory(spec)[0]
        if target.endswith((".py", ".pyi")) and os.path.normcase(os.path.realpath(target)) not in known:
            known.add(os.path.normcase(os.path.realpath(target)))
            files.append(target)
    if files:
        extra = find_sources(files, settings.root, (), cwd=directory)
        discovery.sources = sorted([*discovery.sources, *extra.sources], key=lambda source: source.display)


@contextlib.contextmanager
def stdin_source(text: str | None, filename: str | None, root: str) -> Iterator[SourceFile | None]:
    """`text` as a file to check, shown as `filename` (default `-`): a temporary copy, since the engines read files."""
    if text is None:
        yield None
        return
    import tempfile

    shown = filename or "-"
    with tempfile.TemporaryDirectory(prefix="reslint-stdin-") as directory:
        path = os.path.join(directory, os.path.basename(shown) if shown.endswith((".py", ".pyi")) else "stdin.py")
        with open(path, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        display = display_path(filename) if filename else shown
        yield SourceFile(path, display, root_relative(os.path.abspath(filename), root) if filename else shown)


def check_model(
    model: Any,
    inputs: Any = None,
    *,
    select: Codes = None,
    ignore: Codes = None,
    fail_on: str | None = None,
    name: str | None = None,
    config: PathLike | None = None,
    cwd: PathLike | None = None,
) -> Report:
    """Trace an in-memory `nn.Module` with the trace engine of `reslint check` and run the rules on its graph.

    The model is captured as the CLI captures the models it builds (`torch.export`, then
    `draft_export` for data-dependent control flow, then `torch.fx`), in eval mode; its training
    flags are restored afterwards and its weights are not changed. Findings are located in the
    file that defines the model's class (found with `inspect`; `<ClassName>` for a class without
    a source file). As `reslint check` merges its two engines for a file, the static engine's
    findings about the classes the model is made of (those defined in that file) are merged in:
    one finding per place and code, the traced one preferred, stack findings at the static
    engine's line. That file's `# noqa` comments and the config's select, ignore and
    per-file-ignores apply. Only this model is checked: not the other classes of its file, and
    not the training code (RL301 needs `check()` on the files).

    Args:
        model: The `nn.Module` (a `torch.compile`d or DistributedDataParallel one is unwrapped).
            It may live on any device, `meta` included.
        inputs: Example inputs: None to infer them from the first layer (as the CLI does), a
            shape spec string (`"long[2,64]<50257"`, `"float[2,16,512]"`) or an expression in the
            namespace of the model's module, a tensor (the one positional argument), a tuple (the
            positional arguments) or a dict (the keyword arguments).
        select: Codes or prefixes to report; replaces the config's.
        ignore: Codes or prefixes not to report; replaces the config's.
        fail_on: Stored in the report's settings as the default of `Report.fails()` (default: the
            config's, else "warning").
        name: The model's name in findings and summaries (default: its class name).
        config: A config file to use instead of the nearest `[tool.reslint]` above `cwd`.
        cwd: Where the config search starts and what finding paths are relative to (default: the
            current directory; the process's working directory is not changed).

    Returns:
        A `Report` with the model's findings and its summary (one `ModelSummary` when traced). A
        model that cannot be traced gives an RL903 finding (RL902 when its forward raised), not
        an exception.

    Raises:
        ReslintError: PyTorch is not installed, `model` is not an `nn.Module`, or a bad config
            or argument.
    """
    require_torch()
    import torch

    overrides = Overrides(select=codes_argument(select), ignore=codes_argument(ignore),
                          fail_on=severity_argument(fail_on), cache=False)
    directory = os.path.abspath(cwd if cwd is not None else os.getcwd())
    config_file = os.fspath(config) if config is not None else None
    settings = load_settings(directory, config_file, overrides)
    target = unwrapped(model)
    if not isinstance(target, torch.nn.Module):
        raise UsageError(f"check_model() needs a torch.nn.Module, got {type(model).__name__}")
    source, line = class_location(type(target))
    display = display_path(source, directory) if source else f"<{type(target).__name__}>"
    name = name or type(target).__name__
    findings, summaries = trace_in_memory(target, inputs, name=name, line=line, display=display,
                                          real=source or display, settings=settings, static_fallback=source is not None)
    if source is not None:
        findings, summaries = with_static_results(findings, summaries, target, source, display, settings)
        findings = reported(findings, SourceFile(source, display, root_relative(source, settings.root)), file_text(source), settings)
    else:
        findings = [finding for finding in findings if settings.enabled(finding.code)]
    return Report(findings=unique(findings), models=summaries,
                  files_checked=1 if source else 0, settings=settings)


def trace_in_memory(model: Any, inputs: Any, *, name: str, line: int, display: str, real: str, settings: Settings,
                    static_fallback: bool) -> tuple[list[Finding], list[ModelSummary]]:
    """Capture the model's graph in eval mode and run the rules on it (the CLI's `trace_one`, then its rules).

    `static_fallback`: the class has a source file, whose static findings stand in when tracing fails.
    """
    from reslint.analysis import check_captures
    from reslint.trace.engine import TraceResult, capture_one, silenced

    traced = TraceResult(imported=True)
    # Like the CLI's: what the model and torch's tracers print (graphs, tracebacks of a failed attempt) is not the report.
    with eval_mode(model), silenced():
        capture_one(model, lambda: example_inputs(model, inputs), name=name, line=line, path=display, real=real,
                    result=traced, static_fallback=static_fallback, inputs_hint="inputs=", inferred=inputs is None)
        outcome = check_captures(traced, display, settings, static_fallback=static_fallback)
    return outcome.findings, outcome.summaries


def example_inputs(model: Any, inputs: Any) -> Any:
    """`inputs` as the trace engine's `Inputs` (inferred: a list of candidates); raises InputError (an RL903
    finding) when they cannot be made."""
    import sys

    from reslint.trace.inputs import Inputs, as_inputs, candidate_inputs, from_text, infer_candidates

    first = next(model.parameters(), None)
    device = first.device.type if first is not None else "cpu"
    if inputs is None:  # every plausible set, tried in turn
        return [candidate_inputs(candidate, device) for candidate in infer_candidates(model)]
    if isinstance(inputs, str):
        import torch

        module = sys.modules.get(type(model).__module__)
        namespace = {"torch": torch, "nn": torch.nn, **(vars(module) if module is not None else {})}
        return from_text(inputs, namespace, device)
    return inputs if isinstance(inputs, Inputs) else as_inputs(inputs)


def with_static_results(findings: list[Finding], summaries: list[ModelSummary], model: Any, source: str,
                        display: str, settings: Settings) -> tuple[list[Finding], list[ModelSummary]]:
    """Merge in the static engine's findings about the model's classes of `source`, as `reslint check`
    merges the engines for a file: one finding per place and code, the traced one preferred, stack
    findings at the static engine's line (the loop over the stack, as the rule pages say). When the
    model could not be traced, its static summary stands, with the reason in a note."""
    import dataclasses

    from reslint.analysis import merge_findings

    try:
        with open(source, "rb") as handle:
            static = analyze_static(display, handle.read(), settings)
    except Exception:  # noqa: BLE001 - the traced findings stand on their own
        return findings, summaries
    classes = {type(module).__name__ for module in model.modules() if class_location(type(module))[0] == source}
    ours = [finding for finding in static.findings if finding.symbol.split(".")[0] in classes]
    merged = merge_findings(ours, findings)
    if not summaries:
        reason = next((finding.message for finding in findings if finding.code in ("RL902", "RL903")), "not traced")
        summaries = [dataclasses.replace(summary, notes=(*summary.notes, f"static only: {reason}"))
                     for summary in static.models if summary.name == type(model).__name__]
    return merged, summaries


def analyze_static(display: str, data: bytes, settings: Settings) -> Any:
    import dataclasses

    from reslint.analysis import analyze_file

    return analyze_file(display, data, dataclasses.replace(settings, static=True))


@contextlib.contextmanager
def eval_mode(model: Any) -> Iterator[None]:
    """The model in eval mode (dropout off, BatchNorm statistics untouched), its modules' flags restored after."""
    flags = [(module, module.training) for module in model.modules()]
    model.eval()
    try:
        yield
    finally:
        for module, training in flags:
            module.training = training


def unwrapped(model: Any) -> Any:
    """The user's module inside `torch.compile` (`_orig_mod`) and DistributedDataParallel (`.module`)."""
    import torch

    inner = getattr(model, "_orig_mod", model)
    if isinstance(inner, torch.nn.parallel.DistributedDataParallel):
        inner = inner.module
    return inner


def class_location(cls: type) -> tuple[str | None, int]:
    """(absolute source file of the class, line of its `class` statement), or (None, 1) without a file."""
    import inspect

    try:
        path = inspect.getsourcefile(cls)
    except (OSError, TypeError):
        return None, 1
    if not path or not os.path.isfile(path):
        return None, 1
    from reslint.trace.models import class_statement_line

    try:
        line = class_statement_line(cls)
    except (OSError, TypeError):
        line = 1
    return os.path.abspath(path), max(1, line)


def require_torch(missing: str = TORCH_MISSING) -> None:
    """Raise ReslintError (`missing`) unless PyTorch imports (a broken install raises more than ImportError)."""
    import gc
    import sys
    import warnings

    from reslint.analysis import collector_paused

    try:
        with warnings.catch_warnings(), collector_paused():
            # torch warns at import about optional companions (NumPy); a linter's output is not the place.
            warnings.simplefilter("ignore")
            fresh = "torch" not in sys.modules
            import torch  # noqa: F401
            if fresh:
                # Its million objects live as long as the process: frozen before the collector first walks
                # them (0.2 CPU-s of collections that find nothing; runner.preload_engine does the same).
                gc.freeze()
    except Exception:  # noqa: BLE001
        raise UsageError(TORCH_API_MISSING if missing == TORCH_MISSING else missing, cli_problem=missing) from None


def check_model_spec(spec: str) -> None:
    """A `--model` factory must be FILE_OR_MODULE:EXPR with an EXPR that parses, and a FILE must exist."""
    from reslint.trace.models import split_factory

    target, expr = split_factory(spec)
    if not target or not expr:
        raise UsageError("expected FILE_OR_MODULE:EXPR, e.g. model.py:GPT()", option="models", value=spec)
    if target.endswith((".py", ".pyi")) and not os.path.isfile(target):
        raise UsageError(f"file not found: {target}", option="models", value=spec)
    from reslint.trace.models import expression_problem

    problem = expression_problem(expr)
    if problem:
        raise UsageError(problem, option="models", value=spec)


def check_inputs_spec(spec: str) -> None:
    """`inputs` is a shape spec or a Python expression: a typo such as `long[2,64` is neither."""
    from reslint.trace.inputs import parse_shape_spec
    from reslint.trace.models import syntax_problem

    if not isinstance(spec, str) or not spec.strip():
        raise UsageError(f"expected a shape spec (long[2,64]<50257) or an expression, got {spec!r}", option="inputs")
    problem = None if parse_shape_spec(spec) is not None else syntax_problem(spec)
    if problem:
        raise UsageError(f"neither a shape spec such as long[2,64]<50257 nor a Python expression: {problem}",
                         option="inputs", value=spec)


def globs_argument(globs: str | Iterable[str] | None) -> tuple[str, ...] | None:
    if globs is None:
        return None
    values = [globs] if isinstance(globs, str) else list(globs)
    return tuple(glob.strip() for value in values for glob in str(value).split(",") if glob.strip())


def path_arguments(paths: PathLike | Iterable[PathLike]) -> list[str]:
    if isinstance(paths, (str, os.PathLike)):
        return [os.fspath(paths)]
    listed = [os.fspath(path) for path in paths]
    return listed or ["."]


def codes_argument(codes: Codes) -> tuple[str, ...] | None:
    """`"RL1,RL201"` / `["RL1", "RL201"]` -> ("RL1", "RL201"); None stays None (the config decides)."""
    if codes is None:
        return None
    values = [codes] if isinstance(codes, str) else list(codes)
    return tuple(code for value in values for code in split_codes(str(value)))


def severity_argument(severity: str | None) -> str | None:
    if severity is None:
        return None
    if not isinstance(severity, str) or severity.lower() not in SEVERITIES:
        raise UsageError(f"expected one of {', '.join(SEVERITIES)}, got {severity!r}", option="fail_on")
    return severity.lower()


def positive_argument(name: str, value: float | None, integer: bool = False) -> Any:
    if value is None:
        return None
    kind = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind) or value <= 0:
        expected = "an integer >= 1" if integer else "a number of seconds > 0"
        raise UsageError(f"expected {expected}, got {value!r}", option=name)
    return value


@contextlib.contextmanager
def working_directory(cwd: PathLike | None) -> Iterator[str]:
    """Run in `cwd` (the trace engine and the project linker resolve display paths against it)."""
    here = os.getcwd()
    if cwd is None:
        yield here
        return
    target = os.path.abspath(cwd)
    if not os.path.isdir(target):
        raise UsageError(f"not a directory: {os.fspath(cwd)}", option="cwd")
    if os.path.samefile(target, here):
        yield here
        return
    with WORKING_DIRECTORY_LOCK:
        os.chdir(target)
        try:
            yield target
        finally:
            os.chdir(here)

