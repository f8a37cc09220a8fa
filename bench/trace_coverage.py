"""Trace coverage of the full check on installed transformers: how many outermost models were traced.

    python bench/trace_coverage.py OUTDIR [--every 6] [--timeout 120] [--only NAME ...] [--no-run] [--shard K/N]

Runs `reslint check --output-format json --jobs 1 --no-cache --timeout T FILE` on every
`every`-th `modeling_*.py` of `transformers/models` by sorted path (one process a file, the JSON
kept in OUTDIR, so a run can be resumed and one file rerun), then prints per file the models that
were not traced with the reason, the RL902/RL903 findings by severity, and the totals.
A model counts as traced when its summary's engine is `traced (...)` or its trace record says so
(a graph without stacks or residuals gives no traced summary); as not traced when an
RL902/RL903 finding or its trace record names it (a file-level RL902, an import failure, counts as
one model).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path


def sample(every: int) -> list[Path]:
    import importlib.util

    spec = importlib.util.find_spec("transformers")
    root = Path(spec.origin).parent / "models"
    return sorted(root.glob("*/modeling_*.py"))[::every]


def run_one(path: Path, out: Path, timeout: int) -> dict:
    target = out / (path.parent.name + "__" + path.stem + ".json")
    if not target.exists():
        command = [sys.executable, "-m", "reslint", "check", "--output-format", "json", "--jobs", "1",
                   "--no-cache", "--timeout", str(timeout), str(path)]
        done = subprocess.run(command, capture_output=True, text=True)
        try:
            document = json.loads(done.stdout)
        except json.JSONDecodeError:
            document = {"error": (done.stderr or done.stdout).strip()[-500:], "findings": [], "models": []}
        document["exit"] = done.returncode
        target.write_text(json.dumps(document, indent=1))
    return json.loads(target.read_text())


def tally(document: dict) -> tuple[set, dict]:
    traced = {model["name"] for model in document.get("models", []) if model["engine"].startswith("traced")}
    # A traced model whose graph shows no stack or residual has no traced summary: the trace record says it.
    traced |= {trace["name"] for trace in document.get("traces", []) if trace.get("traced") and trace.get("name")}
    failed = {}
    for finding in document.get("findings", []):
        if finding["code"] in ("RL902", "RL903") and finding["engine"] == "trace":
            name = finding["symbol"] or "<import>"
            if name not in traced:
                failed.setdefault(name, f'{finding["code"]} [{finding["severity"]}] {finding["message"][:200]}')
    # Models that fail at the same line share one finding (Zamba's three builds): the trace records name each.
    for trace in document.get("traces", []):
        name = trace.get("name") or "<import>"
        if not trace.get("traced") and name not in traced:
            failed.setdefault(name, f'(same cause) {(trace.get("reason") or "")[:200]}')
    return traced, failed


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--every", type=int, default=6)
    parser.add_argument("--timeout", type=int, default=120)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--no-run", action="store_true", help="only tally the files OUTDIR already holds")
    parser.add_argument("--shard", default=None, metavar="K/N",
                        help="run only every N-th file of the sample starting at K (two processes: 0/2 and 1/2)")
    options = parser.parse_args()
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    total_traced = total_failed = gate_failures = 0
    paths = sample(options.every)
    if options.shard:
        index, count = (int(part) for part in options.shard.split("/"))
        paths = paths[index::count]
    for path in paths:
        if options.only and path.parent.name not in options.only:
            continue
        if options.no_run and not (out / (path.parent.name + "__" + path.stem + ".json")).exists():
            continue
        document = run_one(path, out, options.timeout)
        traced, failed = tally(document)
        total_traced += len(traced)
        total_failed += len(failed)
        warn = [f for f in document.get("findings", []) if f["code"] in ("RL902", "RL903")
                and f["severity"] != "info"]
        gate_failures += len(warn)
        print(f"{path.parent.name}/{path.name}: traced {len(traced)} of {len(traced) + len(failed)}"
              f" exit {document.get('exit')}" + (f" ERROR {document['error']}" if "error" in document else ""),
              flush=True)
        for name, reason in sorted(failed.items()):
            print(f"    {name}: {reason}")
    models = total_traced + total_failed
    share = 100.0 * total_traced / models if models else 0.0
    print(f"TOTAL traced {total_traced} of {models} models ({share:.1f} %); "
          f"RL902/RL903 above info: {gate_failures}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
