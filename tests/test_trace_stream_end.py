"""The full check's RL103 on diffusers' StableAudioDiTModel (issue 12): Pre-LN blocks behind prepended global
states, `proj_out` straight from the stream, a residual convolution after the head. fixtures/trace/audio_stream_end
mirrors it (our own code): the traced model, not a static fallback, must report the missing final norm at the place
the static check reports it, with an identity stream through every block."""

from __future__ import annotations

import json
import subprocess

import pytest

from cli_support import REPO_ROOT, RESLINT

FIXTURE = "fixtures/trace/audio_stream_end.py"
MESSAGE = ("the Pre-LN stack `self.transformer_blocks` of `AudioDiT` feeds the head/output without a final norm: in "
           "Pre-LN the residual stream is never normalised and grows with depth; add a final LayerNorm/RMSNorm after "
           "the last block (as GPT-2's ln_f)")


def check(*flags: str) -> dict:
    done = subprocess.run([str(RESLINT), "check", "--no-cache", "--jobs", "1", "--exit-zero", "--output-format", "json",
                           *flags, FIXTURE], cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_both_engines_report_the_missing_final_norm_at_one_place():
    pytest.importorskip("torch")
    static, full = check("--static"), check()
    assert [(f["code"], f["line"], f["message"], f["engine"]) for f in static["findings"]] == \
        [("RL103", 59, MESSAGE, "static")]
    assert [(f["code"], f["line"], f["message"], f["engine"]) for f in full["findings"]] == \
        [("RL103", 59, MESSAGE, "trace")]
    [model] = full["models"]
    assert model["engine"].startswith("traced")
    assert [(stack["placement"], stack["final_norm"], stack["depth"]) for stack in model["stacks"]] == \
        [("pre", False, 2)]
