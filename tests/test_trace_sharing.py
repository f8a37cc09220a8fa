"""The full check of transformers files without repeated work: reduced configs and shared backbones.

Real transformers models, real torch export: a backbone traced once for its heads must give the
findings and model summaries that tracing every head alone gives.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import subprocess
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from cli_support import RESLINT  # noqa: E402
from reslint.analysis import check_captures  # noqa: E402
from reslint.settings import Settings  # noqa: E402
from reslint.trace import engine  # noqa: E402
from reslint.trace.config_reduction import tracing_config  # noqa: E402

MODELS = Path(importlib.util.find_spec("transformers").origin).parent / "models"


# ----- reduced configs ---------------------------------------------------------------------------


def test_a_plain_stack_keeps_two_blocks():
    config, changes = tracing_config(transformers.GPT2Config)
    assert changes == [("num_hidden_layers", 12, 2)]
    assert config.n_layer == 2


def test_per_layer_types_keep_the_first_blocks_that_show_every_type_and_experts_keep_top_k():
    config, changes = tracing_config(transformers.Qwen3NextConfig)
    assert changes == [("num_hidden_layers", 48, 4), ("num_experts", 512, 10)]
    assert config.layer_types == ["linear_attention"] * 3 + ["full_attention"]


def test_types_derived_from_the_count_are_kept_too():
    config, changes = tracing_config(transformers.JambaConfig)
    assert changes == [("num_hidden_layers", 32, 5), ("num_experts", 16, 4)]
    assert config.layers_block_type == ["mamba"] * 4 + ["attention"]


def test_sub_configs_get_distinct_counts_so_depths_map_back():
    _, changes = tracing_config(transformers.LlavaConfig)
    assert changes == [("text_config.num_hidden_layers", 32, 2), ("vision_config.num_hidden_layers", 24, 3)]


def test_a_forecaster_without_a_prediction_length_gets_one():
    config, changes = tracing_config(transformers.AutoformerConfig)
    assert changes == [("prediction_length", None, 16)]
    assert config.context_length == 16


def test_a_ctc_head_without_a_vocabulary_gets_a_small_one():
    config, changes = tracing_config(transformers.Wav2Vec2BertConfig)
    assert changes[0] == ("vocab_size", None, 32)
    with torch.device("meta"):
        transformers.Wav2Vec2BertForCTC(config)  # raised ValueError with the default config's vocab_size None


def test_a_layer_shared_by_the_blocks_of_one_type_is_built_with_two_of_them():
    from reslint.trace.models import ModelSpec, reduced_builder

    # Zamba ties one shared transformer across its hybrid layers: one hybrid layer kept leaves nothing to tie.
    config, changes = tracing_config(transformers.ZambaConfig)
    assert changes == [("num_hidden_layers", 76, 3)]
    with torch.device("meta"), pytest.raises(ValueError, match="tie_weights_keys"):
        transformers.ZambaForCausalLM(config)
    spec = ModelSpec("ZambaForCausalLM", 1, lambda: None, cls=transformers.ZambaForCausalLM)
    with torch.device("meta"):
        model = reduced_builder(transformers.ZambaForCausalLM, spec)()
    assert spec.reduction == [("num_hidden_layers", 76, 8)]
    assert model.config.layers_block_type.count("hybrid") == 2


def test_per_layer_indices_are_not_types_and_a_missing_kv_head_count_follows_the_heads():
    from transformers.models.mistral_large4.modeling_mistral_large4 import MistralLarge4ForConditionalGeneration
    from transformers.models.nemotron.modeling_nemotron import NemotronForTokenClassification

    config, changes = tracing_config(MistralLarge4ForConditionalGeneration.config_class)
    assert changes[0] == ("text_config.num_hidden_layers", 72, 4)  # no_rope_layers: 1, 1, 1, 0, ...
    assert config.text_config.kv_source_layers == [0, 1, 2, 3]
    config, changes = tracing_config(NemotronForTokenClassification.config_class)
    assert changes == [("num_key_value_heads", None, 48), ("num_hidden_layers", 32, 2)]


def test_the_summary_says_the_config_was_reduced_and_keeps_the_configs_depth():
    path = MODELS / "decision_transformer" / "modeling_decision_transformer.py"
    done = subprocess.run([str(RESLINT), "check", "--no-cache", "--show-models", "--timeout", "600", str(path)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    summary = next(index for index, line in enumerate(lines) if "DecisionTransformerModel:" in line)
    assert lines[summary].endswith(": DecisionTransformerModel: 3 blocks (self.h: DecisionTransformerGPT2Block), "
                                   "Pre-LN, final norm yes [traced (export, reduced config)]")
    assert lines[summary + 1].strip() == "note: config reduced for tracing: num_hidden_layers 3 -> 2"


# ----- shared backbones ----------------------------------------------------------------------------


def traced(path: Path, share: bool, monkeypatch) -> tuple[set, list, list]:
    monkeypatch.setattr(engine, "SHARE_BACKBONES", share)
    settings = dataclasses.replace(Settings(), timeout=900)
    result = check_captures(engine.trace_file(str(path), None, settings), str(path), settings)
    findings = {(finding.code, finding.line, finding.severity, finding.message) for finding in result.findings}
    summaries = sorted((summary.name, summary.stacks, summary.placement, summary.engine) for summary in result.summaries)
    shared = sorted(summary.name for summary in result.summaries
                    if any("was traced once for the heads" in note for note in summary.notes))
    return findings, summaries, shared


@pytest.mark.parametrize(("family", "heads"), [
    ("bert", ["BertForMaskedLM", "BertForMultipleChoice", "BertForNextSentencePrediction", "BertForPreTraining",
              "BertForQuestionAnswering", "BertForSequenceClassification", "BertForTokenClassification",
              "BertLMHeadModel"]),
    ("gpt2", ["GPT2DoubleHeadsModel", "GPT2ForQuestionAnswering", "GPT2ForSequenceClassification",
              "GPT2ForTokenClassification", "GPT2LMHeadModel"]),
    ("vit", ["ViTForImageClassification", "ViTForMaskedImageModeling"]),
])
def test_a_backbone_traced_once_gives_what_each_head_traced_alone_gives(family, heads, monkeypatch):
    path = MODELS / family / f"modeling_{family}.py"
    alone_findings, alone_summaries, alone_shared = traced(path, False, monkeypatch)
    shared_findings, shared_summaries, shared = traced(path, True, monkeypatch)
    assert alone_shared == []
    assert shared == heads
    assert shared_summaries == alone_summaries
    assert shared_findings == alone_findings


# ----- the stream's end through an offset RMSNorm (Qwen3-Next, Gemma) ------------------------------

OFFSET_RMSNORM_MODEL = '''\
import torch
import torch.nn as nn


class OffsetRMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        output = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)
        return (output * (1.0 + self.weight.float())).type_as(x)


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = OffsetRMSNorm(dim)
        self.ff = nn.Linear(dim, dim)

    def forward(self, x):
        return x + self.ff(self.norm(x))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(100, 16)
        self.layers = nn.ModuleList(Block(16) for _ in range(2))
        self.norm = OffsetRMSNorm(16)
        self.head = nn.Linear(16, 100)

    def forward(self, ids):
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))
'''


def test_type_as_on_the_stream_does_not_bypass_the_final_norm(tmp_path):
    path = tmp_path / "offset_norm.py"
    path.write_text(OFFSET_RMSNORM_MODEL)
    settings = dataclasses.replace(Settings(), timeout=600)
    result = check_captures(engine.trace_file(str(path), None, settings), str(path), settings)
    assert [(summary.name, summary.stacks[0].final_norm, summary.engine) for summary in result.summaries] == [
        ("Net", True, "traced (fx)")]
    assert [finding.code for finding in result.findings if finding.code == "RL103"] == []
