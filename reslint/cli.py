"""The `reslint` command: check, probe, rule, rules.

Exit codes (DESIGN.md): 0 nothing at or above --fail-on, 1 findings at or above it, 2 usage
error, bad config or internal error. Every exit 2 prints exactly one `reslint: error: ` line on
stderr; a traceback only with --verbose.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import traceback
from collections.abc import Iterator, Sequence
from typing import NoReturn, TextIO

import click

import reslint
from reslint import api
from reslint.api import TORCH_MISSING  # noqa: F401 - part of the CLI module's interface (tests import it)
from reslint.api import PROBE_TORCH_MISSING
from reslint.catalog import RULES, SEVERITIES
from reslint.config import Overrides, load_settings, split_codes
from reslint.discovery import display_path
from reslint.errors import ReslintError
from reslint.probing import DEFAULT_TIMEOUT as PROBE_TIMEOUT
from reslint.probing.devices import DTYPES as PROBE_DTYPES
from reslint.probing.distributed import WRAPS as PROBE_WRAPS
from reslint.reporters import FORMATS, WITHOUT_FIXES
from reslint.report import InternalError

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a Ctrl-C
# click >= 8.2 raises this for a bare `reslint`: show the help and say what is missing.
NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())


class UsageFailure(Exception):
    """A problem with how reslint was called; reported as one line, exit 2."""


def ruff_options(function):
    """The options of `reslint check` spelled as ruff spells them."""
    options = [
        click.option("--extend-select", multiple=True, metavar="CODES", help="Codes or prefixes to report on top of the config's select."),
        click.option("--extend-ignore", multiple=True, metavar="CODES", help="Codes or prefixes not to report, on top of the config's ignore."),
        click.option("--exclude", multiple=True, metavar="GLOBS", help="Comma-separated globs of paths not to check; replaces the config's exclude."),
        click.option("--extend-exclude", multiple=True, metavar="GLOBS", help="Comma-separated globs of paths not to check, on top of the config's exclude."),
        click.option("--output-file", metavar="FILE", help="Write the report to FILE instead of stdout."),
        click.option("-q", "--quiet", is_flag=True, help="Print the findings only: no model summary, skipped paths, total or progress."),
        click.option("--show-models", is_flag=True, help="Also print the per-model summary (stacks, depth, norm placement, engine)."),
        click.option("--stdin-filename", metavar="FILE", help="With - as the PATH: the file stdin stands for (its path in findings and per-file-ignores)."),
    ]
    for option in reversed(options):
        function = option(function)
    return function


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(reslint.__version__, "--version", prog_name="reslint", message="%(prog)s %(version)s")
def cli() -> None:
    """Lint PyTorch model code for residual, normalization and gradient-flow bugs."""


@cli.command(short_help="Check files and directories (default: the current directory).")
@click.argument("paths", nargs=-1, metavar="[PATH]...")
@click.option("--static", is_flag=True, help="Static analysis only: never import or run the checked code (no torch needed).")
@click.option("--select", multiple=True, metavar="CODES", help="Comma-separated codes or prefixes to report (e.g. RL1,RL201); replaces the config's.")
@click.option("--ignore", multiple=True, metavar="CODES", help="Comma-separated codes or prefixes not to report; replaces the config's.")
@click.option("--output-format", type=click.Choice(FORMATS, case_sensitive=False), default="text", show_default=True, help="How to print the findings.")
@click.option("--fail-on", type=click.Choice(SEVERITIES, case_sensitive=False), default=None, help="Lowest severity that makes the exit status 1 (default: warning, or the config's).")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings (errors in reslint itself still exit 2).")
@click.option("--statistics", is_flag=True, help="Print counts per rule instead of one line per finding.")
@click.option("--config", "config_file", metavar="FILE", help="Use this pyproject.toml ([tool.reslint]) or TOML file (top-level keys) instead of searching.")
@click.option("--model", "models", multiple=True, metavar="SPEC", help="Model factory FILE_OR_MODULE:EXPR, e.g. model.py:GPT(GPTConfig(n_layer=2)) (repeatable; replaces the config's).")
@click.option("--inputs", metavar="SPEC", help="Example inputs: a shape spec (long[2,64]<50257; float[2,16,512]) or an EXPR in the model file's namespace.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS", help="Limit per file for importing it and building and tracing its models; the worker is killed past it (default: 60).")
@click.option("--jobs", type=click.IntRange(min=1), metavar="N", help="Files analysed in parallel (default: the number of CPUs).")
@click.option("--no-cache", is_flag=True, help="Do not read or write .reslint_cache/.")
@click.option("--verbose", is_flag=True, help="Also list the skipped paths and the model summary, and show tracebacks of internal errors.")
@click.option("--fix", is_flag=True, help="Apply the safe fixes, then report what remains.")
@click.option("--unsafe-fixes", is_flag=True, help="With --fix, --diff or --fix-only: also apply fixes that change the architecture or the training run.")
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff instead of writing them; exit 1 when there is something to fix.")
@click.option("--fix-only", is_flag=True, help="Apply the fixes and report nothing else (exit 0).")
@ruff_options
def check(
    paths: tuple[str, ...],
    static: bool,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    output_format: str,
    fail_on: str | None,
    exit_zero: bool,
    statistics: bool,
    config_file: str | None,
    models: tuple[str, ...],
    inputs: str | None,
    timeout: float | None,
    jobs: int | None,
    no_cache: bool,
    verbose: bool,
    fix: bool,
    unsafe_fixes: bool,
    diff: bool,
    fix_only: bool,
    extend_select: tuple[str, ...],
    extend_ignore: tuple[str, ...],
    exclude: tuple[str, ...],
    extend_exclude: tuple[str, ...],
    output_file: str | None,
    quiet: bool,
    show_models: bool,
    stdin_filename: str | None,
) -> int:
    """Check Python files and directories (default: the current directory; - reads stdin)."""
    output_format = output_format.lower()
    if statistics and output_format not in ("text", "concise", "json"):
        raise UsageFailure("--statistics works with --output-format text, concise or json")
    stdin = read_stdin(paths, stdin_filename)
    progress = ProgressLine.for_output(output_format, quiet)

    shows_fixes = output_format not in WITHOUT_FIXES

    def run_check(fixes: bool = shows_fixes) -> api.Report:
        return api.check(
            checked_paths(paths, models),
            static=static,
            select=joined_codes(select),
            ignore=joined_codes(ignore),
            extend_select=joined_codes(extend_select),
            extend_ignore=joined_codes(extend_ignore),
            exclude=exclude or None,
            extend_exclude=extend_exclude or None,
            config=config_file,
            fail_on=fail_on,
            models=models or None,
            inputs=inputs,
            timeout=timeout,
            jobs=jobs,
            cache=not no_cache,
            verbose=verbose,
            stdin=stdin,
            stdin_filename=stdin_filename,
            progress=progress,
            fixes=fixes,
        )

    from reslint.fixes.command import FixOptions, fix_report

    try:
        options = FixOptions(fix, unsafe_fixes, diff, fix_only)
        report, status = fix_report(run_check(fixes=shows_fixes and not options.rewrites), options, run_check)
    except ReslintError as error:
        raise UsageFailure(error.cli_message()) from None
    finally:
        if progress is not None:
            progress.clear()
    if report is None:
        return status
    if not report.files_checked:
        click.echo("reslint: warning: no Python files to check", err=True)
    with output_stream(output_file) as stream:
        report.write(stream, output_format, statistics=statistics, show_models=show_models or verbose, quiet=quiet)
        stream.flush()
    if report.internal_errors:
        report_internal_errors(report.internal_errors, verbose)
        return EXIT_ERROR
    if report.fails() and not exit_zero:
        return EXIT_FINDINGS
    return EXIT_OK


def checked_paths(paths: tuple[str, ...], models: tuple[str, ...]) -> tuple[str, ...]:
    """The PATHs, or without any the files the --model factories name (as `pytest file.py::test`
    runs that file), else the current directory."""
    if paths:
        return tuple(path for path in paths if path != "-") or (".",)
    from reslint.trace.models import split_factory  # the trace engine's modules: only when a --model names the files

    files = tuple(dict.fromkeys(target for target, _ in map(split_factory, models) if target.endswith((".py", ".pyi"))))
    return files if files and len(files) == len(models) else (".",)


def read_stdin(paths: tuple[str, ...], stdin_filename: str | None) -> str | None:
    """The source of `reslint check -`; `-` is checked alone."""
    if "-" not in paths:
        if stdin_filename is not None:
            raise UsageFailure("--stdin-filename names the file read from stdin: pass - as the PATH")
        return None
    if len(paths) > 1:
        raise UsageFailure("- (stdin) cannot be combined with other PATHs")
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise UsageFailure(f"stdin is not UTF-8: {error}") from None


@contextlib.contextmanager
def output_stream(output_file: str | None) -> Iterator[TextIO]:
    """stdout, or the --output-file (written whole, UTF-8, never colored)."""
    if output_file is None:
        yield sys.stdout
        return
    try:
        handle = open(output_file, "w", encoding="utf-8")
    except OSError as error:
        raise UsageFailure(f"--output-file: cannot write {output_file}: {error.strerror or error}") from None
    with handle:
        yield handle


class ProgressLine:
    """`[done/total] phase` redrawn on a terminal's stderr while a check runs; never into a pipe or a file."""

    INTERVAL = 0.1  # seconds between redraws

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.shown = False
        self.last = 0.0

    @classmethod
    def for_output(cls, output_format: str, quiet: bool) -> ProgressLine | None:
        """A progress line for human output on a terminal; None for machine formats, --quiet and pipes."""
        stream = sys.stderr
        if quiet or output_format not in ("text", "concise") or not stream.isatty() or os.environ.get("TERM") == "dumb":
            return None
        return cls(stream)

    def __call__(self, done: int, total: int, phase: str) -> None:
        now = time.monotonic()
        if now - self.last < self.INTERVAL and done not in (0, total):
            return
        self.last = now
        self.stream.write(f"\r\033[K[{done}/{total}] {phase}")
        self.stream.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()


def joined_codes(values: tuple[str, ...]) -> tuple[str, ...] | None:
    if not values:
        return None
    return tuple(code for value in values for code in split_codes(value))


def require_torch(missing: str) -> None:
    try:
        api.require_torch(missing)
    except ReslintError as error:
        raise UsageFailure(error.cli_message()) from None


def report_internal_errors(errors: list[InternalError], verbose: bool) -> None:
    if verbose:
        for error in errors:
            click.echo(f"Traceback for {error.path}:\n{error.traceback.rstrip()}", err=True)
    first = errors[0]
    more = f" (and {len(errors) - 1} more files)" if len(errors) > 1 else ""
    hint = "" if verbose else "; run with --verbose for the traceback"
    print_error(f"internal error while checking {first.path}: {first.error}{more}{hint}")


@cli.command("probe", short_help="Measure gradient flow with a real forward and backward pass.")
@click.argument("file", required=False, metavar="[FILE]")
@click.option("--model", metavar="EXPR", help="The model: an EXPR in FILE's namespace (GPT(GPTConfig(n_layer=2))) or FILE_OR_MODULE:EXPR; default: the config's factory or the one discoverable model.")
@click.option("--inputs", metavar="SPEC", help="Example inputs: a shape spec (long[2,64]<50257) or an EXPR, evaluated again each step (default: inferred).")
@click.option("--compare", metavar="EXPR", help="Probe a second model of FILE with the same inputs, loss and seed, and show each parameter's gradient norm in both and their ratio.")
@click.option("--device", default="auto", show_default=True, metavar="cpu|cuda|mps|auto", help="Where to run: auto picks cuda, then mps, then cpu.")
@click.option("--dtype", type=click.Choice(PROBE_DTYPES), default=None, help="Convert the model and floating inputs to this dtype (default: as built).")
@click.option("--loss", default="auto", show_default=True, metavar="auto|sum|mean|cross-entropy|random-projection|MODULE:FUNC", help="What to differentiate: auto is the output's .loss if any, else cross-entropy against seeded random targets for logits, else a fixed random projection of the output.")
@click.option("--steps", type=click.IntRange(min=1), default=1, show_default=True, help="Forward+backward passes; norms are averaged.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for building the model and drawing inputs.")
@click.option("--plot", metavar="OUT.png", help="Write gradient norm per layer, log scale, of every probed model (needs matplotlib: reslint[plot]).")
@click.option("--output-format", type=click.Choice(FORMATS, case_sensitive=False), default="text", show_default=True, help="How to print the report: sarif and github give the findings only, for CI.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=PROBE_TIMEOUT, show_default=True, metavar="SECONDS", help="Limit for importing, building and measuring; the model's process is killed past it.")
@click.option("--wrap", type=click.Choice(PROBE_WRAPS), default="auto", show_default=True, help="Under torchrun: ddp (DistributedDataParallel) or fsdp (FSDP2 fully_shard per block); auto: ddp when distributed.")
@click.option("--vanishing-gradient-factor", type=click.FloatRange(min=1, min_open=True), metavar="X", help="RL601 when the last block's gradient norm is X times the first's (default 100).")
@click.option("--exploding-gradient-factor", type=click.FloatRange(min=1, min_open=True), metavar="X", help="RL602 when the first block's gradient norm is X times the last's (default 100).")
@click.option("--activation-growth-factor", type=click.FloatRange(min=1, min_open=True), metavar="X", help="RL602 when the activation RMS grows X times over a stack (default 100).")
@click.option("--select", multiple=True, metavar="CODES", help="Comma-separated codes or prefixes to report.")
@click.option("--ignore", multiple=True, metavar="CODES", help="Comma-separated codes or prefixes not to report.")
@click.option("--fail-on", type=click.Choice(SEVERITIES, case_sensitive=False), default=None, help="Lowest severity that makes the exit status 1 (default: warning, or the config's).")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings.")
@click.option("--config", "config_file", metavar="FILE", help="Use this pyproject.toml or TOML file instead of searching.")
@click.option("--verbose", is_flag=True, help="Show tracebacks of errors.")
def probe_command(file: str | None, model: str | None, inputs: str | None, compare: str | None, device: str, dtype: str | None, loss: str,
                  steps: int, seed: int, plot: str | None, output_format: str, timeout: float, wrap: str,
                  vanishing_gradient_factor: float | None, exploding_gradient_factor: float | None,
                  activation_growth_factor: float | None, select: tuple[str, ...], ignore: tuple[str, ...],
                  fail_on: str | None, exit_zero: bool, config_file: str | None, verbose: bool) -> int:
    """Measure gradient flow with one real forward and backward pass (RL601-RL604)."""
    overrides = Overrides(select=joined_codes(select), ignore=joined_codes(ignore), fail_on=fail_on, verbose=verbose)
    try:
        settings = load_settings(os.getcwd(), config_file, overrides)
    except ReslintError as error:
        raise UsageFailure(error.cli_message()) from None
    from reslint.probing.command import directory_message

    if file and os.path.isdir(file):
        raise UsageFailure(directory_message(file))
    parent_computed = "torch" in sys.modules  # see probe_isolated: only a fresh process keeps the child's threads
    require_torch(PROBE_TORCH_MISSING)
    from reslint.probing.api import ProbeError
    from reslint.probing.command import ProbeOptions, probe_isolated, reported, write_report
    from reslint.probing.distributed import launched_world
    from reslint.probing.plot import PlotUnavailable, require_matplotlib, write_plot

    world = launched_world()
    rank = f"rank {world.rank}: " if world.rank else ""
    output_format = output_format.lower()
    try:
        if plot:
            require_matplotlib()
        options = ProbeOptions(
            file=file, model=model, inputs=inputs, device=device, dtype=dtype, loss=loss, steps=steps, seed=seed,
            plot=plot, output_format=output_format, wrap=wrap, compare=compare,
            vanishing_gradient_factor=vanishing_gradient_factor, exploding_gradient_factor=exploding_gradient_factor,
            activation_growth_factor=activation_growth_factor, timeout=timeout)
        report, compared = probe_isolated(options, settings, world, parent_computed)
        findings = []
        for item in filter(None, (report, compared)):
            item.findings = reported(item.findings, settings)
            findings.extend(item.findings)
        if world.leader:
            write_report(report, compared, output_format, sys.stdout, settings)
            sys.stdout.flush()
            if plot:
                write_plot([item for item in (report, compared) if item is not None], plot)
                # stdout carries the report: a line there would break JSON, SARIF and annotations
                click.echo(f"Plot of the gradient norm per layer written to {plot}", err=output_format != "text")
    except (ProbeError, PlotUnavailable) as error:
        if verbose:
            click.echo(getattr(error, "details", "") or traceback.format_exc(), err=True, nl=False)
        raise UsageFailure(rank + str(error)) from None
    if any(finding.at_least(settings.fail_on) for finding in findings) and not exit_zero:
        return EXIT_FINDINGS
    return EXIT_OK


@cli.command("clean", short_help="Remove the result cache (.reslint_cache/).")
def clean_command() -> int:
    """Remove the result cache (.reslint_cache/) of the project and of directories below the current one."""
    import shutil

    from reslint.cache import CACHE_DIR_NAME, cache_directories

    removed = 0
    for directory in cache_directories(os.getcwd()):
        try:
            shutil.rmtree(directory)
        except OSError as error:
            raise UsageFailure(f"cannot remove {directory}: {error.strerror or error}") from None
        click.echo(f"Removed {display_path(directory)}")
        removed += 1
    if not removed:
        click.echo(f"No {CACHE_DIR_NAME}/ to remove")
    return EXIT_OK


@cli.command("rules")
@click.option("--output-format", type=click.Choice(("text", "json"), case_sensitive=False), default="text", show_default=True,
              help="json: one object per rule (code, name, severity, summary, fix, engine, url).")
def rules_command(output_format: str) -> int:
    """List every rule: code, name, default severity and summary."""
    if output_format.lower() == "json":
        import json

        rules = [{"code": rule.code, "name": rule.name, "severity": rule.severity, "summary": rule.summary,
                  "fix": rule.fix, "engine": rule.engine, "url": rule.doc_url} for rule in RULES.values()]
        click.echo(json.dumps(rules, indent=2))
        return EXIT_OK
    name_width = max(len(rule.name) for rule in RULES.values())
    click.echo(f"{'code':<6} {'name':<{name_width}}  {'severity':<8}  summary")
    for rule in RULES.values():
        click.echo(f"{rule.code:<6} {rule.name:<{name_width}}  {rule.severity:<8}  {rule.summary}")
    return EXIT_OK


@cli.command("rule")
@click.argument("code")
def rule_command(code: str) -> int:
    """Explain one rule, by code (RL101) or by name (post-ln)."""
    from reslint.docs import find_rule, rule_text

    rule = find_rule(code)
    if rule is None:
        raise UsageFailure(f"unknown rule code: {code!r} (run 'reslint rules' for the list)")
    click.echo(rule_text(rule.code).rstrip("\n"))
    return EXIT_OK


def print_error(message: str) -> None:
    one_line = " ".join(message.split())
    click.echo(f"reslint: error: {one_line}", err=True)


def run(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return the exit status instead of exiting."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        status = cli.main(args=args, prog_name="reslint", standalone_mode=False)
    except NO_ARGS_IS_HELP as error:
        if error.ctx is not None:
            click.echo(error.ctx.get_help())
        print_error(f"missing command: one of {', '.join(sorted(cli.commands))}")
        return EXIT_ERROR
    except click.UsageError as error:
        print_error(error.format_message())
        return EXIT_ERROR
    except click.ClickException as error:
        print_error(error.format_message())
        return EXIT_ERROR
    except click.Abort as error:
        if isinstance(error.__context__, KeyboardInterrupt):
            return EXIT_INTERRUPTED
        print_error("aborted")
        return EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except UsageFailure as error:
        print_error(str(error))
        return EXIT_ERROR
    except BrokenPipeError:
        silence_stdout()
        return EXIT_FINDINGS
    except Exception as error:  # noqa: BLE001 - never show a bare traceback by default
        if "--verbose" in args:
            traceback.print_exc()
        print_error(f"internal error: {type(error).__name__}: {error}")
        return EXIT_ERROR
    return status if isinstance(status, int) else EXIT_OK


def silence_stdout() -> None:
    # The reader went away (e.g. `| head`); stop Python from failing again when it flushes at exit.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def main(argv: Sequence[str] | None = None, *, script: bool = False) -> NoReturn:
    """Run the CLI on `argv` (default: the process's arguments, this process then being reslint's: see
    runner.settle_collector) and exit with its status. `script`: as the console script, ending the process
    without Python's teardown after any check; otherwise only after one that imported torch, and only without
    `argv` (a caller that hands main its own arguments may catch SystemExit)."""
    # A console that cannot encode a character of a message must not turn a report into a crash.
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    if argv is None:
        reslint.runner.own_process = True
    status = run(argv)
    reslint.runner.thaw_collector()  # what the static check froze goes back to the collector (see settle_collector)
    if script or argv is None and "torch" in sys.modules:
        exit_without_teardown(status)
    sys.exit(status)


def script() -> NoReturn:
    """The `reslint` console script and `python -m reslint`: main on the process's arguments, the process then
    ended without Python's teardown (see exit_without_teardown)."""
    main(script=True)


def exit_without_teardown(status: int) -> None:
    """End the process now, without Python's finalization: it walks and frees every object the process made, work
    with no effect on a process about to end. After `import torch` it also unregisters torch's operators (0.5 CPU-s
    after the import alone, about 1 after a full check); after a static check of 68 transformers modeling files it
    was 2.4 CPU-s, a sixth of the check (the project index's trees, the analyses kept for the fixes, what the
    collector had frozen walked once more). What an exit must do is done here: the streams
    flushed, the exit handlers run (logging, a process pool, temporary files). Returns, for the usual exit,
    when a thread that Python's exit would wait for still runs (unless the run was interrupted) or stdout
    cannot be flushed."""
    import atexit
    import threading

    # After Ctrl-C no thread is waited for: the workers are stopped, and Python's exit would join the process
    # pool's manager thread, which a worker stopped halfway through sending a result can leave blocked for good.
    if status != EXIT_INTERRUPTED and any(thread.is_alive() and not thread.daemon for thread in threading.enumerate()
                                          if thread is not threading.main_thread()):
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe or stream: the usual exit reports it as always
        return
    atexit._run_exitfuncs()
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(status)
