"""Run the static engine over every Python file of installed packages: a crash hunt on real code.

Run from the repository root, with the Python that has reslint (and the packages) installed:

    python bench/corpus.py                          # transformers and torch, all files, --jobs 2
    python bench/corpus.py --package torch --jobs 1
    python bench/corpus.py --sample 60 --seed 0     # a deterministic sample of 60 files per package

For each package this is `reslint check --static --no-cache` over the package directory, through
the same discovery and runner as the CLI, and prints: the files checked, the paths skipped with
their reasons, the seconds, the findings by code, the internal errors, and the RL901 findings on
files that CPython's own parser accepts. It also walks the package itself and counts Python files
that were neither checked nor under a skipped path ("unaccounted"). Exits 1 when there is an
internal error, an RL901 on a valid file or an unaccounted file; those must all be zero.
Packages are found with importlib, never imported.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import random
import sys
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from reslint.analysis import decode_source
from reslint.discovery import PYTHON_SUFFIXES, find_sources
from reslint.runner import check_sources
from reslint.settings import Settings

DEFAULT_PACKAGES = ("transformers", "torch")


@dataclass
class CorpusResult:
    package: str
    directory: Path
    files_on_disk: int = 0
    files_found: int = 0  # by discovery; all of them are checked unless --sample
    files_checked: int = 0
    skipped: Counter = field(default_factory=Counter)  # reason -> paths
    unaccounted: list[str] = field(default_factory=list)  # Python files neither checked nor skipped
    seconds: float = 0.0
    findings: Counter = field(default_factory=Counter)  # code -> count
    internal_errors: list[tuple[str, str]] = field(default_factory=list)  # (path, error)
    invalid_rl901: list[tuple[str, str]] = field(default_factory=list)  # (path, message) on ast-valid files
    valid_rl901: int = 0  # RL901 on files CPython rejects too: correct findings

    @property
    def ok(self) -> bool:
        return not (self.internal_errors or self.invalid_rl901 or self.unaccounted)


def package_directory(name: str) -> Path:
    """Where an installed package lives, without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"corpus: package {name!r} is not installed")
    return Path(list(spec.submodule_search_locations)[0]).resolve()


def python_files_on_disk(directory: Path) -> list[Path]:
    found = []
    for current, _, filenames in os.walk(directory):
        found.extend(Path(current, name) for name in filenames if name.endswith(PYTHON_SUFFIXES))
    return found


def parses_with_cpython(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            text = decode_source(handle.read())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except (OSError, UnicodeDecodeError, SyntaxError, LookupError, ValueError, RecursionError, MemoryError):
        return False
    return True


def run_corpus(name: str, jobs: int, sample: int | None = None, seed: int = 0) -> CorpusResult:
    directory = package_directory(name)
    cwd = str(directory.parent)  # findings show torch/nn/..., transformers/models/...
    result = CorpusResult(name, directory)
    settings = Settings(static=True, cache=False, jobs=jobs, root=str(directory))
    discovery = find_sources([str(directory)], str(directory), (), cwd=cwd)
    sources = discovery.sources
    result.files_found = len(sources)
    result.skipped.update(entry.reason for entry in discovery.skipped)

    on_disk = python_files_on_disk(directory)
    result.files_on_disk = len(on_disk)
    checked = {os.path.abspath(source.path) for source in sources}
    skipped_dirs = tuple(os.path.join(cwd, entry.display) + os.sep for entry in discovery.skipped if entry.directory)
    skipped_files = {os.path.join(cwd, entry.display) for entry in discovery.skipped if not entry.directory}
    result.unaccounted = sorted(
        str(path) for path in on_disk
        if str(path) not in checked and str(path) not in skipped_files and not str(path).startswith(skipped_dirs)
    )

    if sample is not None and sample < len(sources):
        sources = sorted(random.Random(seed).sample(sources, sample), key=lambda source: source.display)
    by_display = {source.display: source.path for source in sources}
    start = time.perf_counter()
    report = check_sources(sources, settings)
    result.seconds = time.perf_counter() - start
    result.files_checked = report.files_checked
    result.findings.update(finding.code for finding in report.findings)
    result.internal_errors = [(error.path, error.error) for error in report.internal_errors]
    for finding in report.findings:
        if finding.code != "RL901":
            continue
        if parses_with_cpython(by_display.get(finding.path, os.path.join(cwd, finding.path))):
            result.invalid_rl901.append((finding.path, finding.message))
        else:
            result.valid_rl901 += 1
    return result


def summary(result: CorpusResult) -> list[str]:
    skipped = ", ".join(f"{reason}: {count}" for reason, count in sorted(result.skipped.items())) or "none"
    findings = ", ".join(f"{code} {count}" for code, count in sorted(result.findings.items())) or "none"
    lines = [
        f"{result.package} ({result.directory})",
        f"  Python files on disk     {result.files_on_disk}",
        f"  files found, checked     {result.files_found}, {result.files_checked}",
        f"  paths skipped            {sum(result.skipped.values())} ({skipped})",
        f"  unaccounted files        {len(result.unaccounted)}",
        f"  seconds                  {result.seconds:.1f}",
        f"  findings by code         {findings}",
        f"  internal errors          {len(result.internal_errors)}",
        f"  RL901 on valid files     {len(result.invalid_rl901)} (RL901 on files CPython rejects too: {result.valid_rl901})",
    ]
    lines.extend(f"    internal error: {path}: {error}" for path, error in result.internal_errors)
    lines.extend(f"    RL901 on a valid file: {path}: {message}" for path, message in result.invalid_rl901)
    lines.extend(f"    unaccounted: {path}" for path in result.unaccounted)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", action="append", help="installed package to check (repeatable; default: transformers, torch)")
    parser.add_argument("--jobs", type=int, default=2, help="files analysed in parallel (default: 2)")
    parser.add_argument("--sample", type=int, help="check a deterministic random sample of this many files per package")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample (default: 0)")
    args = parser.parse_args(argv)
    ok = True
    for name in args.package or DEFAULT_PACKAGES:
        result = run_corpus(name, args.jobs, args.sample, args.seed)
        print("\n".join(summary(result)), flush=True)
        ok = ok and result.ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
