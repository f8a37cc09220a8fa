"""Where `reslint check --static` spends its time beyond libcst's parse, phase by phase (CPU seconds).

    python bench/static_phases.py [--step K] [--tree DIR] [--profile OUT.prof]

Over transformers' models/ tree by default (every K-th file), in one process, with the collector
paused as the engine pauses it. Each phase is timed on its own, in the order the engine runs them:

  libcst parse      libcst.parse_module (the floor)
  cpython check     ast.parse and the nesting depth check before libcst sees the file
  positions         the SourceMap pairing body statements with CPython's AST (the statements a fact
                    reports are generated and placed when asked, inside the later phases)
  index             FileIndex, the config modules the file imports included
  stream-end walks  consumed_classes and reached_into (RL103)
  evaluation        the rest of extract_facts (graphs of every module class) and the rules
  training links    extract_training (RL301's cross-file facts)

The numbers are for finding the next hot spot, not a benchmark (bench/bench_all.py is).

    python bench/static_phases.py --whole-run [--step K] [--tree DIR] [--files LIST]

times instead the whole `reslint check --static --no-cache --jobs 1` run as a user starts it, in this
process: interpreter start-up, importing the CLI, settings and discovery, the CPython parse and nesting
check, libcst's parses (of the checked files and of the project files the engine reads), the facts (the
project index's construction-site search and builder files inside them), the file links, fix
availability (in the worker: candidate fixes and their re-check), the project stage and the report.
Phases nest: "self" is a phase's time less the phases inside it. The cyclic collector's time is counted
apart too (it runs inside whichever phase allocates when a collection is due).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import sys
import time
from pathlib import Path

sys.setrecursionlimit(40_000)

PHASES = ("libcst parse", "cpython check", "positions", "index", "stream-end walks", "evaluation", "training links")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, help="default: the installed transformers' models/")
    parser.add_argument("--step", type=int, default=1, help="every K-th file (default 1: all)")
    parser.add_argument("--profile", type=Path, help="also write a cProfile of the phases after the parse")
    parser.add_argument("--whole-run", action="store_true", help="time the phases of a whole CLI run instead")
    parser.add_argument("--files", type=Path, help="a file listing the paths to check (instead of --tree/--step)")
    args = parser.parse_args(argv)
    tree = args.tree
    if tree is None:
        import importlib.util

        spec = importlib.util.find_spec("transformers")
        tree = Path(list(spec.submodule_search_locations)[0]) / "models"
    files = sorted(tree.rglob("*.py"))[::args.step]
    if args.files:
        files = [Path(line) for line in args.files.read_text(encoding="utf-8").split()]
    if args.whole_run:
        return whole_run([str(path) for path in files])
    import libcst

    from reslint.analysis import MAX_LIBCST_CHARACTERS, cpython_parse, nesting
    from reslint.prefilter import may_hold_model_or_training_code
    from reslint.rules import run_rules
    from reslint.settings import Settings
    from reslint.static.engine import StaticExtractor
    from reslint.static.index import FileIndex
    from reslint.static.positions import SourceMap
    from reslint.static.stream_end import consumed_classes, reached_into
    from reslint.static.training import extract_training

    settings = Settings(static=True)
    spent = dict.fromkeys(PHASES, 0.0)
    profile = cProfile.Profile() if args.profile else None
    analysed = 0
    gc.disable()
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        if not may_hold_model_or_training_code(text) or len(text) > MAX_LIBCST_CHARACTERS:
            continue
        clock = time.process_time()
        try:
            module = libcst.parse_module(text)
        except (libcst.ParserSyntaxError, RecursionError):
            continue
        analysed += 1
        took = {"libcst parse": time.process_time() - clock}
        if profile:
            profile.enable()
        clock = time.process_time()
        checked = cpython_parse(text)
        tree = None
        if not isinstance(checked, SyntaxError):
            nesting(checked)
            tree = checked
        took["cpython check"], clock = time.process_time() - clock, time.process_time()
        positions = SourceMap(module, text, tree)  # as the engine makes it: statements placed when asked
        took["positions"], clock = time.process_time() - clock, time.process_time()
        index = FileIndex(module, str(path))
        took["index"], clock = time.process_time() - clock, time.process_time()
        classes = [info for info in index.classes.values() if index.is_module_class(info)]
        consumed_classes(index, classes)
        reached_into(index)
        took["stream-end walks"], clock = time.process_time() - clock, time.process_time()
        extractor = StaticExtractor(str(path), module, positions, str(path))
        run_rules(extractor.run(), settings)
        # extract_facts builds its index and runs the walks again: counted in their own phases only
        took["evaluation"] = time.process_time() - clock - took["index"] - took["stream-end walks"]
        clock = time.process_time()
        extract_training(text)
        took["training links"] = time.process_time() - clock
        if profile:
            profile.disable()
        for phase in PHASES:
            spent[phase] += took[phase]
        del module, positions, index, extractor, tree, checked
        gc.collect()
    floor = spent["libcst parse"]
    print(f"{len(files)} files, {analysed} parsed by libcst; CPU seconds (x the parse):")
    for phase in PHASES:
        print(f"  {phase:18} {spent[phase]:8.2f}  {spent[phase] / floor:5.2f}x")
    beyond = sum(spent.values()) - floor
    print(f"  {'beyond the parse':18} {beyond:8.2f}  {beyond / floor:5.2f}x   (goal: <= 0.5x)")
    if profile:
        profile.dump_stats(str(args.profile))
    return 0


# (phase, module, attribute): what a whole run spends, in the order the run reaches it
WHOLE_RUN_PHASES = (
    ("settings", "reslint.api", "load_settings"),
    ("discovery", "reslint.api", "find_sources"),
    ("pre-filter", "reslint.analysis", "skippable"),
    ("cpython parse", "reslint.analysis", "cpython_parse"),
    ("nesting check", "reslint.analysis", "nesting"),
    ("libcst parse", "libcst", "parse_module"),
    ("facts", "reslint.static.engine", "extract_facts"),
    ("imported configs", "reslint.project_index", "ProjectIndex.imported_configs"),
    ("config modules read", "reslint.project_index", "ProjectIndex.config_index"),
    ("construction sites", "reslint.project_index", "ProjectIndex.construction_sites_of"),
    ("rules", "reslint.rules", "run_rules"),
    ("file links", "reslint.analysis", "file_links"),
    ("training code", "reslint.static.training", "extract_training"),
    ("filtering", "reslint.runner", "reported"),
    ("fix availability", "reslint.runner", "file_fixes"),
    ("fix availability (in the worker)", "reslint.fixes.worker", "worker_fixes"),
    ("fix: candidates", "reslint.fixes.apply", "candidate"),
    ("fix: re-check", "reslint.fixes.apply", "recheck"),
    ("fix availability (after the run)", "reslint.fixes.apply", "with_fixes"),
    ("project stage", "reslint.runner", "link_project"),
    ("report", "reslint.report", "Report.write"),
)


def whole_run(paths: list[str]) -> int:
    """The phases of `reslint check --static --no-cache --jobs 1 PATHS` run in this process (CPU seconds)."""
    import contextlib
    import functools
    import importlib
    import io
    import threading

    start_up = time.process_time()  # the interpreter's start-up (and argparse, cProfile: this script's own)
    clock = time.process_time()
    import reslint.cli

    imports = time.process_time() - clock
    spent: dict[str, list] = {}
    inside: list[float] = []

    def timed(phase: str, function):
        @functools.wraps(function)
        def run(*args, **kwargs):
            began = time.process_time()
            inside.append(0.0)
            try:
                return function(*args, **kwargs)
            finally:
                nested, took = inside.pop(), time.process_time() - began
                entry = spent.setdefault(phase, [0.0, 0.0, 0])
                entry[0] += took
                entry[1] += took - nested
                entry[2] += 1
                if inside:
                    inside[-1] += took
        return run

    for phase, module_name, attribute in WHOLE_RUN_PHASES:
        owner = importlib.import_module(module_name)
        *outer, name = attribute.split(".")
        for part in outer:
            owner = getattr(owner, part)
        if hasattr(owner, name):  # an older reslint (run with PYTHONPATH) may lack a phase
            setattr(owner, name, timed(phase, getattr(owner, name)))
    import reslint.analysis
    import reslint.runner

    reslint.runner.own_process = True  # as the console script: see runner.settle_collector
    collector = [0.0, 0, 0.0]  # CPU seconds in the cyclic collector, collections, when the current one began

    def collecting(phase: str, info: dict) -> None:
        if phase == "start":
            collector[2] = time.process_time()
        else:
            collector[0] += time.process_time() - collector[2]
            collector[1] += 1

    gc.callbacks.append(collecting)
    # The engine's deep-stack thread would hide its time from this thread's timers: one thread, a large stack.
    reslint.analysis.on_deep_stack = lambda function, *args: function(*args)
    whole = [0.0]

    def check() -> None:
        began = time.process_time()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
            reslint.cli.main(["check", "--exit-zero", "--static", "--no-cache", "--jobs", "1", *paths])
        whole[0] = time.process_time() - began

    threading.stack_size(512 * 2**20)
    thread = threading.Thread(target=check)
    thread.start()
    thread.join()
    print(f"{len(paths)} files; CPU seconds (self: less the phases inside)")
    print(f"  {'interpreter start-up':34} {start_up:7.2f}")
    print(f"  {'import reslint.cli':34} {imports:7.2f}")
    for phase, _, _ in WHOLE_RUN_PHASES:
        if phase in spent:
            total, own, calls = spent[phase]
            print(f"  {phase:34} {total:7.2f}  (self {own:6.2f}, {calls} calls)")
    print(f"  {'cyclic collector (inside the above)':34} {collector[0]:7.2f}  ({collector[1]} collections)")
    print(f"  {'the check (api.check and report)':34} {whole[0]:7.2f}")
    print(f"  {'process':34} {time.process_time():7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
