"""Transformers default configs that leave a field the model needs unset, and the vision towers that read
flattened patches (wave 7): a count left at -1 (ViLT's `num_images`), a string left None that the docstring
gives an example of (Granite4-Vision's `downsample_rate`), `(hidden_states, grid_thw)` sized from the config
(Qwen2-VL-style towers: Cohere-Compass's). Real transformers classes, meta builds, one small CPU forward.
fixtures/trace/unset_config_fields.py mirrors each cause in our own code and pins the full check."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from reslint.trace.config_reduction import tracing_attempts, tracing_config  # noqa: E402
from reslint.trace.inputs import candidate_inputs, infer_candidates  # noqa: E402


def first_that_builds(model_class):
    errors = []
    for config, changes in tracing_attempts(model_class.config_class):
        try:
            with torch.device("meta"):
                return model_class(config), changes
        except Exception as error:  # noqa: BLE001 - the attempts before the one that builds fail
            errors.append(error)
    raise errors[0]


def test_a_count_left_at_minus_one_is_set_to_one_a_field_at_a_time():
    from transformers.models.vilt.modeling_vilt import ViltForImagesAndTextClassification

    model, changes = first_that_builds(ViltForImagesAndTextClassification)  # -1 * hidden: a negative dimension
    assert changes[-1] == ("num_images", -1, 1)
    assert model.config.max_image_length == -1  # -1 there means "no limit": left alone


def test_a_string_left_none_is_the_example_its_docstring_gives():
    from transformers.models.granite4_vision.modeling_granite4_vision import Granite4VisionModel

    model, changes = first_that_builds(Granite4VisionModel)  # `None.split("/")` without it
    assert ("downsample_rate", None, "1/4") in changes
    assert model.config.downsample_rate == "1/4"


def test_a_vision_tower_reads_flattened_patches_with_their_grid():
    from transformers.models.cohere_compass.modeling_cohere_compass import CohereCompassVisionModel

    config, _ = tracing_config(CohereCompassVisionModel.config_class)
    config.depth = 1
    model = CohereCompassVisionModel(config).eval()
    specs, extra, where = infer_candidates(model)[0]
    # patches of 3 channels x 2 frames x 16 x 16; a 4 x 4 x 4 grid (whole multiples of the 2 x 2 merge)
    assert {spec.name: spec.shape for spec in specs} == {"hidden_states": (64, 1536), "grid_thw": (1, 3)}
    inputs = candidate_inputs((specs, extra, where), "cpu")
    with torch.no_grad():
        output = model(**inputs.kwargs)
    assert tuple(output.pooler_output.shape) == (64 // 4, config.out_hidden_size)
