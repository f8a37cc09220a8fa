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

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, help="default: the installed transformers' models/")
    parser.add_argument("--step", type=int, default=1, help="every K-th file (default 1: all)")
    parser.add_argument("--profile", type=Path, help="also write a cProfile of the phases after the parse")
    args = parser.parse_args(argv)
    tree = args.tree
    if tree is None:
        import importlib.util

        spec = importlib.util.find_spec("transformers")
        tree = Path(list(spec.submodule_search_locations)[0]) / "models"
    files = sorted(tree.rglob("*.py"))[::args.step]
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


if __name__ == "__main__":
    sys.exit(main())
