"""Default configs that lack what only a checkpoint gives, or disagree with the modeling code (wave 8, transformers
full check): a head's None width lists (Sapiens2), a field the config class never declares (BridgeTower's
contrastive head), rotary sections hard-coded for another rotary width (GLM-4V), rotary parameters per layer
type the default config leaves out (Cohere-Compass's text model, wave 11), and a vision tower whose
decorator fx refuses, rebuilt narrower with fewer heads of the same width (Cohere-Compass).
fixtures/trace/checkpoint_fields.py mirrors each cause in our own code; the transformers tests build the real
classes on meta."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from reslint.settings import Settings  # noqa: E402
from reslint.trace.engine import trace_file  # noqa: E402
from reslint.trace.models import ModelSpec, reduced_builder  # noqa: E402

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "trace" / "checkpoint_fields.py"


@pytest.fixture(scope="module")
def traced():
    result = trace_file(str(FIXTURE), None, Settings(root=str(FIXTURE.parent), timeout=300))
    return result, {capture.model_name: capture for capture in result.captures}


@contextlib.contextmanager
def fixture_module():
    """The fixture imported as `checkpoint_fields` (its dataclasses look their module up by name)."""
    spec = importlib.util.spec_from_file_location("checkpoint_fields", FIXTURE)
    module = importlib.util.module_from_spec(spec)
    sys.modules["checkpoint_fields"] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules["checkpoint_fields"]


def built_on_meta(cls):
    spec = ModelSpec(cls.__name__, 1, lambda: None, cls=cls)
    with torch.device("meta"):
        model = reduced_builder(cls, spec)()
    return model, spec.reduction


def test_every_model_of_the_fixture_traces(traced):
    result, captures = traced
    assert result.findings == []
    assert sorted(captures) == ["ContrastiveModel", "DenseHeadModel", "LayerRotaryModel", "PatchTower",
                                "SectionedRotaryModel"]


def test_a_none_width_list_is_one_layer_of_the_width_its_docstring_names(traced):
    """Sapiens2: `upsample_out_channels` "takes `hidden_size` channels"; the refinement list is empty, the scale
    branch documented as optional stays None, and the kernel sizes follow from the config's own __post_init__."""
    capture = traced[1]["DenseHeadModel"]
    assert capture.reduction[1:] == [("head_config.conv_out_channels", None, []),
                                     ("head_config.upsample_out_channels", None, [16])]
    head = capture.model.config.head_config
    assert head.upsample_kernel_sizes == [2] and head.scale_out_channels is None


def test_a_field_only_a_checkpoint_has_takes_the_field_it_is_a_variant_of(traced):
    assert ("contrastive_hidden_size", None, 16) in traced[1]["ContrastiveModel"].reduction


def test_rotary_sections_are_rescaled_to_the_frequencies_the_model_has(traced):
    capture = traced[1]["SectionedRotaryModel"]
    assert ("rope_parameters.mrope_section", [2, 3, 3], [4, 6, 6]) in capture.reduction
    assert capture.model.rotary.mrope_section == [4, 6, 6]


def test_a_layer_type_without_rotary_parameters_gets_the_librarys_default_theta(traced):
    capture = traced[1]["LayerRotaryModel"]
    entry = {"rope_type": "default", "rope_theta": 10000.0}
    assert capture.reduction[-1] == ("rope_parameters.full_attention", None, entry)
    assert capture.model.config.rope_parameters == {"full_attention": entry}


def test_a_key_error_that_names_no_declared_layer_type_is_left_to_the_build_error():
    from reslint.trace.rope_defaults import fill_rope_entry

    with fixture_module() as module:
        config = module.LayerRotaryConfig()
    assert fill_rope_entry(config, KeyError("sliding_attention")) is None
    assert fill_rope_entry(config, AttributeError("full_attention")) is None
    assert config.rope_parameters == {}
    config.rope_parameters = {"rope_type": "linear", "rope_theta": 500.0, "factor": 2.0}
    assert fill_rope_entry(config, KeyError("full_attention")) == (
        "rope_parameters.full_attention", None, {"rope_type": "linear", "rope_theta": 500.0})


def test_a_narrower_build_keeps_each_heads_width(traced):
    """72-wide heads divided by 4 would be 18 wide, which the 2-D rotary embedding cannot quarter."""
    capture = traced[1]["PatchTower"]
    assert capture.notes[-1] == ("rebuilt on CPU with narrower widths (num_heads 16 -> 4, hidden_size 1152 -> 288, "
                                 "vocab_size 50000 -> 12500): widths do not change placement")
    assert capture.model.layers[0].attn.head_width == 72


def test_fx_refusing_a_decorator_that_writes_into_its_kwargs_hands_over_to_concrete_fx():
    """Cohere-Compass's vision tower: fx rewrites `merge_with_config_defaults`' arguments, so its `kwargs` is a
    Proxy; concrete_fx calls the decorated forward by keyword."""
    from reslint.trace.capture import concrete_capture, fx_capture, fx_refused
    from reslint.trace.inputs import candidate_inputs, infer_candidates

    with fixture_module() as module:
        config = module.TowerConfig(vocab_size=64, hidden_size=288, num_heads=4, depth=2)
        with torch.device("meta"):
            model = module.PatchTower(config).eval()
        with pytest.raises(TypeError, match="'Proxy' object does not support item assignment") as refused:
            fx_capture(model, candidate_inputs(infer_candidates(model)[0], "meta"))
        assert fx_refused(refused.value)

        def cpu_variant():
            target = module.PatchTower(config).eval()
            return target, candidate_inputs(infer_candidates(target)[0], "cpu")

        capture = concrete_capture(cpu_variant, "PatchTower", 1, "")
    modules = [node.target for node in capture.graph_module.graph.nodes if node.op == "call_module"]
    assert [name for name in modules if name.endswith(".norm")] == ["layers.0.norm", "layers.1.norm"]


transformers = pytest.importorskip("transformers")


def test_sapiens2_heads_build_with_one_upsample_layer_of_the_hidden_size():
    from transformers.models.sapiens2.modeling_sapiens2 import Sapiens2ForPointmapEstimation

    model, reduction = built_on_meta(Sapiens2ForPointmapEstimation)
    assert ("head_config.upsample_out_channels", None, [1024]) in reduction
    assert ("head_config.conv_out_channels", None, []) in reduction
    assert isinstance(model.scale_head, torch.nn.Identity)  # "When `None` (default), no scale branch is built."


def test_bridgetower_contrastive_head_gets_its_width_and_the_librarys_logit_scale():
    from transformers.models.bridgetower.modeling_bridgetower import BridgeTowerForContrastiveLearning

    model, reduction = built_on_meta(BridgeTowerForContrastiveLearning)
    assert reduction[-2:] == [("contrastive_hidden_size", None, 768), ("logit_scale_init_value", None, 2.6592)]
    assert model.itc_text_head.fc.out_features == 768


def test_glm4v_rotary_sections_fit_its_default_heads():
    """`[8, 12, 12]` is GLM-4.1V's half-rotated 128-wide heads; the default config rotates all of each head."""
    from transformers.models.glm4v.modeling_glm4v import Glm4vForConditionalGeneration

    model, reduction = built_on_meta(Glm4vForConditionalGeneration)
    assert reduction[-1] == ("text_config.rope_parameters.mrope_section", [8, 12, 12], [16, 24, 24])
    assert model.model.language_model.rotary_emb.mrope_section == [16, 24, 24]


def test_cohere_compass_vision_heads_keep_their_width_when_narrowed():
    from reslint.trace.narrow_config import narrowed_config

    _, changes = narrowed_config(transformers.CohereCompassVisionConfig(), 4)
    assert changes == [("num_heads", 16, 4), ("hidden_size", 1152, 288), ("intermediate_size", 4304, 1076)]


def test_cohere_compass_text_models_get_a_rotary_entry_for_their_layer_type():
    """Its config turns `rope_parameters=None` into `{}` (transformers warns "no RoPE parameters were found"), and
    the rotary embedding reads `rope_parameters['full_attention']`: a checkpoint's field, not a defect."""
    from transformers.models.cohere_compass.modeling_cohere_compass import CohereCompassForConditionalGeneration

    model, reduction = built_on_meta(CohereCompassForConditionalGeneration)
    entry = {"rope_type": "default", "rope_theta": 10000.0}
    assert reduction[-1] == ("text_config.rope_parameters.full_attention", None, entry)
    assert model.config.text_config.rope_parameters == {"full_attention": entry}
