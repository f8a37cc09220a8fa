"""Inputs of plain-torch models that only their code tells (masks shaped for the scores, features a conv
front end unsqueezes, memory of the model's width), and the capture of a forward whose padding mask
comes from the data (fx with concrete values). Real torch, real CLI subprocess runs."""

from __future__ import annotations

import json
import subprocess

import pytest
from cli_support import REPO_ROOT, RESLINT, import_file

torch = pytest.importorskip("torch")

from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence  # noqa: E402

from reslint.trace.capture import capture_model  # noqa: E402
from reslint.trace.concrete_fx import concrete_trace  # noqa: E402
from reslint.trace.graph_facts import facts_from_capture  # noqa: E402
from reslint.trace.inputs import candidate_inputs, infer_candidates, infer_inputs  # noqa: E402

FIXTURE = "fixtures/trace/plain_inputs.py"


def fixture_module():
    return import_file(REPO_ROOT / FIXTURE, "plain_inputs_fixture")


def shapes(inputs) -> dict:
    values = {**dict(enumerate(inputs.args)), **inputs.kwargs}
    return {key: (tuple(value.shape), str(value.dtype).removeprefix("torch.")) for key, value in values.items()}


def test_the_full_check_traces_every_model_of_the_fixture():
    done = subprocess.run([str(RESLINT), "check", "--no-cache", "--jobs", "1", "--output-format", "json", FIXTURE],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert [(t["name"], t["traced"]) for t in document["traces"]] == [
        ("TokenDecoder", True), ("SubsamplingEncoder", True), ("LengthEncoder", True)]
    assert document["findings"] == []
    models = {model["name"]: model for model in document["models"]}
    assert {name: model["engine"] for name, model in models.items()} == {
        "TokenDecoder": "traced (export)", "SubsamplingEncoder": "traced (export)",
        "LengthEncoder": "traced (concrete_fx)"}
    # masks (batch, 1, keys): `~mask.unsqueeze(1)` against (batch, heads, queries, keys) scores; memory of the
    # model's width beside token ids
    assert ("inputs: long[2,16]<40; tgt_mask=bool[2,1,16]; memory=float[2,16,16]; memory_mask=bool[2,1,16] "
            "(inferred from Embedding (embed))") in models["TokenDecoder"]["notes"]
    assert ("inputs: float[2,64,16]; masks=bool[2,1,64] (inferred from Conv2d (conv.0), as (batch, time, 16 features))"
            in models["SubsamplingEncoder"]["notes"])
    assert "inputs: float[2,16,16]; ilens=long[2]<17 (inferred from Linear (proj))" in models["LengthEncoder"]["notes"]
    assert ("concrete_fx: torch.nn layers are leaves, and the graph follows the branch the example input took at "
            "data-dependent control flow (plain_inputs.py:97)") in models["LengthEncoder"]["notes"]
    assert [(s["attribute"], s["depth"], s["placement"], s["final_norm"]) for s in models["LengthEncoder"]["stacks"]] == [
        ("self.layers", 2, "pre", True)]


def test_a_decoder_layer_gets_memory_and_masks_shaped_for_its_scores():
    layer = fixture_module().MemoryDecoderLayer()
    assert shapes(infer_inputs(layer, "cpu")) == {
        0: ((2, 16, 16), "float32"), "memory": ((2, 16, 16), "float32"),
        "src_mask": ((2, 1, 16), "bool"), "trg_mask": ((2, 1, 16), "bool")}


def test_the_first_guess_stands_alone_when_no_candidate_runs():
    class Refuses(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(8, 8)

        def forward(self, x, mask):
            raise ValueError("never runs")

    [candidate] = infer_candidates(Refuses())
    assert shapes(candidate_inputs(candidate, "meta")) == {0: ((2, 16, 8), "float32"), "mask": ((2, 16), "bool")}


def test_lengths_named_the_speech_way_are_int64_lengths():
    class Tacotron(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(8, 8)

        def forward(self, xs, ilens, olens, src_length):
            return self.proj(xs)

    inputs = infer_inputs(Tacotron(), "cpu")
    assert shapes(inputs) == {0: ((2, 16, 8), "float32"), "ilens": ((2,), "int64"), "olens": ((2,), "int64"),
                              "src_length": ((2,), "int64")}
    assert inputs.kwargs["ilens"].tolist() == [16, 16]


def test_a_length_dependent_mask_is_captured_with_concrete_values():
    module = fixture_module()
    with torch.device("meta"):
        model = module.LengthEncoder().eval()

    def cpu_variant():
        target = module.LengthEncoder().eval()
        return target, infer_inputs(target, "cpu")

    path = str(REPO_ROOT / FIXTURE)
    capture, failures = capture_model(model, infer_inputs(model, "meta"), name="LengthEncoder", line=101, path=path,
                                      cpu_variant=cpu_variant)
    assert [failure.method for failure in failures] == ["export", "fx"]
    assert capture.method == "concrete_fx"
    facts = facts_from_capture(capture, path)
    assert sorted((add.span.line, add.placement) for add in facts.residuals) == [(73, "pre"), (73, "pre")]  # one a layer


def test_packed_sequences_run_whole_and_leave_later_fx_traces_alone():
    class Tagger(torch.nn.Module):  # packing is called through this module's globals, as a library calls it
        def __init__(self):
            super().__init__()
            self.rnn = torch.nn.GRU(8, 8, batch_first=True)

        def forward(self, x, lengths):
            packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
            out, _ = pad_packed_sequence(self.rnn(packed)[0], batch_first=True)
            return x + out

    graph = concrete_trace(Tagger().eval(), {"x": torch.randn(2, 5, 8), "lengths": torch.tensor([5, 5])})
    called = [node.target.__name__ for node in graph.graph.nodes if node.op == "call_function"]
    assert called[0] == "pack_padded_sequence" and "pad_packed_sequence" in called and called[-1] == "add"
    torch.fx.symbolic_trace(torch.nn.Linear(2, 2))  # fx's registry of wrapped functions was left as it was
