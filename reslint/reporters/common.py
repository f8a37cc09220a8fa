"""What several reporters share: counts per code, and paths relative to the repository root."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from urllib.parse import quote

from reslint.findings import Finding


def counts_by_code(findings: list[Finding]) -> list[tuple[str, int]]:
    """(code, count) by count descending, then code."""
    counts = Counter(finding.code for finding in findings)
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def skipped_counts(skipped) -> dict[str, int]:
    """{reason: count} of the paths discovery skipped, by reason."""
    return dict(sorted(Counter(entry.reason for entry in skipped).items()))


def trace_kind(reason: str) -> str:
    """The situation behind a model's static-only reason, for the summary's counts."""
    if reason.startswith("build failed") or reason.startswith("building"):
        return "build failed"
    if "timed out" in reason:
        return "timed out"
    if reason.startswith(("importing", "not imported", "import")):
        return "not imported"
    if reason.startswith("cannot infer") or reason.startswith("cannot evaluate"):
        return "no inputs"
    if reason.startswith("reading the"):
        return "graph not read"
    return "trace failed"


def trace_counts(traces) -> dict:
    """traced N of M models, why the rest used static facts, and the files that could not be imported."""
    models = [trace for trace in traces if trace.name]
    return {
        "models_traced": sum(trace.traced for trace in models),
        "models_total": len(models),
        "not_traced": dict(sorted(Counter(trace_kind(trace.reason) for trace in models if not trace.traced).items())),
        "files_not_imported": sum(1 for trace in traces if not trace.name),
    }


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def repository_root(fallback: str, start: str | None = None) -> str:
    """The git toplevel above `start` (default: the cwd), found by its `.git` entry; else `fallback`."""
    directory = Path(os.path.abspath(start or os.getcwd()))
    for candidate in (directory, *directory.parents):
        if (candidate / ".git").exists():
            return str(candidate)
    return os.path.abspath(fallback)


def repository_path(path: str, root: str) -> str | None:
    """`path` (relative to the cwd, or absolute) relative to `root` with forward slashes; None if outside."""
    absolute = os.path.abspath(path)
    try:
        relative = os.path.relpath(absolute, root)
    except ValueError:
        return None
    if relative == os.pardir or relative.startswith(os.pardir + os.sep):
        return None
    return Path(relative).as_posix()


def artifact_uri(path: str, root: str) -> tuple[str, bool]:
    """A URI for `path`: (relative URI, True) under `root`, else (absolute file URI, False)."""
    relative = repository_path(path, root)
    if relative is None:
        return Path(os.path.abspath(path)).as_uri(), False
    return quote(os.fsencode(relative), safe="/"), True  # bytes: a non-UTF-8 name becomes %XX, not an error
