"""Input specs (`--inputs`) and input inference for the trace engine (real torch, meta tensors)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from reslint.trace.inputs import (
    InputError,
    TensorSpec,
    from_text,
    infer_inputs,
    parse_shape_spec,
)


def test_shape_specs_parse():
    assert parse_shape_spec("long[2,64]<50257") == [TensorSpec("int64", (2, 64), 50257)]
    assert parse_shape_spec("float[2, 16, 512]; bool[2,16]") == [
        TensorSpec("float32", (2, 16, 512)), TensorSpec("bool", (2, 16))]
    assert parse_shape_spec("input_ids=long[2,8]<100; attention_mask=int[2,8]") == [
        TensorSpec("int64", (2, 8), 100, "input_ids"), TensorSpec("int32", (2, 8), None, "attention_mask")]
    assert parse_shape_spec("float[]") == [TensorSpec("float32", ())]


@pytest.mark.parametrize("text", ["torch.randn(2, 3)", "example_batch()", "complex[2]", "long[2,x]", ""])
def test_anything_else_is_an_expression(text):
    assert parse_shape_spec(text) is None


def test_shape_spec_builds_meta_tensors():
    inputs = from_text("long[2,64]<50257; float[2,64,8]", {}, "meta")
    assert [(t.shape, t.dtype, t.device.type) for t in inputs.args] == [
        ((2, 64), torch.int64, "meta"), ((2, 64, 8), torch.float32, "meta")]
    cpu = from_text("long[2,64]<7", {}, "cpu")
    assert int(cpu.args[0].max()) < 7


def test_expressions_tuple_dict_and_single_value():
    namespace = {"torch": torch, "example_batch": lambda: {"ids": torch.zeros(2, 4, dtype=torch.long)}}
    single = from_text("torch.randint(0, 50257, (2, 64))", namespace, "meta")
    assert single.args[0].shape == (2, 64) and single.args[0].device.type == "meta"
    pair = from_text("(torch.zeros(2, 3), torch.ones(2, 3))", namespace, "meta")
    assert len(pair.args) == 2 and pair.kwargs == {}
    keywords = from_text("example_batch()", namespace, "meta")
    assert keywords.args == () and keywords.kwargs["ids"].device.type == "meta"
    with pytest.raises(InputError, match="NameError"):
        from_text("missing()", namespace, "meta")


def shapes(model) -> list[tuple]:
    inputs = infer_inputs(model, "meta")
    return [(tuple(t.shape), str(t.dtype).replace("torch.", "")) for t in inputs.args]


class EmbedFirst(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(321, 8)
        self.out = nn.Linear(8, 2)


def test_inference_from_the_first_consumer():
    with torch.device("meta"):
        assert shapes(EmbedFirst()) == [((2, 16), "int64")]
        assert infer_inputs(EmbedFirst(), "meta").description.endswith("(inferred from Embedding (tok))")
        assert shapes(nn.Sequential(nn.Linear(12, 4), nn.ReLU())) == [((2, 16, 12), "float32")]
        assert shapes(nn.Sequential(nn.Conv1d(3, 4, 3))) == [((2, 3, 64), "float32")]
        assert shapes(nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))) == [((2, 3, 32, 32), "float32")]
        layer = nn.TransformerEncoderLayer(24, 2, 48, batch_first=True)
        assert shapes(nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)) == [((2, 16, 24), "float32")]
        seq_first = nn.TransformerEncoderLayer(24, 2, 48)
        assert shapes(nn.TransformerEncoder(seq_first, 2, enable_nested_tensor=False)) == [((16, 2, 24), "float32")]
        assert shapes(nn.Sequential(nn.LSTM(10, 20, batch_first=True))) == [((2, 16, 10), "float32")]


def test_hand_written_layers_are_fed_features_of_their_width():
    class ManualNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.gain = nn.Parameter(torch.ones(24))

    with torch.device("meta"):
        assert shapes(ManualNorm()) == [((2, 16, 24), "float32")]


def test_inference_fails_with_a_hint():
    with pytest.raises(InputError, match="pass --inputs"):
        infer_inputs(nn.ParameterList([nn.Parameter(torch.ones(2, 3, 4))]), "meta")
    assert shapes(nn.Sequential(nn.ReLU())) == [((2, 16, 32), "float32")]  # parameter-free: any features


def test_hf_models_get_input_ids_within_positions_and_use_cache_false():
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_embd=32, n_layer=1, n_head=2, vocab_size=100, n_positions=8)
    with torch.device("meta"):
        model = transformers.GPT2Model(config)
    inputs = infer_inputs(model, "meta")
    assert inputs.args == ()
    assert inputs.kwargs["input_ids"].shape == (2, 8) and inputs.kwargs["input_ids"].dtype == torch.int64
    assert inputs.kwargs["use_cache"] is False
