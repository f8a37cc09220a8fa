"""Transformers models built and fed from what their configs declare (wave 5): a composite config built
from its parts' defaults (RAG), layer hooks past the reduced depth (Depth Pro), a map the default config
leaves None (Emu3). Real transformers classes, real meta builds and forwards; no export (cheap).
fixtures/trace/declared_configs.py mirrors each cause in our own code and pins the full check."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from reslint.trace.capture import capture_model  # noqa: E402
from reslint.trace.config_reduction import tracing_attempts, tracing_config  # noqa: E402
from reslint.trace.inputs import candidate_inputs, infer_candidates  # noqa: E402
from reslint.trace.loader import loaded_module  # noqa: E402
from reslint.trace.models import build_model, discover_models  # noqa: E402

MODELS = Path(importlib.util.find_spec("transformers").origin).parent / "models"


def test_layer_hooks_past_the_reduced_depth_point_at_the_last_layer_kept():
    from transformers.models.depth_pro.modeling_depth_pro import DepthProModel

    config, changes = tracing_config(DepthProModel.config_class)
    assert ("intermediate_hook_ids", (11, 5), (1, 1)) in changes
    with torch.device("meta"):
        model = DepthProModel(config).eval()
        inputs = candidate_inputs(infer_candidates(model)[0], "meta")
        model(*inputs.args, **inputs.kwargs)  # IndexError at hidden_states[hook + 1] with the hooks unclamped


def test_a_composite_model_is_built_from_its_configs_part_defaults_and_fed_retrieved_documents():
    path = str(MODELS / "rag" / "modeling_rag.py")
    with loaded_module(path, os.getcwd()) as module:
        specs, _ = discover_models(module, path, os.getcwd())
        spec = next(spec for spec in specs if spec.name == "RagModel")
        item = build_model(spec, path)  # RagModel() asserts: a config, or a question encoder and a generator
    assert type(item.model.question_encoder).__name__ == "DPRQuestionEncoder"
    assert type(item.model.generator).__name__ == "BartForConditionalGeneration"
    specs, extra, where = infer_candidates(item.model)[0]
    shapes = {spec.name: spec.shape for spec in specs}
    assert shapes == {"input_ids": (2, 16), "decoder_input_ids": (2, 16), "context_input_ids": (10, 16),
                      "context_attention_mask": (10, 16), "doc_scores": (2, 5)}
    inputs = candidate_inputs((specs, extra, where), "meta")
    # Without a retriever the forward asserts `context_input_ids`, `context_attention_mask` and `doc_scores`.
    capture, failures = capture_model(item.model, inputs, name="RagModel", line=1, path=path)
    assert failures == [] and capture.method == "export"


def test_a_map_the_default_config_leaves_none_is_empty_in_the_last_attempt():
    from transformers.models.emu3.modeling_emu3 import Emu3Model

    attempts = list(tracing_attempts(Emu3Model.config_class))
    first, last = attempts[0], attempts[-1]
    with torch.device("meta"), pytest.raises(AttributeError, match="NoneType"):
        Emu3Model(first[0])
    assert last[1] == [*first[1], ("vocabulary_map", None, {})]
    with torch.device("meta"):
        Emu3Model(last[0])
