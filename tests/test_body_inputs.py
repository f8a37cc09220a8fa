"""Inputs of plain-torch models that only the forward's body tells (the rank an einsum gives a stack of
hidden states, images cut into the model's patch size, an optional `context` an assertion asks for), and
lengths kept constant by the concrete-value capture. Real torch, a real CLI subprocess run."""

from __future__ import annotations

import json
import subprocess

import pytest
from cli_support import REPO_ROOT, RESLINT, import_file

torch = pytest.importorskip("torch")

from reslint.trace.forward_body import asked_inputs, axis_count, parameter_ranks  # noqa: E402
from reslint.trace.inputs import candidate_inputs, infer_candidates, infer_inputs  # noqa: E402

FIXTURE = "fixtures/trace/body_inputs.py"


def fixture_module():
    return import_file(REPO_ROOT / FIXTURE, "body_inputs_fixture")


def shapes(inputs) -> dict:
    values = {**dict(enumerate(inputs.args)), **inputs.kwargs}
    return {key: tuple(value.shape) for key, value in values.items()}


def test_the_full_check_traces_every_model_of_the_fixture():
    done = subprocess.run([str(RESLINT), "check", "--no-cache", "--jobs", "1", "--output-format", "json", FIXTURE],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert [(t["name"], t["traced"]) for t in document["traces"]] == [
        ("CrossStack", True), ("PatchTransformer", True), ("LayerMixer", True), ("BiasedEncoder", True),
        ("SortedRecurrentEncoder", True)]
    assert document["findings"] == []
    models = {model["name"]: model for model in document["models"]}
    assert ("inputs: float[2,16,16]; context=float[2,16,16] (inferred from LayerNorm (layers.0.attn_norm); "
            "`context`, which the forward's assertion asks for)") in models["CrossStack"]["notes"]
    assert ("inputs: float[2,3,16,16] (inferred from LayerNorm (to_embedding.0), as images cut into 4x4 patches)"
            in models["PatchTransformer"]["notes"])
    assert ("inputs: long[2,24]<40 (inferred from Embedding (embed), 24 positions: the model's own length)"
            in models["BiasedEncoder"]["notes"])
    assert models["SortedRecurrentEncoder"]["engine"] == "traced (concrete_fx)"
    for name in ("CrossStack", "PatchTransformer", "BiasedEncoder"):
        assert [(s["attribute"], s["depth"], s["placement"], s["final_norm"]) for s in models[name]["stacks"]] == [
            ("self.layers", 2, "pre", True)]


def test_a_stack_of_hidden_states_gets_the_rank_of_its_einsum():
    mixer = fixture_module().LayerMixer()
    assert parameter_ranks(mixer) == {"hiddens": 4}
    assert shapes(infer_inputs(mixer, "meta")) == {0: (2, 16, 16), "hiddens": (2, 2, 16, 16)}


def test_ranks_from_einops_patterns_shape_unpacks_and_torch_subscripts():
    class Body(torch.nn.Module):
        def forward(self, a, b, c, d, e):
            batch, heads, n, width = a.shape  # noqa: F841
            rearrange(b, "b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=4, p2=4)  # noqa: F821
            torch.einsum("bhnd,bd->bhn", c, d)
            rearrange(e, "b ... d -> b d ...")  # noqa: F821 - an ellipsis: any rank

    assert parameter_ranks(Body()) == {"a": 4, "b": 4, "c": 4, "d": 2}
    assert (axis_count("l b n d"), axis_count("b (h w) c"), axis_count("bhnd"), axis_count("b ... d")) == (4, 3, 4, None)


def test_images_are_cut_into_the_patch_size_the_model_keeps():
    model = fixture_module().PatchTransformer(image_size=24, patch_size=4, channels=1)
    assert shapes(infer_inputs(model, "meta")) == {0: (2, 1, 16, 16)}  # 16 of its 36 positions; 1 channel: 16 / (4 x 4)


def test_only_the_optional_inputs_a_message_names_are_asked_for():
    class Cached(torch.nn.Module):
        def forward(self, idx, input_pos=None, mask=None):
            if input_pos is not None and idx.dim() > 2:
                raise ValueError(f"input_pos {input_pos.shape} needs idx of 2 dims; pass input_pos only with a cache")
            assert idx.dim() == 2, "idx must be 2-D"

    assert asked_inputs(Cached()) == ["input_pos"]  # once, though named twice; `idx` is required anyway
    stack = fixture_module().CrossStack()
    assert asked_inputs(stack) == ["context"]
    assert shapes(infer_inputs(stack, "meta")) == {0: (2, 16, 16), "context": (2, 16, 16)}
    # a stack that does not attend across runs without it: the plain guess stays first
    assert shapes(infer_inputs(fixture_module().CrossStack(cross_attend=False), "meta")) == {0: (2, 16, 16)}


def test_a_model_too_large_to_probe_hands_the_capture_its_own_length_second():
    with torch.device("meta"):  # 60 M parameters: more than a CPU probe copies
        encoder = fixture_module().BiasedEncoder(vocab=60_000, dim=1_000, heads=2, max_seq_len=24)
    candidates = infer_candidates(encoder)
    assert [shapes(candidate_inputs(candidate, "meta")) for candidate in candidates] == [{0: (2, 16)}, {0: (2, 24)}]


def test_a_parameter_assigned_anew_keeps_the_rank_of_its_first_reading_only():
    class Reshaped(torch.nn.Module):
        def forward(self, x, context):
            context = context.view(2, 16, 4, 4)
            return torch.einsum("bnhd,bnhd->bnh", context, context)

    class Stacked(torch.nn.Module):
        def forward(self, x, hiddens):
            if isinstance(hiddens, list):  # only sometimes assigned anew: the einsum still tells
                hiddens = torch.stack(hiddens)
            return torch.einsum("lbnd,lbnd->bnd", hiddens, hiddens)

    assert parameter_ranks(Reshaped()) == {}
    assert parameter_ranks(Stacked()) == {"hiddens": 4}


def test_an_optional_context_the_layers_norm_is_given_when_no_guess_without_it_runs():
    """perceiver-pytorch's PerceiverBlock: `context=None`, normed by a PreNorm's norm_context; no assertion names it."""
    block = import_file(REPO_ROOT / "fixtures/trace/optional_context.py", "optional_context_fixture").PerceiverBlock()
    assert shapes(infer_inputs(block, "meta")) == {0: (2, 16, 32), "context": (2, 16, 32)}
