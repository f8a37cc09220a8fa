"""Issue 17's floor judged without the machine's drift: libcst's bare parse and `reslint check --static` at once.

    python bench/floor_at_once.py [--rounds N] [--tree DIR] [--step K]

bench_all.py's floor case runs the parse floor and reslint back to back in each round, and one run's rounds
spread by a quarter (1.31-1.66x in one run) as the machine's speed drifts within minutes. Here the two run at the
same time, one per core (this machine has two), so that whatever slows the machine slows both: each round's
ratio is CPU time (user + system, from wait4) of reslint over that of the floor. Both being slower side by side
than alone, the CPU seconds are not comparable with bench_all's; the ratio is. Same files as bench_all's floor
case: reslint checks every file of the tree (every K-th with --step), the floor parses those it analyses.
Which one starts first alternates by round.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_all import analysed_files, python_files, transformers_models_dir  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--tree", type=Path, help="default: the installed transformers' models/")
    parser.add_argument("--step", type=int, default=1, help="every k-th file of the tree (default: all)")
    args = parser.parse_args()
    tree = args.tree or transformers_models_dir()
    if tree is None:
        parser.error("no --tree given and transformers is not installed")
    files = python_files(tree)[::args.step]
    if not files:
        parser.error(f"no Python files under {tree}")
    analysed = analysed_files(files)
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory() as scratch:
        listing = Path(scratch, "analysed.txt")
        listing.write_text("".join(f"{path}\n" for path in analysed), encoding="utf-8")
        Path(scratch, "reslint.toml").write_text("")
        floor = [sys.executable, str(Path(__file__).resolve().parent / "bench_all.py"), "--parse-floor-of", str(listing)]
        ours = [sys.executable, "-m", "reslint", "check", "--exit-zero", "--static", "--no-cache", "--jobs", "1",
                "--config", "reslint.toml", *map(str, files)]
        print(f"{len(files)} files, {len(analysed)} analysed; {args.rounds} rounds", flush=True)
        ratios = []
        for round_number in range(args.rounds):
            pair = [("floor", floor), ("reslint", ours)]
            started = {}
            for name, command in pair if round_number % 2 == 0 else pair[::-1]:
                process = subprocess.Popen(command, cwd=scratch, env=env, stdout=subprocess.DEVNULL)
                started[process.pid] = (name, process)
            cpu = {}
            while started:
                pid, status, usage = os.wait4(-1, 0)
                name, process = started.pop(pid)
                process.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it
                if status != 0:
                    print(f"{name} failed (wait status {status})", file=sys.stderr)
                    for _, other in started.values():  # not left running over the scratch folder being removed
                        other.kill()
                        other.wait()
                    return 1
                cpu[name] = usage.ru_utime + usage.ru_stime
            ratios.append(cpu["reslint"] / cpu["floor"])
            print(f"round {round_number}: floor {cpu['floor']:.1f} CPU-s, reslint {cpu['reslint']:.1f} CPU-s, "
                  f"{ratios[-1]:.3f}x", flush=True)
    print(f"reslint / floor: median {statistics.median(ratios):.3f}x (rounds {min(ratios):.3f}-{max(ratios):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
