"""Where a full check's CPU seconds go, phase by phase: the parent's own work and its trace children's.

    python bench/full_phases.py [reslint check arguments ...]     # default: --no-cache --jobs 1 examples/

Runs `reslint check` in this process (the CLI as a user starts it) with timers around its phases and
prints, for each, the CPU seconds of this process ("self", less the phases nested in it) and of the
children it waited for (the isolated trace children, and whatever they started). Phases:

  start-up          the interpreter, this script and the CLI's imports
  torch import      `require_torch` (torch, torch.export, torch.fx)
  static analysis   the static engine's pass over each file, in the parent, less "project files" (below)
  warm for tracing  what the parent imports/warms once before forking trace children
  trace children    `run_isolated_then` of the files' traces (a child per file); since wave 7 each child
                    also checks its file's fixes after delivering its trace (static re-checks, the fixed
                    file traced: fixes.checked_in_trace_child), so their CPU seconds are counted here
  fix availability  `with_fixes` in the parent: what the children did not hand back...
    fix re-trace    ...and `still_traces`: tracing a fixed file in a child of its own (when not handed back)
  project stage     linking the files (RL301, RL103 across files)

and inside the trace children (each child's own CPU seconds, summed over the children; "child: other"
is what no phase below holds: the fork, importing the checked file, sending the result):

  child: discover    finding the file's models and their construction sites (trace.models.discover_models),
                     less "project files": listing the project's files and the words they import
                     (project_index.ProjectIndex), where the search for construction sites reads them
  child: build       building them on meta (trace.models.build_model)
  child: fx trace    fx's symbolic trace of the fast path (trace.fast_capture.traced)
  child: propagate   its shape propagation on meta (trace.fast_capture.propagate)
  child: export      torch.export, where the fast path does not serve (trace.capture.capture_model)
  child: graph facts reading the graphs and running the rules (analysis.check_captures)
  child: fix checks  the file's fixes checked after delivery (fixes.checked_in_trace_child), less the
                     nested phases: its static re-checks ("child: static"), the fixers' candidates
                     ("child: candidates") and the fixed file's trace (the phases above again)

The numbers are for finding the next hot spot; bench/bench_all.py measures whole runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import sys
import tempfile
from collections import defaultdict

sys.setrecursionlimit(40_000)


def cpu() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


class Phases:
    def __init__(self) -> None:
        self.parent = os.getpid()
        self.own: dict[str, float] = defaultdict(float)
        self.children: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.stack: list[list] = []  # [name, own at start, children at start, nested own, nested children]

    def wrap(self, module, attribute: str, name: str) -> None:
        original = getattr(module, attribute)

        def timed(*args, **kwargs):
            own, children = cpu()
            label = name(self.stack) if callable(name) else name
            if os.getpid() != self.parent and not label.startswith("child: "):
                label = f"child: {label}"
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

    def dumped_by_children(self, module, attribute: str, folder: str) -> None:
        """Each trace child writes its own phases to `folder` when `module.attribute` (its whole work) returns."""
        original = getattr(module, attribute)

        def dumping(*args, **kwargs):
            try:
                return original(*args, **kwargs)
            finally:
                if os.getpid() != self.parent:
                    own, _ = cpu()
                    phases = {label: [self.own[label], self.calls[label]] for label in self.own if label.startswith("child: ")}
                    with open(os.path.join(folder, f"{os.getpid()}.json"), "w") as sink:
                        json.dump({"total": own, "phases": phases}, sink)

        setattr(module, attribute, dumping)

    def add_children(self, folder: str) -> int:
        dumps = [json.load(open(os.path.join(folder, name))) for name in os.listdir(folder)]
        for dump in dumps:
            for label, (own, calls) in dump["phases"].items():
                self.own[label] += own
                self.calls[label] += calls
            self.own["child: other"] += dump["total"] - sum(own for own, _ in dump["phases"].values())
        return len(dumps)


def main(argv: list[str]) -> int:
    from reslint import analysis, api, cli, isolation, runner
    from reslint.fixes import apply, checked_in_trace_child
    from reslint.project_index import ProjectIndex
    from reslint.trace import capture, fast_capture, models

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
    phases.wrap(models, "discover_models", "child: discover")
    phases.wrap(models, "build_model", "child: build")
    phases.wrap(ProjectIndex, "files_importing", "project files")
    phases.wrap(ProjectIndex, "python_files", "project files")
    phases.wrap(fast_capture, "traced", "child: fx trace")
    phases.wrap(fast_capture, "propagate", "child: propagate")
    phases.wrap(capture, "capture_model", "child: export")
    phases.wrap(analysis, "check_captures", "child: graph facts")
    phases.wrap(checked_in_trace_child, "check_fixes_here", "child: fix checks")
    phases.wrap(apply, "fixed_text", "child: candidates")
    folder = tempfile.mkdtemp(prefix="full-phases-")
    phases.dumped_by_children(analysis, "traced_document", folder)
    arguments = argv or ["--no-cache", "--jobs", "1", "examples/"]
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        try:
            cli.cli.main(["check", "--exit-zero", "--quiet", *arguments], standalone_mode=False)
        except SystemExit:
            pass
    own, children = cpu()
    traced_children = phases.add_children(folder)
    accounted_own = sum(value for label, value in phases.own.items() if not label.startswith("child: "))
    print(f"{'phase':<20} {'calls':>5} {'self CPU-s':>11} {'children CPU-s':>15}", file=sys.stderr)
    for name in ["start-up", "torch import", "static analysis", "project files", "warm for tracing",
                 "trace children", "fix availability", "fix re-trace", "project stage"]:
        print(f"{name:<20} {phases.calls.get(name, 0):>5} {phases.own.get(name, 0.0):>11.2f} "
              f"{phases.children.get(name, 0.0):>15.2f}", file=sys.stderr)
    print(f"{'other':<20} {'':>5} {own - accounted_own:>11.2f} {children - sum(phases.children.values()):>15.2f}",
          file=sys.stderr)
    print(f"{'total':<20} {'':>5} {own:>11.2f} {children:>15.2f}   all: {own + children:.2f} CPU-s", file=sys.stderr)
    print(f"inside the {traced_children} trace children (their own CPU seconds):", file=sys.stderr)
    known = ["child: discover", "child: project files", "child: build", "child: fx trace", "child: propagate", "child: export",
             "child: graph facts", "child: fix checks", "child: static analysis", "child: candidates"]
    for name in [*known, *sorted(set(phases.own) - {*known, "child: other"}), "child: other"]:
        if not name.startswith("child: "):
            continue
        print(f"{name:<20} {phases.calls.get(name, 0):>5} {phases.own.get(name, 0.0):>11.2f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
