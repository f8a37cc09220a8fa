"""Patterns of correct upstream models that drew false RL101/RL401/RL402 findings, checked with the full
check (the trace engine and the static engine together, in a subprocess): the same findings as the static
golden files, so neither engine brings the false finding back.

- res-post-norm under stochastic depth (timm swin_transformer_v2_cr.py:495, eva.py EvaBlockPostNorm);
- the embedding stage before a stack (fairseq wav2vec2.py:1023, `x + pos_conv(x)` then the embedding norm);
- a model's raw input scaled by its RMS (espnet tfgridnet_separator.py:141-142): RL403 only;
- a masked GroupNorm over time in a non-causal encoder (transformers pe_audio modeling_pe_audio.py:211), RL402
  only in a causal model.
"""

from __future__ import annotations

import json

import pytest
from cli_support import REPO_ROOT, run_reslint

pytest.importorskip("torch")

FULL_CHECK_FINDINGS = {
    "fixtures/placement/res_post_norm.py": [("RL101", 97)],
    "fixtures/placement/conv_position_embedding.py": [("RL101", 38), ("RL101", 42)],
    "fixtures/norms/input_scaling.py": [("RL401", 19), ("RL402", 19), ("RL402", 29), ("RL403", 43)],
    "fixtures/norms/masked_group_norm.py": [],
    "fixtures/norms/causal_group_norm.py": [("RL402", 15)],
}


@pytest.mark.parametrize("path", sorted(FULL_CHECK_FINDINGS))
def test_the_full_check_keeps_the_true_findings_and_not_the_false_ones(path):
    done = run_reslint("check", path, "--no-cache", "--output-format", "json", "--fail-on", "error",
                       "--select", "RL1,RL4", cwd=REPO_ROOT)
    document = json.loads(done.stdout)
    assert [(f["code"], f["line"]) for f in document["findings"]] == FULL_CHECK_FINDINGS[path]
    assert document["summary"]["models_traced"] == document["summary"]["models_total"] > 0

