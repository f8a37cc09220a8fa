"""Where a full check's CPU seconds go, phase by phase: the parent's own work and its trace children's.

    python bench/full_phases.py [reslint check arguments ...]     # default: --no-cache --jobs 1 examples/

Runs `reslint check` in this process (the CLI as a user starts it) with timers around its phases and
prints, for each, the CPU seconds of this process ("self", less the phases nested in it) and of the
children it waited for (the isolated trace children, and whatever they started). Phases:

  start-up          the interpreter, this script and the CLI's imports
  torch import      `require_torch` (torch, torch.export, torch.fx)
  static analysis   the static engine's pass over each file, in the parent
  warm for tracing  what the parent imports/warms once before forking trace children
  trace children    `run_isolated_then` of the files' traces (a child per file); since wave 7 each child
                    also checks its file's fixes after delivering its trace (static re-checks, the fixed
                    file traced: fixes.checked_in_trace_child), so their CPU seconds are counted here
  fix availability  `with_fixes` in the parent: what the children did not hand back...
    fix re-trace    ...and `still_traces`: tracing a fixed file in a child of its own (when not handed back)
  project stage     linking the files (RL301, RL103 across files)

The numbers are for finding the next hot spot; bench/bench_all.py measures whole runs.
"""

from __future__ import annotations

import contextlib
import os
import resource
import sys
from collections import defaultdict

sys.setrecursionlimit(40_000)


def cpu() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


class Phases:
    def __init__(self) -> None:
        self.own: dict[str, float] = defaultdict(float)
        self.children: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.stack: list[list] = []  # [name, own at start, children at start, nested own, nested children]

    def wrap(self, module, attribute: str, name: str) -> None:
        original = getattr(module, attribute)

        def timed(*args, **kwargs):
            own, children = cpu()
            label = name(self.stack) if callable(name) else name
            self.stack.append([label, own, children, 0.0, 0.0])
            try:
                return original(*args, **kwargs)
            finally:
                label, own_start, children_start, nested_own, nested_children = self.stack.pop()
                own, children = cpu()
                spent_own, spent_children = own - own_start, children - children_start
                self.own[label] += spent_own - nested_own
                self.children[label] += spent_children - nested_children
                self.calls[label] += 1
                if self.stack:
                    self.stack[-1][3] += spent_own
                    self.stack[-1][4] += spent_children

        setattr(module, attribute, timed)


def main(argv: list[str]) -> int:
    from reslint import analysis, api, cli, isolation, runner
    from reslint.fixes import apply

    phases = Phases()
    started_own, _ = cpu()
    phases.own["start-up"] = started_own
    phases.wrap(api, "require_torch", "torch import")
    phases.wrap(analysis, "static_analysis", "static analysis")
    phases.wrap(analysis, "warm_for_tracing", "warm for tracing")
    phases.wrap(isolation, "run_isolated_then", lambda stack: "fix re-trace" if any(
        entry[0] == "fix re-trace" for entry in stack) else "trace children")
    phases.wrap(apply, "with_fixes", "fix availability")
    phases.wrap(apply, "still_traces", "fix re-trace")
    phases.wrap(runner, "link_project", "project stage")
    arguments = argv or ["--no-cache", "--jobs", "1", "examples/"]
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        try:
            cli.cli.main(["check", "--exit-zero", "--quiet", *arguments], standalone_mode=False)
        except SystemExit:
            pass
    own, children = cpu()
    accounted_own = sum(phases.own.values())
    print(f"{'phase':<20} {'calls':>5} {'self CPU-s':>11} {'children CPU-s':>15}", file=sys.stderr)
    for name in ["start-up", "torch import", "static analysis", "warm for tracing", "trace children",
                 "fix availability", "fix re-trace", "project stage"]:
        print(f"{name:<20} {phases.calls.get(name, 0):>5} {phases.own.get(name, 0.0):>11.2f} "
              f"{phases.children.get(name, 0.0):>15.2f}", file=sys.stderr)
    print(f"{'other':<20} {'':>5} {own - accounted_own:>11.2f} {children - sum(phases.children.values()):>15.2f}",
          file=sys.stderr)
    print(f"{'total':<20} {'':>5} {own:>11.2f} {children:>15.2f}   all: {own + children:.2f} CPU-s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
