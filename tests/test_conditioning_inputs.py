"""Inputs of plain-torch models that the layer reading them tells (a diffusion block's `temb`, a timestep, class
labels, a graph's `edge_index`), and constructors with keyword-only arguments. Real torch, a real CLI
subprocess run."""

from __future__ import annotations

import pytest
from cli_support import REPO_ROOT, import_file, input_shapes, json_check

torch = pytest.importorskip("torch")

from reslint.trace.conditioning_inputs import conditioning_kind  # noqa: E402
from reslint.trace.constructor_arguments import build_inferred, inferred_arguments  # noqa: E402
from reslint.trace.consuming_layers import consuming_layer  # noqa: E402
from reslint.trace.inputs import infer_inputs  # noqa: E402

CONDITIONING = "fixtures/trace/conditioning_inputs.py"
GRAPH = "fixtures/trace/graph_inputs.py"
KEYWORD_ONLY = "fixtures/trace/keyword_only.py"


def load(path: str):
    return import_file(REPO_ROOT / path, path.rsplit("/", 1)[-1].removesuffix(".py") + "_fixture")


def test_the_full_check_traces_every_model_of_the_fixtures():
    document = json_check(CONDITIONING)
    assert [(t["name"], t["traced"]) for t in document["traces"]] == [
        ("DiTBlock", True), ("ResnetBlock", True), ("LabelConditionedTransformer", True), ("TimestepEmbedder", True)]
    assert document["findings"] == []
    assert [(t["name"], t["traced"]) for t in json_check(GRAPH)["traces"]] == [("GraphTransformerLayer", True)]
    document = json_check(KEYWORD_ONLY)
    assert [(t["name"], t["traced"]) for t in document["traces"]] == [("LanguageEncoder", True)]
    assert document["findings"] == []


def test_a_conditioning_vector_has_the_width_of_the_linear_that_reads_it():
    block = load(CONDITIONING).DiTBlock(dim=32, cond_dim=24)
    assert consuming_layer(block, "temb") is block.norm1.linear  # through `self.norm1(x, emb=temb)` and the SiLU
    assert input_shapes(infer_inputs(block, "meta")) == {0: ((2, 16, 32), "float32"), "temb": ((2, 24), "float32")}


def test_the_first_input_is_not_the_layer_that_projects_the_conditioning():
    block = load(CONDITIONING).ResnetBlock(in_channels=8, temb_channels=20)
    assert input_shapes(infer_inputs(block, "meta")) == {0: ((2, 8, 32, 32), "float32"), "temb": ((2, 20), "float32")}


def test_optional_timesteps_and_labels_the_blocks_read_are_given_together():
    model = load(CONDITIONING).LabelConditionedTransformer(num_classes=10)
    assert consuming_layer(model, "class_labels") is model.blocks[0].emb.class_embedder  # the loop's first block
    assert consuming_layer(model, "timestep") is None  # a sinusoid of the project's makes it features: not the input
    inputs = infer_inputs(model, "cpu")
    assert input_shapes(inputs) == {0: ((2, 16, 12), "float32"), "timestep": ((2,), "int64"),
                                    "class_labels": ((2,), "int64")}
    assert int(inputs.kwargs["class_labels"].max()) < 11


def test_a_forward_that_takes_the_timestep_first_gets_one_step_per_example():
    embedder = load(CONDITIONING).TimestepEmbedder()
    assert input_shapes(infer_inputs(embedder, "meta")) == {0: ((2,), "int64")}


def test_names_tell_the_kind_of_conditioning_and_nothing_else():
    assert [conditioning_kind(name) for name in ("temb", "emb", "cond", "pooled_projections", "timestep", "t",
                                                  "class_labels", "encoder_hidden_states", "x", "mask", "lengths")] == [
        "vector", "vector", "vector", "vector", "time", "time", "label", "side", None, None, None]


def test_a_graph_layer_gets_node_features_valid_edge_indices_and_one_graph():
    layer = load(GRAPH).GraphTransformerLayer(channels=32)
    inputs = infer_inputs(layer, "cpu")
    assert input_shapes(inputs) == {"x": ((16, 32), "float32"), "edge_index": ((2, 32), "int64"),
                                    "batch": ((16,), "int64")}
    assert 0 <= int(inputs.kwargs["edge_index"].min()) and int(inputs.kwargs["edge_index"].max()) < 16
    assert int(inputs.kwargs["batch"].abs().sum()) == 0


def test_a_keyword_an_inner_constructor_misses_is_passed_through_kwargs():
    module = load(KEYWORD_ONLY)
    arguments, depth = inferred_arguments(module.LanguageEncoder, vars(module))
    model, built_with, depth, first_error = build_inferred(module.LanguageEncoder, vars(module), arguments, depth)
    assert "missing 1 required keyword-only argument: 'depth'" in str(first_error)
    assert built_with == {"dim": 32, "num_tokens": 256, "depth": 2} and depth == ["depth"]
    assert len(model.encoder.layers) == 2


def test_a_model_too_large_to_probe_hands_the_capture_its_conditioning_last():
    from reslint.trace.inputs import candidate_inputs, infer_candidates

    class Masked(load(CONDITIONING).LabelConditionedTransformer):  # a mask: several plausible sets come first
        def forward(self, hidden_states, attention_mask, timestep=None, class_labels=None):
            hidden_states = self.proj_in(hidden_states) * attention_mask[..., None]
            for block in self.blocks:
                hidden_states = block(hidden_states, timestep=timestep, class_labels=class_labels)
            return self.proj_out(self.norm_out(hidden_states))

    with torch.device("meta"):  # 60 M parameters: more than a CPU probe copies
        model = Masked(dim=2400)
    candidates = [input_shapes(candidate_inputs(candidate, "meta")) for candidate in infer_candidates(model)]
    assert len(candidates) == 4 and candidates[0] == {0: ((2, 16, 12), "float32"), "attention_mask": ((2, 16), "bool")}
    assert candidates[-1] == {0: ((2, 16, 12), "float32"), "attention_mask": ((2, 16), "bool"),
                              "timestep": ((2,), "int64"), "class_labels": ((2,), "int64")}
