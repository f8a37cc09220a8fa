"""Residuals whose stream depends on a forward argument that defaults to None (issue 12, wave 9).

The static engine judged a root's forward with every such argument given; gluonts' TemporalFusionEncoder
(`cat((ctx, tgt))` as the skip only when `tgt` is passed) and pytorch-forecasting's gated residual network
(`if residual is None: residual = x`) hid their Post-LN stream that way. It now also judges the call without
them, and keeps what the call with them finds. Both modes run through the CLI on the fixture mirroring them.
"""

from __future__ import annotations

import json

import pytest
from cli_support import REPO_ROOT, run_reslint

FIXTURE = "fixtures/residual/optional_forward_args.py"
TAIL = ("; train it with learning-rate warmup (Xiong et al. 2020); Post-LN stacks deeper than about 20 layers "
        "diverge without DeepNorm-style scaling; Pre-LN needs neither")
DEFAULT_CALL = [
    ("RL101", 34, 27, "`TemporalEncoder` uses Post-LN: the norm follows `skip + encodings`" + TAIL),
    ("RL101", 49, 26, "`AddNorm` uses Post-LN: the norm follows `skip + x`" + TAIL),
    ("RL101", 111, 29, "`CrossAttentionWhenGiven` uses Post-LN: the norm follows `residual + self.ff(x)`" + TAIL),
]
# `residual = x if residual is None else residual`: after the call-only finding in line order.
EXPRESSION = ("RL101", 127, 26, "`ConditionalExpressionSkip` uses Post-LN: the norm follows `residual + self.fc(x)`" + TAIL)
# Only when `memory` is passed: the first look's finding, which the default call must not drop.
GIVEN_CALL = ("RL101", 113, 33, "`CrossAttentionWhenGiven` uses Post-LN: the norm follows "
              "`hidden + self.cross(hidden, memory, memory)[0]`" + TAIL)


def _check(*flags):
    done = run_reslint("check", FIXTURE, "--no-cache", "--output-format", "json", "--fail-on", "error", *flags,
                       cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_static_judges_the_call_without_optional_arguments_and_keeps_the_call_with_them():
    document = _check("--static")
    found = [(f["code"], f["line"], f["column"], f["message"]) for f in document["findings"]]
    assert found == DEFAULT_CALL + [GIVEN_CALL, EXPRESSION]
    placements = {model["name"]: model["placement"] for model in document["models"]}
    assert placements == {"TemporalEncoder": "post", "GatedResidualNetwork": "post", "PreNormWithOptionalSkip": "pre",
                          "CrossAttentionWhenGiven": "post", "ConditionalExpressionSkip": "post"}


def test_full_check_traces_the_default_call_and_agrees():
    pytest.importorskip("torch")
    document = _check()
    found = [(f["code"], f["line"], f["column"], f["message"], f["engine"]) for f in document["findings"]]
    # The trace runs the models as discovery calls them, without the optional arguments: the same three adds;
    # the cross-attention add it never runs stays the static engine's.
    assert found == [finding + ("trace",) for finding in DEFAULT_CALL] + [GIVEN_CALL + ("static",),
                                                                          EXPRESSION + ("trace",)]
    assert document["summary"]["models_traced"] == document["summary"]["models_total"] == 6
