"""`torchrun --nproc-per-node 2 -m reslint probe ...` on the CPU over gloo: DDP and FSDP2 give the single process's norms.

Every rank builds the model from the same seed and runs the same batch, so the gradients are
those of one batch: DDP all-reduces (averages) identical gradients, FSDP2 shards them and the
probe adds up the shards' squared norms. Deselect with `-m "not distributed"`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from cli_support import REPO_ROOT, run_reslint

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.distributed

ARGS = ("fixtures/probe/healthy_gpt.py", "--model", "GPT(GPTConfig(n_layer=2))", "--inputs", "example_batch()",
        "--output-format", "json")


def torchrun(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
               "-m", "reslint", "probe", *args]
    return subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def single() -> dict:
    result = run_reslint("probe", *ARGS, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.skipif(not torch.distributed.is_available() or not torch.distributed.is_gloo_available(),
                    reason="needs torch.distributed with gloo")
@pytest.mark.parametrize("wrap", ["ddp", "fsdp"])
def test_two_ranks_measure_the_single_process_norms(single, wrap):
    result = torchrun(*ARGS, "--wrap", wrap)
    assert result.returncode == 0, result.stderr[-3000:]
    document = json.loads(result.stdout)  # rank 0 alone prints: one document
    assert (document["world_size"], document["wrap"], document["model"]) == (2, wrap, "GPT")
    assert [p["name"] for p in document["parameters"]] == [p["name"] for p in single["parameters"]]
    for mine, reference in zip(document["parameters"], single["parameters"]):
        assert mine["shape"] == reference["shape"]
        assert mine["grad_norm"] == pytest.approx(reference["grad_norm"], rel=1e-5), mine["name"]
        assert mine["param_norm"] == pytest.approx(reference["param_norm"], rel=1e-6), mine["name"]
    assert document["loss"] == pytest.approx(single["loss"], rel=1e-6)
    assert [b["name"] for b in document["blocks"]] == [b["name"] for b in single["blocks"]]
    assert document["findings"] == single["findings"] == []
