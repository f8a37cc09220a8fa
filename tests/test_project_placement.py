"""Real-code gaps of wave 5 in both engines: a layer's placement decided by how the project's stacks build it
(joeynmt), a skip scaled by a default of 1 is not DeepNorm, and attention whose score method is chosen in
`__init__` and written by hand is sequence evidence for RL201 (espnet2's transducer conformer).

The golden files of fixtures/project/rl101_built_pre and rl201_chosen_* pin the static engine; these tests
pin the full check (real tracing through the CLI) and the trace engine's facts."""

from __future__ import annotations

import json
import shutil

import pytest

from cli_support import run_reslint
from golden import FIXTURES

POST_LN_ADVICE = ("train it with learning-rate warmup (Xiong et al. 2020); Post-LN stacks deeper than about 20 "
                  "layers diverge without DeepNorm-style scaling; Pre-LN needs neither")


@pytest.fixture(scope="module")
def built_pre_full(tmp_path_factory):
    pytest.importorskip("torch")
    project = tmp_path_factory.mktemp("rl101") / "project"
    shutil.copytree(FIXTURES / "project" / "rl101_built_pre", project)
    result = run_reslint("check", "--no-cache", "--jobs", "1", "--select", "RL101", "--output-format", "json", ".",
                         cwd=project)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_full_check_places_a_layer_as_the_stacks_of_other_files_build_it(built_pre_full):
    """EncoderLayer is Post-LN by its own default; encoder.py builds every one with layer_norm="pre": the
    trace engine builds it so, and RL101 stays silent on it (line 43) while the decoder's Post-LN layer, the
    feed-forward the decoder layer builds Post-LN and the layer nothing builds keep theirs."""
    found = sorted((finding["path"], finding["line"]) for finding in built_pre_full["findings"]
                   if finding["path"].startswith("layers.py"))
    assert found == [("layers.py", 22), ("layers.py", 64), ("layers.py", 83)]
    models = {model["name"]: model for model in built_pre_full["models"] if model["path"] == "layers.py"}
    assert models["EncoderLayer"]["placement"] == "pre"
    assert models["EncoderLayer"]["engine"].startswith("traced")
    assert "built with layer_norm='pre', as encoder.py:12 builds it" in models["EncoderLayer"]["notes"]
    assert models["DecoderLayer"]["placement"] == "post"


def test_full_check_calls_a_skip_scaled_by_one_plain_post_ln(built_pre_full):
    """`self.alpha * residual` with alpha's default 1.0 (joeynmt): the trace engine's message is plain Post-LN
    advice, not "scaled DeepNorm-style"."""
    messages = {finding["line"]: finding["message"] for finding in built_pre_full["findings"]
                if finding["path"] == "layers.py"}
    assert messages[64] == ("`DecoderLayer` uses Post-LN: the norm follows `self.alpha * residual + "
                            f"self.attention(x)`; {POST_LN_ADVICE}")


def trace_facts(model, *args):
    """The trace engine's facts of a model defined here, captured as the fx Tracer fallback captures."""
    torch = pytest.importorskip("torch")
    from reslint.trace.capture import Capture, fx_capture
    from reslint.trace.graph_facts import facts_from_capture
    from reslint.trace.inputs import Inputs

    with torch.no_grad():
        module, _ = fx_capture(model, Inputs(args=args))
    return facts_from_capture(Capture(module, "fx", model, type(model).__name__, 1), __file__)


def conformer_block(score: str):
    """A block with a BatchNorm1d convolution module and an attention-like module whose weighting method is
    chosen in `__init__`: `score` "q @ k" (attention written by hand) or "projection" (a channel gate)."""
    torch = pytest.importorskip("torch")
    nn = torch.nn

    class ChosenScore(nn.Module):
        def __init__(self, size=16):
            super().__init__()
            self.q, self.k, self.v = nn.Linear(size, size), nn.Linear(size, size), nn.Linear(size, size)
            self.compute_weights = self.dot_product if score == "q @ k" else self.projected

        def dot_product(self, x):
            return torch.softmax(torch.matmul(self.q(x), self.k(x).transpose(1, 2)) / 4.0, dim=-1)

        def projected(self, x):
            return torch.softmax(self.q(x), dim=-1)

        def forward(self, x):
            weights = self.compute_weights(x)
            return torch.matmul(weights, self.v(x)) if score == "q @ k" else weights * self.v(x)

    class Block(nn.Module):
        def __init__(self, size=16):
            super().__init__()
            self.norm = nn.LayerNorm(size)
            self.attention = ChosenScore(size)
            self.conv = nn.Conv1d(size, size, 3, padding=1)
            self.batch_norm = nn.BatchNorm1d(size)

        def forward(self, x):
            x = x + self.attention(self.norm(x))
            return x + self.batch_norm(self.conv(x.transpose(1, 2))).transpose(1, 2)

    return Block().eval()


def test_trace_engine_counts_a_hand_written_softmax_over_q_k_as_attention():
    torch = pytest.importorskip("torch")
    facts = trace_facts(conformer_block("q @ k"), torch.randn(2, 8, 16))
    assert facts.models[0].sequence_markers == ("attention (softmax over q @ k)",)
    assert [norm.in_sequence_model for norm in facts.norms if norm.kind == "batchnorm"] == [True]


def test_trace_engine_does_not_count_a_softmax_over_a_projection():
    torch = pytest.importorskip("torch")
    facts = trace_facts(conformer_block("projection"), torch.randn(2, 8, 16))
    assert facts.models[0].sequence_markers == ()
    assert [norm.in_sequence_model for norm in facts.norms if norm.kind == "batchnorm"] == [False]


def test_trace_engine_unit_skip_scale_is_plain_post_ln():
    torch = pytest.importorskip("torch")
    nn = torch.nn

    class Scaled(nn.Module):
        def __init__(self, alpha):
            super().__init__()
            self.alpha = alpha
            self.ff = nn.Linear(16, 16)
            self.norm = nn.LayerNorm(16)

        def forward(self, x):
            return self.norm(self.ff(x) + self.alpha * x)

    from reslint.placement import residual_placement

    x = torch.randn(2, 8, 16)
    assert [residual_placement(add) for add in trace_facts(Scaled(1.0), x).residuals] == ["post"]
    assert [residual_placement(add) for add in trace_facts(Scaled(2.0), x).residuals] == ["deepnorm"]
