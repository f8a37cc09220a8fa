"""The probe's overhead: `reslint.probe(model, inputs)` against a bare forward+backward of the same model.

Run from the repository root, with the Python that has reslint and torch installed:

    python bench/bench_probe.py                       # CPU, 7 interleaved runs each, table on stdout
    python bench/bench_probe.py --device cuda --repeat 20
    python bench/bench_probe.py --json                # the dict of probe_overhead(), as JSON

Other scripts import `probe_overhead()` (keys below). The model is GPT-style: 12 Pre-LN blocks
(attention + GELU MLP, a final LayerNorm, tied embeddings), width 256, 4 heads, vocabulary 2048,
a batch of 8 sequences of 128 tokens, the loss the sum of the logits.

- Time: the two cases alternate, so that a change of load on a shared machine hits both; the
  first call of each is a warm-up (the probe's first call also reads the model's source once
  for its stacks, which is cached: reported separately as first_probe_s). Ratio of medians
  (time_ratio), of the fastest runs (time_ratio_min, the least disturbed on a busy machine), and
  of the process's CPU time (cpu_time_ratio: all its threads, not what other processes take).
- Peak memory: each case in a fresh process. On the CPU, the peak RSS (getrusage) minus the RSS
  once the model, the inputs and the imports exist; on CUDA, torch.cuda.max_memory_allocated
  minus the memory allocated before the step. Ratio of the two peaks above that baseline.

Goals (step 4): time_ratio <= 1.10 and memory_ratio <= 1.05.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
CONFIG = {"n_layer": 12, "d_model": 256, "n_head": 4, "vocab_size": 2048, "seq": 128, "batch": 8}
TIME_GOAL, MEMORY_GOAL = 1.10, 1.05


def build_model(n_layer: int, d_model: int, n_head: int, vocab_size: int, seq: int) -> Any:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(d_model, 3 * d_model)
            self.proj = nn.Linear(d_model, d_model)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = (z.view(b, t, n_head, c // n_head).transpose(1, 2) for z in self.qkv(x).split(c, dim=2))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.proj(y.transpose(1, 2).reshape(b, t, c))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(d_model)
            self.attn = Attention()
            self.ln_2 = nn.LayerNorm(d_model)
            self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab_size, d_model)
            self.wpe = nn.Embedding(seq, d_model)
            self.blocks = nn.ModuleList([Block() for _ in range(n_layer)])
            self.ln_f = nn.LayerNorm(d_model)
            self.head = nn.Linear(d_model, vocab_size, bias=False)
            self.head.weight = self.wte.weight

        def forward(self, idx):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln_f(x))

    torch.manual_seed(0)
    return GPT()


def setup(device: str) -> tuple[Any, Any]:
    import torch

    model = build_model(CONFIG["n_layer"], CONFIG["d_model"], CONFIG["n_head"], CONFIG["vocab_size"], CONFIG["seq"])
    model.to(device).train()
    inputs = torch.randint(0, CONFIG["vocab_size"], (CONFIG["batch"], CONFIG["seq"]), device=device)
    return model, inputs


def bare_step(model: Any, inputs: Any) -> None:
    model.zero_grad(set_to_none=True)
    model(inputs).sum().backward()
    model.zero_grad(set_to_none=True)


def probe_step(model: Any, inputs: Any) -> Any:
    import reslint

    return reslint.probe(model, inputs, loss="sum")


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def timed(function: Any, device: str, cpu: list[float] | None = None) -> float:
    """Wall seconds of one call; its CPU seconds (all threads of this process) go to `cpu`."""
    synchronize(device)
    start, start_cpu = time.perf_counter(), time.process_time()
    function()
    synchronize(device)
    if cpu is not None:
        cpu.append(time.process_time() - start_cpu)
    return time.perf_counter() - start


def current_rss() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure_memory(case: str, device: str) -> dict:
    """In this (fresh) process: the peak memory of one step of `case` above the baseline."""
    import torch

    from reslint.probing.structure import find_layout

    model, inputs = setup(device)
    find_layout(model)  # imports and the cached read of the source happen before the baseline: a one-time cost
    import reslint.probing.api  # noqa: F401
    import reslint.probing.diagnose  # noqa: F401
    step = (lambda: bare_step(model, inputs)) if case == "bare" else (lambda: probe_step(model, inputs))
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        step()
        torch.cuda.synchronize()
        return {"before": before, "peak": torch.cuda.max_memory_allocated(), "method": "torch.cuda.max_memory_allocated"}
    before = current_rss()
    step()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kilobytes on Linux
    return {"before": before, "peak": peak, "method": "peak RSS (getrusage) above the RSS before the step"}


def memory_in_subprocess(case: str, device: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--measure-memory", case, "--device", device],
                            capture_output=True, text=True, timeout=900, env=env, cwd=REPO_ROOT)
    if result.returncode != 0:
        raise RuntimeError(f"memory measurement of {case} failed: {result.stderr.strip()[-2000:]}")
    return json.loads(result.stdout)


def probe_overhead(device: str = "cpu", repeat: int = 7, memory: bool = True, threads: int | None = None) -> dict:
    """Overhead of the probe over a bare forward+backward; see the module docstring for the method.

    `threads` sets torch's intra-op threads (default: torch's own choice); on a loaded machine one
    thread keeps idle threads from spinning into the CPU time.
    """
    import torch

    if threads:
        torch.set_num_threads(threads)
    model, inputs = setup(device)
    parameters = sum(parameter.numel() for parameter in model.parameters())
    timed(lambda: bare_step(model, inputs), device)  # the model's own warm-up, before the probe's first call
    first_probe = timed(lambda: probe_step(model, inputs), device)
    bare_times, probe_times, bare_cpu, probe_cpu = [], [], [], []
    for _ in range(repeat):
        bare_times.append(timed(lambda: bare_step(model, inputs), device, bare_cpu))
        probe_times.append(timed(lambda: probe_step(model, inputs), device, probe_cpu))
    bare, probed = statistics.median(bare_times), statistics.median(probe_times)
    result = {
        "device": device,
        "model": f"GPT-style, {CONFIG['n_layer']} Pre-LN blocks, width {CONFIG['d_model']}, {CONFIG['n_head']} heads, "
                 f"vocabulary {CONFIG['vocab_size']}, inputs long[{CONFIG['batch']},{CONFIG['seq']}]",
        "parameters": parameters,
        "repeat": repeat,
        "bare_time_s": bare,
        "probe_time_s": probed,
        "time_ratio": probed / bare,
        # On a shared machine the fastest run is the least disturbed one: a second, less noisy estimate.
        "time_ratio_min": min(probe_times) / min(bare_times),
        # CPU seconds of this process: what the probe costs, whatever else the machine runs.
        "cpu_time_ratio": statistics.median(probe_cpu) / statistics.median(bare_cpu),
        "bare_cpu_s": statistics.median(bare_cpu),
        "probe_cpu_s": statistics.median(probe_cpu),
        "bare_times_s": bare_times,
        "probe_times_s": probe_times,
        "first_probe_s": first_probe,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}",
    }
    if memory:
        bare_memory = memory_in_subprocess("bare", device)
        probe_memory = memory_in_subprocess("probe", device)
        result.update({
            "bare_peak_bytes": bare_memory["peak"] - bare_memory["before"],
            "probe_peak_bytes": probe_memory["peak"] - probe_memory["before"],
            "memory_method": bare_memory["method"],
        })
        result["memory_ratio"] = result["probe_peak_bytes"] / result["bare_peak_bytes"]
    else:
        result.update({"bare_peak_bytes": None, "probe_peak_bytes": None, "memory_ratio": math.nan,
                       "memory_method": "not measured"})
    result["time_goal"], result["memory_goal"] = TIME_GOAL, MEMORY_GOAL
    return result


def table(result: dict) -> str:
    mib = 1024 * 1024

    def memory(value: Any) -> str:
        return "-" if value is None else f"{value / mib:.1f} MiB"

    memory_ratio = "-" if math.isnan(result["memory_ratio"]) else f"{result['memory_ratio']:.3f}x"

    rows = [
        ("", "bare forward+backward", "reslint.probe", "ratio", "goal"),
        ("wall time (median)", f"{result['bare_time_s'] * 1000:.1f} ms", f"{result['probe_time_s'] * 1000:.1f} ms",
         f"{result['time_ratio']:.3f}x", f"<= {TIME_GOAL:.2f}x"),
        ("wall time (fastest run)", f"{min(result['bare_times_s']) * 1000:.1f} ms",
         f"{min(result['probe_times_s']) * 1000:.1f} ms", f"{result['time_ratio_min']:.3f}x", ""),
        ("CPU time of the process (median)", f"{result['bare_cpu_s'] * 1000:.1f} ms",
         f"{result['probe_cpu_s'] * 1000:.1f} ms", f"{result['cpu_time_ratio']:.3f}x", ""),
        ("peak memory above baseline", memory(result["bare_peak_bytes"]), memory(result["probe_peak_bytes"]),
         memory_ratio, f"<= {MEMORY_GOAL:.2f}x"),
    ]
    lines = [f"{result['model']}, {result['parameters'] / 1e6:.1f}M parameters, device {result['device']}, "
             f"torch {result['torch']}, {result['threads']} threads; {result['machine']}",
             f"{result['repeat']} interleaved runs; first probe call (reads the source once) "
             f"{result['first_probe_s'] * 1000:.0f} ms; memory: {result['memory_method']}", ""]
    lines.append("| " + " | ".join(rows[0]) + " |")
    lines.append("|---|---:|---:|---:|---:|")
    lines.extend("| " + " | ".join(row) + " |" for row in rows[1:])
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print probe_overhead()'s dict as JSON")
    parser.add_argument("--no-memory", action="store_true", help="time only")
    parser.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's choice)")
    parser.add_argument("--measure-memory", choices=("bare", "probe"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure_memory:
        print(json.dumps(measure_memory(args.measure_memory, args.device)))
        return 0
    result = probe_overhead(args.device, args.repeat, memory=not args.no_memory, threads=args.threads)
    print(json.dumps(result, indent=2) if args.json else table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
