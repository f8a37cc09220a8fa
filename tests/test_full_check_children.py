"""What a full check's trace children do beyond tracing their file (BENCHMARKS.md, "Full check speed, wave 7"):
the child that traced a file also checks its fixes (fixes.checked_in_trace_child) after delivering its
result (isolation.run_isolated_then), and shape propagation memoizes ops on meta (trace.meta_memo). The
findings, fixes and summaries stay exactly those of a fresh child per fixed file and of every op run."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from cli_support import REPO_ROOT
from reslint.isolation import ChildFailure, deliver, report_stage, run_isolated_then
from test_fixes import NORM_OVER_HIDDEN_WIDTH

# `reslint check` (full, JSON) in this process, logging each fork this process makes (the children's own
# forks are theirs); `off` runs the fix checks as before, a child of their own per fixed file.
COUNTED_CHECK = '''
import os, sys
main_pid = os.getpid()
log = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)

def audit(event, args):
    if event == "os.fork" and os.getpid() == main_pid:
        os.write(log, b"fork\\n")

sys.addaudithook(audit)
if sys.argv[2] == "off":
    from reslint.fixes import handed_back
    handed_back.wanted = lambda: None
from reslint.cli import main
main(["check", "--no-cache", "--jobs", "1", "--output-format", "json", "--exit-zero", *sys.argv[3:]])
'''


def counted_check(tmp_path, mode: str, *paths: str) -> tuple[dict, int]:
    log = tmp_path / f"forks-{mode}.log"
    log.write_text("", encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", COUNTED_CHECK, str(log), mode, *paths], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), log.read_text(encoding="utf-8").count("fork")


def test_a_files_fixes_are_checked_in_the_child_that_traced_it_with_the_same_fixes_offered(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")
    shutil.copy(REPO_ROOT / "examples" / "tiny_gpt.py", tmp_path / "tiny_gpt.py")
    shutil.copy(REPO_ROOT / "examples" / "pre_ln_gpt.py", tmp_path / "pre_ln_gpt.py")
    # Its RL103 fix passes the static re-check, but the fixed model no longer traces: not offered.
    (tmp_path / "refused.py").write_text(NORM_OVER_HIDDEN_WIDTH, encoding="utf-8")
    files = ("tiny_gpt.py", "pre_ln_gpt.py", "refused.py")

    shared, shared_forks = counted_check(tmp_path, "on", *files)
    alone, alone_forks = counted_check(tmp_path, "off", *files)

    # tiny_gpt.py offers fixes (RL103, RL501), which trace it again with them applied; pre_ln_gpt.py none.
    fixed = sorted((finding["path"], finding["code"], finding["line"]) for finding in shared["findings"]
                   if finding["fix"])
    assert fixed == [("tiny_gpt.py", "RL103", 44), ("tiny_gpt.py", "RL501", 15)]
    assert ("refused.py", "RL103") in {(finding["path"], finding["code"]) for finding in shared["findings"]}
    assert shared == alone
    assert (shared_forks, alone_forks) == (3, 5)  # a trace child per file; before, one more per fixed file


def stages_then_delivers(value, later):
    report_stage("tracing Net", 12, "Net")
    deliver(value)
    report_stage("checking the fixes", 3, "Net")
    return later


def delivers_then_crashes(value):
    deliver(value)
    report_stage("tracing the fixed Net", 7, "Net")
    os.kill(os.getpid(), signal.SIGSEGV)


def delivers_then_hangs(value):
    deliver(value)
    time.sleep(30)


def crashes_before_delivering(value):
    report_stage("tracing Net", 12, "Net")
    os.kill(os.getpid(), signal.SIGSEGV)


def test_run_isolated_then_keeps_the_delivered_result_whatever_happens_after_it():
    assert run_isolated_then(stages_then_delivers, {"a": [1]}, [2], timeout=30, then_timeout=30) == ({"a": [1]}, [2])
    assert run_isolated_then(sorted, [3, 1], timeout=30, then_timeout=30) == ([1, 3], None)
    assert run_isolated_then(delivers_then_crashes, "traced", timeout=30, then_timeout=30) == (
        "traced", ChildFailure("killed by signal 11 (SIGSEGV)", "tracing the fixed Net", 7, "Net"))
    # The later work has its own time limit, from the delivery on.
    value, later = run_isolated_then(delivers_then_hangs, "traced", timeout=30, then_timeout=0.5)
    assert (value, later.cause) == ("traced", "timed out after 0.5 s")
    assert run_isolated_then(crashes_before_delivering, "traced", timeout=30, then_timeout=30) == (
        ChildFailure("killed by signal 11 (SIGSEGV)", "tracing Net", 12, "Net"), None)
    # Without a limit for later work, the delivered value is the result and the child is stopped there.
    assert run_isolated_then(delivers_then_hangs, "traced", timeout=30, then_timeout=None) == ("traced", None)


TWO_ATTENTIONS = '''
import torch
import torch.nn as nn


class TwoAttentions(nn.Module):
    """Two attention layers alike but for batch_first: their weights come out in different shapes."""

    def __init__(self):
        super().__init__()
        self.first = nn.MultiheadAttention(16, 4, batch_first=True)
        self.second = nn.MultiheadAttention(16, 4, batch_first=False)
        self.norm = nn.LayerNorm(16)
        self.wide = nn.LayerNorm(16, eps=1e-3)

    def forward(self, x):
        a, first = self.first(x, x, x)
        b, second = self.second(x, x, x)
        return self.norm(a) + self.wide(b), first, second
'''


def node_values(module, inputs) -> list[tuple]:
    from reslint.trace import fast_capture
    from reslint.trace.inputs import Inputs

    graph = fast_capture.traced(module, Inputs(tuple(inputs)))
    fast_capture.propagate(graph, inputs)
    described = []
    for node in graph.graph.nodes:
        value = node.meta.get("val")
        values = value if isinstance(value, (tuple, list)) else (value,)
        described.append((node.name, tuple((tuple(v.shape), v.dtype, v.stride()) if hasattr(v, "shape") else repr(v)
                                           for v in values)))
    return described


@pytest.mark.parametrize("example", ["tiny_gpt", "pre_ln_gpt", "bert_style", "two_attentions"])
def test_memoized_propagation_gives_every_node_the_value_every_op_run_gives(example, tmp_path):
    torch = pytest.importorskip("torch")
    import importlib.util

    from reslint.trace import meta_memo

    path = tmp_path / "two_attentions.py"
    path.write_text(TWO_ATTENTIONS, encoding="utf-8")
    if example != "two_attentions":
        path = REPO_ROOT / "examples" / f"{example}.py"
    spec = importlib.util.spec_from_file_location(f"memo_{example}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model_class = {"tiny_gpt": "TinyGPT", "pre_ln_gpt": "GPT", "bert_style": "Encoder",
                   "two_attentions": "TwoAttentions"}[example]
    with torch.device("meta"):
        model = getattr(module, model_class)()
    inputs = [torch.empty(2, 5, 16, device="meta")] if example == "two_attentions" else \
        [torch.zeros(2, 8, dtype=torch.long, device="meta")]

    meta_memo._results.clear()
    memoized = node_values(model, inputs)
    entries = len(meta_memo._results)
    meta_memo.ENABLED = False
    try:
        every_op_run = node_values(model, inputs)
    finally:
        meta_memo.ENABLED = True

    assert memoized == every_op_run
    if example == "two_attentions":
        assert [values for name, values in memoized if name in ("getitem_1", "getitem_3")] == [
            (((2, 5, 5), torch.float32, (25, 5, 1)),), (((5, 2, 2), torch.float32, (4, 2, 1)),)]
    else:  # a stack of alike blocks: their ops were run once
        assert 0 < entries < len(memoized) / 4


def test_a_checks_repeated_fix_rechecks_and_candidates_are_computed_once_per_process():
    # with_fixes re-checks a fix's text for the fix, and again when fix_file applies them all.
    from reslint.analysis import analyze_file
    from reslint.fixes import handed_back
    from reslint.settings import Settings

    display = "examples/tiny_gpt.py"
    data = (REPO_ROOT / display).read_bytes()
    engine = Settings(static=True, cache=False, jobs=1)
    analysed, made = [], []

    def analyse(text: bytes):
        analysed.append(text)
        return analyze_file(display, text, engine, links=False)

    def make():
        made.append(1)
        return "fixed text"

    asked = (display, "RL103", display, 44, 5, "TinyGPT", "no final norm")
    with handed_back.for_this_check(None):
        first = handed_back.analysis_of(display, data, engine, lambda: analyse(data))
        again = handed_back.analysis_of(display, data, engine, lambda: analyse(data))
        other = handed_back.analysis_of(display, data + b"\n", engine, lambda: analyse(data + b"\n"))
        candidates = [handed_back.candidate_of(data.decode(), asked, make) for _ in range(2)]
    outside = handed_back.analysis_of(display, data, engine, lambda: analyse(data))  # no check runs: computed

    assert analysed == [data, data + b"\n", data]
    assert first.to_dict() == again.to_dict() == outside.to_dict() and again is not first  # a copy: callers may change it
    assert [(finding.code, finding.line) for finding in again.findings] == [("RL501", 15), ("RL103", 44)]
    assert other.to_dict() == first.to_dict()  # a blank line more changes nothing found
    assert (candidates, made) == (["fixed text", "fixed text"], [1])
