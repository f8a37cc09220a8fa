"""Time `reslint check --static` against the cost of importing libcst.

Run from the repository root, with the Python that has reslint installed:

    python bench/bench_static.py                      # 5 runs per case, table on stdout
    python bench/bench_static.py --repeat 10 --output bench/results.md
    python bench/bench_static.py --file fixtures/models/nanogpt.py --directory fixtures

Every run is a fresh subprocess (`python -c ...` / `python -m reslint ...`), so interpreter
start-up and imports are part of each time, as they are for a pre-commit hook or a CI step.
Cases:

  libcst import    python -c "import libcst"                        the baseline
  one file         reslint check --static --no-cache FILE
  directory        reslint check --static --no-cache DIR
  directory, warm  reslint check --static DIR, after one priming run that fills the cache

The warm case runs on a copy of DIR in a temporary directory, so .reslint_cache/ is never
written into the repository. Findings do not fail the benchmark (--exit-zero); a reslint
exit status other than 0 (an internal or usage error) does. Standard library only.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FILE = REPO_ROOT / "fixtures" / "models" / "nanogpt.py"
DEFAULT_DIRECTORY = REPO_ROOT / "fixtures"


@dataclass
class Case:
    name: str
    command: list[str]
    cwd: Path
    prime: bool = False  # run once, untimed, before timing (fills the cache)


@dataclass
class Result:
    case: Case
    times: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.times)


def reslint(*args: str) -> list[str]:
    return [sys.executable, "-m", "reslint", "check", "--static", "--exit-zero", *args]


def run_once(case: Case) -> float:
    env = dict(os.environ, NO_COLOR="1")
    start = time.perf_counter()
    completed = subprocess.run(
        case.command, cwd=case.cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False
    )
    elapsed = time.perf_counter() - start
    if completed.returncode != 0:
        stderr = completed.stderr.decode(errors="replace").strip()
        raise SystemExit(f"bench: {case.name!r} exited {completed.returncode}: {' '.join(case.command)}\n{stderr}")
    return elapsed


def measure(case: Case, repeat: int) -> Result:
    if case.prime:
        run_once(case)
    return Result(case, [run_once(case) for _ in range(repeat)])


def count_python_files(directory: Path) -> int:
    return sum(1 for _ in directory.rglob("*.py"))


def table(results: Sequence[Result], repeat: int, file: Path, directory: Path, files_in_directory: int) -> str:
    baseline = results[0].median
    lines = [
        f"reslint static benchmark: median of {repeat} fresh-process runs per case",
        f"(Python {platform.python_version()}, {platform.system()} {platform.machine()}, {os.cpu_count()} CPUs;"
        f" file: {display(file)}; directory: {display(directory)}, {files_in_directory} .py files)",
        "",
        "| case | median (s) | ratio to libcst import |",
        "|---|---:|---:|",
    ]
    for result in results:
        lines.append(f"| {result.case.name} | {result.median:.3f} | {result.median / baseline:.2f}x |")
    return "\n".join(lines) + "\n"


def display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per case (default: 5)")
    parser.add_argument("--file", type=Path, default=DEFAULT_FILE, help="the single file to check")
    parser.add_argument("--directory", type=Path, default=DEFAULT_DIRECTORY, help="the directory to check")
    parser.add_argument("--output", type=Path, help="also write the Markdown table to this file")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    for name in ("file", "directory"):
        path = getattr(args, name).resolve()
        if not path.exists():
            parser.error(f"--{name} {path} does not exist")
        setattr(args, name, path)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="reslint-bench-") as scratch:
        warm_copy = Path(scratch) / args.directory.name
        shutil.copytree(
            args.directory, warm_copy, ignore=shutil.ignore_patterns(".reslint_cache", "__pycache__", "*.pyc")
        )
        cases = [
            Case("libcst import (baseline)", [sys.executable, "-c", "import libcst"], REPO_ROOT),
            Case(f"one file, no cache ({args.file.name})", reslint("--no-cache", str(args.file)), REPO_ROOT),
            Case(f"directory, no cache ({args.directory.name}/)", reslint("--no-cache", str(args.directory)), REPO_ROOT),
            # Relative path, run inside the copy: the cache lands in the copy, not in the repository.
            Case(f"directory, warm cache ({args.directory.name}/)", reslint("."), warm_copy, prime=True),
        ]
        results = []
        for case in cases:
            print(f"bench: {case.name} ...", file=sys.stderr, flush=True)
            results.append(measure(case, args.repeat))
        report = table(results, args.repeat, args.file, args.directory, count_python_files(args.directory))
    sys.stdout.write(report)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
