"""RL103 decided where the stream ends, in both engines: fixtures/final_norm checked as one project,
statically and with the trace engine (real torch.export graphs), must give the same findings and the
same "final norm" verdicts. Each fixture mirrors a transformers pattern that drew a false RL103."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from reslint.api import check
from reslint.placement import residual_placement
from reslint.static.engine import extract_facts

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = "fixtures/final_norm"

# The RL103 that must fire (file, line); every other Pre-LN stack of the fixtures must stay silent.
EXPECTED_FINDINGS = [
    (f"{FIXTURES}/forecaster.py", 32),  # TimesFM: residual-MLP head, loop-carried forecast, loss (test_stream_precision)
    (f"{FIXTURES}/headless_consumer/encoder.py", 26),  # lm.py feeds the stack of encoder.py to its head raw
    (f"{FIXTURES}/init_helper_method.py", 42),  # ESM: the layers built in a helper __init__ calls, no final norm
    (f"{FIXTURES}/lost_conditional_features.py", 38),  # Step3p7: features merged behind a condition, kept in a dict
    (f"{FIXTURES}/lost_inherited_forward/modeling.py", 17),  # Step3p7's flattened copy: as vision_language.py
    (f"{FIXTURES}/lost_inherited_forward/modular.py", 22),  # its modular copy: the consumer inherits forward
    (f"{FIXTURES}/lost_shared_blocks.py", 31),  # PocketTTS: the encoder's stream through the decoder's blocks
    (f"{FIXTURES}/lost_visible_loader.py", 53),  # Mimi: the encoder loaded through AutoModel, defined in the file
    # ESM-1: imported layers returning (stream, attention weights), in a namespace subpackage (no __init__.py)
    (f"{FIXTURES}/namespace_subpackage/protein_lm/model/esm1.py", 22),
    (f"{FIXTURES}/neck.py", 68),  # ConvNeckEncoder: a neck of convolutions only
    # vit-pytorch: the norm is the first op of each sublayer, the stack's loop runs groups of sublayers.
    (f"{FIXTURES}/prenorm_in_sublayer_einops.py", 31),  # einops Reduce, then a bare Linear
    (f"{FIXTURES}/prenorm_in_sublayer_groups.py", 62),  # CrossFormer: stages run as groups, pooled into a Linear
    (f"{FIXTURES}/prenorm_in_sublayer_stages.py", 56),  # CvT: stages built as a list, then nn.Sequential
    (f"{FIXTURES}/prenorm_in_sublayer_vit.py", 40),  # 3D SimpleViT: mean-pooled into a bare Linear
    (f"{FIXTURES}/rms_spellings.py", 69),  # UnnormalisedLM: nothing before the head
    (f"{FIXTURES}/stream_end_added_back_normed.py", 57),  # X-CLIP-like prompts added back, the sum never normed
    (f"{FIXTURES}/stream_end_gated_expert.py", 42),  # ExpertStack: the expert sublayers returned as they are
    (f"{FIXTURES}/stream_end_hidden_states.py", 94),  # RawStatesEncoder: raw states and a raw stream
    (f"{FIXTURES}/stream_end_optional_input.py", 80),  # MaskedPoolBackbone: a head without a norm
    (f"{FIXTURES}/stream_end_returned_dict.py", 38),  # ESM-2-like: the raw stream returned in a dict
    (f"{FIXTURES}/stream_end_subblock/swin.py", 41),  # SwinStage: separator.py's blocks pass it on raw
    (f"{FIXTURES}/vision_language.py", 30),  # Step3p7: a bare Linear projector, features kept in a dict
]

# (file, model) -> final norm of its stack, in both engines.
EXPECTED_FINAL_NORM = {
    ("branch_consumer/recurrent.py", "RecurrentStack"): True,  # lm.py norms it; built in an if branch (mambapy)
    ("branch_consumer/attention.py", "AttentionStack"): True,  # and in the else branch
    ("headless_consumer/encoder.py", "Transformer"): False,
    ("init_helper_method.py", "WithoutFinalNorm"): False,
    ("init_helper_method_normed.py", "WithFinalNorm"): True,  # the norm built by the same helper method
    ("l2_normalize.py", "QuantizingEncoder"): True,  # F.normalize
    ("l2_normalize.py", "PromptEmbedder"): True,  # x / x.norm(dim=-1, keepdim=True)
    ("last_block_norm.py", "ConformerEncoder"): True,  # every layer ends in its own LayerNorm
    ("last_block_norm.py", "NormedLastLayerEncoder"): True,  # the last layer built with add_norm=True
    ("lost_conditional_features.py", "MergedFeaturesModel"): False,
    ("lost_conditional_features.py", "PyramidDetector"): True,  # the stages asked for go into a LayerNorm
    ("lost_generator_branch.py", "TokenTransformer"): True,
    ("lost_shared_blocks.py", "Codec"): False,  # a block's pre-norm on the stream entering it is no final norm
    ("lost_shared_blocks.py", "NormedCodec"): True,
    ("namespace_subpackage/protein_lm/model/esm1.py", "ProteinLanguageModel"): False,  # the weights to a head
    ("namespace_subpackage/protein_lm/model/esm1b.py", "NormedProteinLanguageModel"): True,  # absolute import
    ("neck.py", "NeckedEncoder"): True,  # conv + nn.LayerNorm subclass permuting around super().forward
    ("neck.py", "ConvNeckEncoder"): False,
    ("parent_norm/encoder.py", "Transformer"): True,  # vision.py applies ln_post
    ("prenorm_in_sublayer_groups.py", "CrossFormer"): False,
    ("prenorm_in_sublayer_stages.py", "CvT"): False,
    ("prenorm_in_sublayer_vit.py", "VideoViT"): False,
    ("prenorm_in_sublayer_vit.py", "ImageViT"): True,  # linear_head = Sequential(LayerNorm, Linear)
    ("prenorm_in_sublayer_vit.py", "SimpleViT"): True,  # the stack's own norm
    ("projector.py", "ImageEncoder"): True,  # the post-norm in forward_post
    ("rms_spellings.py", "PowRMSNormLM"): True,  # x * torch.pow(mean_squared, -0.5)
    ("rms_spellings.py", "RootRMSNormLM"): True,  # x / torch.sqrt(mean(x**2) + eps)
    ("rms_spellings.py", "UnnormalisedLM"): False,
    ("stages.py", "ImageClassifier"): True,  # next stage's embedding norm; the classifier's norm
    ("stream_end_added_back_normed.py", "VideoTextModel"): True,  # the sum of text and prompts, L2-normalised
    ("stream_end_added_back_normed.py", "RawVideoTextModel"): False,  # the sum reaches the logits raw
    ("stream_end_gated_expert.py", "GatedExpertLayer"): None,  # mixed back into its input: a residual branch
    ("stream_end_gated_expert.py", "ExpertStack"): False,
    ("stream_end_hidden_states.py", "StatesEncoder"): True,  # ln_post on the stream, raw states beside it
    ("stream_end_hidden_states.py", "RawStatesEncoder"): False,
    ("stream_end_optional_input.py", "MaskedBackbone"): True,  # the head's norm, run when no mask is given
    ("stream_end_optional_input.py", "MaskedPoolBackbone"): False,
    ("stream_end_optional_input_replayed.py", "Calibrated"): True,  # the backbone's head, its call replayed
    ("stream_end_returned_dict.py", "ReturnsDict"): False,
    ("stream_end_returned_dict_normed.py", "ReturnsDictNormed"): True,  # the normed stream under a key
    ("stream_end_subblock/swin.py", "SwinLayer"): None,  # a sub-block of separator.py's ATF blocks
    ("stream_end_subblock/swin.py", "SwinStage"): False,
}


def run(static: bool):
    return check(FIXTURES, static=static, select="RL103", jobs=1, cache=False, cwd=ROOT)


def findings(report) -> list[tuple[str, int]]:
    assert {finding.code for finding in report.findings} <= {"RL103"}
    return sorted((finding.path, finding.line) for finding in report.findings)


def final_norms(report) -> dict[tuple[str, str], bool | None]:
    verdicts = {}
    for model in report.models:
        for stack in model.stacks:
            verdicts[(model.path.removeprefix(FIXTURES + "/"), model.name)] = stack.final_norm
    return verdicts


@pytest.fixture(scope="module")
def static_report():
    return run(static=True)


@pytest.fixture(scope="module")
def traced_report():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    return run(static=False)


def test_static_engine_reports_only_the_true_missing_final_norms(static_report):
    assert findings(static_report) == EXPECTED_FINDINGS
    verdicts = final_norms(static_report)
    assert {key: verdicts.get(key) for key in EXPECTED_FINAL_NORM} == EXPECTED_FINAL_NORM


def test_trace_engine_agrees(traced_report):
    assert findings(traced_report) == EXPECTED_FINDINGS
    verdicts = final_norms(traced_report)
    assert {key: verdicts.get(key) for key in EXPECTED_FINAL_NORM} == EXPECTED_FINAL_NORM
    traced = {(model.path.removeprefix(FIXTURES + "/"), model.name) for model in traced_report.models
              if model.engine.startswith("traced")}
    assert set(EXPECTED_FINAL_NORM) - {("projector.py", "ImageEncoder")} <= traced
    # Mimi: the trace engine builds the codec (the registry loads the encoder) and decides where the static
    # engine follows the loader it sees; the loaded encoder alone is the consumer's to decide.
    assert verdicts[("lost_visible_loader.py", "CodecModel")] is False
    # The trace engine also sees the stack of another file inside the model that builds it.
    assert verdicts[("headless_consumer/lm.py", "LanguageModel")] is False
    assert verdicts[("parent_norm/vision.py", "VisionTransformer")] is True
    # BridgeTower: the parent runs the blocks itself, returns their raw states and normalises the stream.
    assert verdicts[("stream_end_hidden_states.py", "BridgeModel")] is True


def test_a_forward_inherited_from_another_file_decides_where_the_stream_ends(static_report, traced_report):
    """transformers' modular_step3p7.py: `Step3p7Model(DeepseekOcr2Model)` overrides `__init__` and
    `get_image_features` and inherits `forward` from another file, so it is no module class in its file. The
    static engine follows the inherited forward through the project index: RL103 on the raw tower as on the
    flattened copy (EXPECTED_FINDINGS), and a norm in the inherited forward bounds the other tower's stream."""
    verdicts = final_norms(static_report)
    assert verdicts[("lost_inherited_forward/modular.py", "RawTower")] is False
    assert verdicts[("lost_inherited_forward/modular.py", "FeatureTower")] is True
    traced = final_norms(traced_report)
    assert traced[("lost_inherited_forward/modular.py", "NormedFeaturesModel")] is True
    assert traced[("lost_inherited_forward/modular.py", "FeatureTower")] is True


def test_einops_layers_carry_the_stream_to_the_head(static_report):
    """Rearrange and Reduce are known by name (einops is not imported): the stream goes on through them."""
    verdicts = final_norms(static_report)
    assert verdicts[("prenorm_in_sublayer_einops.py", "PooledClassifier")] is False
    assert verdicts[("prenorm_in_sublayer_einops.py", "NormedPooledClassifier")] is True


def test_a_stack_of_sublayer_groups_is_one_stack_in_both_engines(static_report, traced_report):
    """`for attn, ff in self.layers` over `ModuleList([Attention, FeedForward])` groups: the groups are the
    blocks, named by their modules, and the stack is the innermost one (not CvT's stages around it)."""
    for report in (static_report, traced_report):
        stacks = {(model.name, stack.attribute, stack.block) for model in report.models for stack in model.stacks
                  if model.path.endswith(("prenorm_in_sublayer_stages.py", "prenorm_in_sublayer_groups.py"))}
        assert stacks == {("CvT", "self.layers", "Attention, FeedForward"),
                          ("CrossFormer", "self.layers", "Attention, Sequential")}


def test_static_engine_stays_undecided_where_it_cannot_follow_the_stream(static_report):
    """The vision tower built through AutoModel from a sub-config, and stacks whose outputs go into a list."""
    verdicts = final_norms(static_report)
    assert verdicts[("projector.py", "VisionTower")] is None
    assert verdicts[("projector.py", "PerLayerNormTower")] is None


def test_trace_engine_leaves_a_consumed_tower_to_its_consumer():
    """VisionTower traced alone returns its raw stream, but VisionLanguageModel projects and normalises it."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    report = check(f"{FIXTURES}/projector.py", select="RL103", jobs=1, cache=False, cwd=ROOT,
                   models=f"{FIXTURES}/projector.py:VisionTower(TowerConfig())", inputs="float[2,16,48]")
    assert report.findings == []
    tower = [model for model in report.models if model.name == "VisionTower"]
    assert [model.engine for model in tower] == ["traced (fx)"]  # fast_capture: export's facts
    assert [stack.final_norm for stack in tower[0].stacks] == [None]


@pytest.mark.parametrize("static", [True, False], ids=["static", "full"])
def test_a_sub_block_of_another_files_blocks_is_not_where_the_stream_ends(static):
    """swin.py checked alone: separator.py (outside the run) builds SwinLayer inside the ATF blocks it
    stacks, and normalises after it, so SwinLayer's own output is no stream end; SwinStage, which
    separator.py's blocks pass on raw, keeps its finding."""
    if not static:
        pytest.importorskip("torch")
    report = check(f"{FIXTURES}/stream_end_subblock/swin.py", static=static, select="RL103", jobs=1, cache=False,
                   cwd=ROOT)
    assert findings(report) == [(f"{FIXTURES}/stream_end_subblock/swin.py", 41)]
    verdicts = final_norms(report)
    assert verdicts[("stream_end_subblock/swin.py", "SwinLayer")] is None
    assert verdicts[("stream_end_subblock/swin.py", "SwinStage")] is False
    if not static:
        assert {model.engine for model in report.models} == {"traced (fx)"}  # fast_capture


def test_a_stack_added_back_into_its_input_follows_the_outer_stream_to_its_norm(static_report, traced_report):
    """X-CLIP's prompt generator: `text + prompts(text, video)`, then L2-normalised. Both engines follow the
    sum on (VideoTextModel: normalised); the raw sibling's sum reaches the logits raw, and the last block's own
    norm on the stream entering its MLP branch does not end it."""
    for report in (static_report, traced_report):
        verdicts = final_norms(report)
        assert verdicts[("stream_end_added_back_normed.py", "VideoTextModel")] is True
        assert verdicts[("stream_end_added_back_normed.py", "RawVideoTextModel")] is False


def test_a_generator_expression_carries_the_attention_branch():
    """`q, k, v = (part.view(...) for part in (q, k, v))`: the static dataflow follows the values through the
    generator, so the add around the attention is a Pre-LN residual like the feed-forward's."""
    path = ROOT / FIXTURES / "lost_generator_branch.py"
    facts = extract_facts(f"{FIXTURES}/lost_generator_branch.py", cst.parse_module(path.read_text()), str(path))
    assert [(add.span.line, residual_placement(add), add.stack) for add in facts.residuals] == [
        (40, "pre", "TokenTransformer.blocks"), (41, "pre", "TokenTransformer.blocks")]


def test_the_loaded_encoder_of_a_visible_loader_is_decided_by_its_consumer(static_report):
    """Mimi, statically: CodecModel loads CodecEncoderModel through `AutoModel.from_config(config.encoder_config)`
    and quantizes its raw stream; Gemma 4's embedder (auto_tower.py) normalises it: silent there."""
    verdicts = final_norms(static_report)
    assert verdicts[("lost_visible_loader.py", "CodecEncoderModel")] is False
    assert verdicts[("auto_tower.py", "EncoderVisionModel")] is True


PAIR_LAYERS = '''import torch.nn as nn


class PairLayer(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.ff = nn.Linear(dim, dim)
        self.out_norm = nn.LayerNorm(dim)

    def forward(self, x):
        x = x + self.ff(self.norm(x))
        return x, self.out_norm(x)
'''

PAIR_MODEL = '''import torch.nn as nn

from .layers import PairLayer


class PairModel(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.layers = nn.ModuleList([PairLayer(dim) for _ in range(2)])
        self.head = nn.Linear(dim, 4)

    def forward(self, x):
        for layer in self.layers:
            x, normed = layer(x)
        return self.head(normed)
'''


def test_an_imported_blocks_closing_norm_bounds_the_stream_it_returns(tmp_path):
    """`return x, self.out_norm(x)` in another file: the second item is the stream normalised, not a side output
    beside it, so the model's head reading it is bounded (the imported block used to be opaque: a false RL103)."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "layers.py").write_text(PAIR_LAYERS)
    (tmp_path / "pkg" / "model.py").write_text(PAIR_MODEL)
    report = check(str(tmp_path / "pkg"), static=True, select="RL103", jobs=1, cache=False, cwd=tmp_path)
    assert report.findings == []
    assert [(model.name, [stack.final_norm for stack in model.stacks]) for model in report.models
            if model.stacks] == [("PairModel", [True])]


# The fixtures of several files, each checked alone (a pre-commit hook passes only the changed files).
ONE_FILE_RUNS = sorted(str(path.relative_to(ROOT)) for path in (ROOT / FIXTURES).glob("*/**/*.py"))


@pytest.mark.parametrize("path", ONE_FILE_RUNS)
def test_a_file_checked_alone_gets_the_whole_projects_rl103(path):
    """The files that build the stack's class are read though they are not in the run: a consumer in a file
    left out that normalises the output (parent_norm/vision.py, branch_consumer/lm.py) silences it, one that
    feeds it on raw (headless_consumer/lm.py) does not."""
    alone = check([path], static=True, select="RL103", jobs=1, cache=False, cwd=ROOT)
    assert findings(alone) == [(file, line) for file, line in EXPECTED_FINDINGS if file == path]


@pytest.mark.parametrize("path, fires", [("parent_norm/encoder.py", False), ("headless_consumer/encoder.py", True)])
def test_a_traced_file_checked_alone_gets_the_whole_projects_rl103(path, fires):
    pytest.importorskip("torch")
    alone = check([f"{FIXTURES}/{path}"], static=False, select="RL103", jobs=1, cache=False, cwd=ROOT)
    assert any(model.engine.startswith("traced") for model in alone.models)
    assert [line for _, line in findings(alone)] == ([26] if fires else [])
