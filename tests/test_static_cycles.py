"""A static check leaves no reference cycle holding its files: reference counting, not the cyclic collector, frees
each file's libcst tree, its index and the engine's graphs when the file's pipeline ends (wave 11). The collector's
walks over those cycles were an eighth of a static check's CPU; a cycle that comes back brings them back."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

# The console script over the folders given, with what it does after each file (runner.settle_collector) replaced
# by a full collection that saves its garbage: what of libcst's and reslint's the file's check left in cycles.
CYCLE_CHECK = """
import collections, gc, sys
import reslint.runner

found = collections.Counter()
kept = []  # garbage looked at stays referenced here, so a later file's collection does not count it again

def defined(thing):  # a class or function is named for where it is defined, anything else for its type
    return thing if isinstance(thing, type) or type(thing).__name__ == "function" else type(thing)

def cycles_of_the_file():
    gc.set_debug(gc.DEBUG_SAVEALL)
    gc.collect()
    gc.set_debug(0)
    found.update(f"{defined(thing).__module__}.{defined(thing).__qualname__}" for thing in gc.garbage
                 if (defined(thing).__module__ or "").split(".")[0] in ("libcst", "reslint"))
    kept.extend(gc.garbage)
    gc.garbage.clear()

reslint.runner.settle_collector = cycles_of_the_file
sys.argv = ["reslint", "check", "--static", "--no-cache", "--jobs", "1", "--exit-zero", "-q", *sys.argv[1:]]
from reslint.cli import main
try:
    main()
finally:
    print("cyclic", sum(found.values()), sorted(found.items(), key=lambda item: -item[1])[:12])
"""


def test_a_static_check_leaves_its_files_trees_to_reference_counting() -> None:
    """Every fixture and example, fix candidates and their re-checks included: nothing of libcst's (the trees) or
    reslint's (indexes, specs, graphs, visitor classes, self-calling closures) is ever cyclic garbage."""
    run = subprocess.run([sys.executable, "-c", CYCLE_CHECK, "fixtures/", "examples/"], cwd=REPO_ROOT,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-2000:]
    last = run.stdout.strip().splitlines()[-1]
    assert last == "cyclic 0 []", last


# Left: a construction-site finder holds its file readers, which hold it (a reader handed on outlives a weak finder);
# their trees are CPython's, of training code, not the libcst tree.
KNOWN_CYCLES = {"reslint.static.construction_sites.Finder", "reslint.static.construction_sites.FileReader"}


def test_a_files_analysis_leaves_nothing_to_the_cyclic_collector() -> None:
    """In this process, each fixture and example analysed with the collector off, its result then dropped: a full
    collection finds nothing of libcst's or reslint's. The check above runs the console script, whose project index
    keeps the files' indexes for the run (their cycles would be garbage only later); here nothing keeps them."""
    import gc

    from reslint.analysis import analyze_file
    from reslint.settings import Settings

    files = sorted(path for folder in ("fixtures", "examples") for path in (REPO_ROOT / folder).rglob("*.py"))
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    gc.freeze()  # the collections below walk only what the files' analyses left
    try:
        left: dict[str, set[str]] = {}
        for path in files:
            analyze_file(str(path.relative_to(REPO_ROOT)), path.read_bytes(), Settings(static=True))
            gc.set_debug(gc.DEBUG_SAVEALL)
            gc.collect()
            gc.set_debug(0)
            kinds = {f"{type(thing).__module__}.{type(thing).__qualname__}" for thing in gc.garbage
                     if (type(thing).__module__ or "").split(".")[0] in ("libcst", "reslint")} - KNOWN_CYCLES
            gc.garbage.clear()
            gc.collect()  # what was cyclic garbage, no longer saved
            if kinds:
                left[path.name] = kinds
    finally:
        gc.unfreeze()
        if enabled:
            gc.enable()
    assert left == {}, sorted(left.items())[:5]


def test_a_scope_cuts_only_the_graphs_its_own_thread_built() -> None:
    """A library caller analysing files in two threads: one file's analysis ending cuts its own graphs, never the
    graphs another thread is still building and reading."""
    import threading

    from reslint.static.graph import Graph, cut_when_done

    inside = threading.Event()
    release = threading.Event()
    elsewhere: list[Graph] = []

    def other_thread() -> None:
        with cut_when_done():
            elsewhere.append(Graph())
            elsewhere[0].add("input", (), None)
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=other_thread)
    with cut_when_done():
        thread.start()
        inside.wait(10)
        mine = Graph()
        mine.add("input", (), None)
    assert mine.nodes[0].users is None  # this thread's scope ended: its graph is cut
    assert elsewhere[0].nodes[0].users == []  # the other thread's graph, its scope still open, is not
    release.set()
    thread.join()
    assert elsewhere[0].nodes[0].users is None
