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


# ----- plain torch: the forward's other parameters ---------------------------------------------


class Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x, padding_mask, lengths, attn_mask, memory, t, scale=2.0, cache=None):
        return self.proj(x)


def described(model) -> dict:
    """{argument: (shape, dtype, fill)} of the inferred inputs; positional ones by index."""
    inputs = infer_inputs(model, "cpu")
    values = {**dict(enumerate(inputs.args)), **inputs.kwargs}
    return {key: (tuple(value.shape), str(value.dtype).replace("torch.", "")) for key, value in values.items()}


def test_the_forwards_required_parameters_are_filled_by_name():
    model = Masked()
    assert described(model) == {
        0: ((2, 16, 8), "float32"),
        "padding_mask": ((2, 16), "bool"),  # a mask: one flag a position
        "lengths": ((2,), "int64"),  # lengths: the full sequence
        "attn_mask": ((16, 16), "bool"),  # an attention mask: positions by positions
        "memory": ((2, 16, 8), "float32"),  # another tensor: like the first
        "t": ((2,), "int64"),  # a timestep a sample
    }  # scale and cache keep their defaults
    assert infer_inputs(model, "cpu").kwargs["lengths"].tolist() == [16, 16]
    model(*infer_inputs(model, "cpu").args, **infer_inputs(model, "cpu").kwargs)


def test_a_required_parameter_annotated_as_a_number_gets_one_and_a_string_is_left_to_the_user():
    class Configured(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(8, 8)

        def forward(self, x, unroll_steps: int, scale: float, causal: bool):
            return self.proj(x)

    assert infer_inputs(Configured(), "cpu").kwargs == {"unroll_steps": 16, "scale": 1.0, "causal": False}

    class Named(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(8, 8)

        def forward(self, x, mode: str):
            return self.proj(x)

    assert described(Named()) == {0: ((2, 16, 8), "float32")}  # the failure then says "pass --inputs"


def test_two_token_streams_for_an_encoder_decoder():
    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(50, 8)

        def forward(self, src, tgt):
            return self.embed(src) + self.embed(tgt)

    assert described(Seq2Seq()) == {0: ((2, 16), "int64"), "tgt": ((2, 16), "int64")}
    inputs = infer_inputs(Seq2Seq(), "cpu")
    assert int(inputs.kwargs["tgt"].max()) < 50


# ----- transformers: what the model declares ---------------------------------------------------


def hf_inputs(name: str, config_name: str, **config) -> dict:
    transformers = pytest.importorskip("transformers")
    with torch.device("meta"):
        model = getattr(transformers, name)(getattr(transformers, config_name)(**config))
    inputs = infer_inputs(model, "meta")
    assert inputs.args == ()
    return {key: tuple(value.shape) for key, value in inputs.kwargs.items() if isinstance(value, torch.Tensor)}


SMALL = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)


def test_images_of_the_configured_size_and_channels():
    assert hf_inputs("ViTModel", "ViTConfig", image_size=224, patch_size=16, num_channels=4, **SMALL) == {
        "pixel_values": (2, 4, 224, 224)}


def test_raw_waveforms_for_audio_encoders():
    assert hf_inputs("Wav2Vec2ConformerForCTC", "Wav2Vec2ConformerConfig", vocab_size=10, **SMALL) == {
        "input_values": (2, 16000)}


def test_log_mel_features_of_the_encoders_length():
    shapes = hf_inputs("WhisperModel", "WhisperConfig", d_model=32, encoder_layers=1, decoder_layers=1,
                       encoder_attention_heads=2, decoder_attention_heads=2, num_mel_bins=40,
                       max_source_positions=50, vocab_size=100, pad_token_id=0, bos_token_id=1,
                       eos_token_id=2, decoder_start_token_id=1)
    assert shapes == {"input_features": (2, 40, 100), "decoder_input_ids": (2, 16)}


def test_video_frames_for_video_models():
    transformers = pytest.importorskip("transformers")
    config = transformers.XCLIPConfig(text_config=dict(SMALL, vocab_size=100),
                                      vision_config=dict(SMALL, image_size=32, patch_size=16, num_frames=3),
                                      projection_dim=16, mit_hidden_size=32, mit_intermediate_size=64)
    with torch.device("meta"):
        model = transformers.XCLIPModel(config)
    from reslint.trace.inputs import candidate_inputs, infer_candidates

    candidates = [candidate_inputs(candidate, "meta") for candidate in infer_candidates(model)]
    assert [{key: tuple(value.shape) for key, value in inputs.kwargs.items() if isinstance(value, torch.Tensor)}
            for inputs in candidates] == [
        {"input_ids": (2, 16)},
        {"input_ids": (2, 16), "pixel_values": (2, 3, 3, 32, 32)},  # (batch, frames, channels, height, width)
        {"input_ids": (2, 16), "pixel_values": (2, 3, 3, 32, 32), "attention_mask": (2, 16)},  # the last resort
    ]


def test_heads_that_need_a_pad_token_get_one_sample_and_multiple_choice_gets_choices():
    gpt2 = dict(n_embd=32, n_layer=1, n_head=2, vocab_size=100)
    assert hf_inputs("GPT2ForSequenceClassification", "GPT2Config", **gpt2) == {"input_ids": (1, 16)}
    assert hf_inputs("GPT2ForSequenceClassification", "GPT2Config", pad_token_id=0, **gpt2) == {"input_ids": (2, 16)}
    assert hf_inputs("BertForMultipleChoice", "BertConfig", vocab_size=100, **SMALL) == {"input_ids": (2, 2, 16)}


def test_frame_major_features_are_the_next_candidate():
    transformers = pytest.importorskip("transformers")
    from reslint.trace.inputs import candidate_inputs, infer_candidates

    with torch.device("meta"):
        model = transformers.Wav2Vec2BertModel(transformers.Wav2Vec2BertConfig(output_hidden_size=32, **SMALL))
    candidates = [candidate_inputs(candidate, "meta") for candidate in infer_candidates(model)]
    assert [tuple(inputs.kwargs["input_features"].shape) for inputs in candidates] == [
        (2, 80, 64),  # (batch, mel bins, frames): Whisper's layout
        (2, 64, 160),  # (batch, frames, features): what the feature projection of Wav2Vec2-BERT takes
    ]


def test_forecasters_get_their_context_window_time_features_and_decoder_window():
    # context 16 + the largest lag 7; future values and time features for the decoder's 16 steps
    shapes = hf_inputs("TimeSeriesTransformerForPrediction", "TimeSeriesTransformerConfig", prediction_length=16,
                       num_time_features=2, num_static_categorical_features=1, cardinality=[5], d_model=32,
                       encoder_layers=1, decoder_layers=1)
    assert shapes == {"past_values": (2, 23), "past_time_features": (2, 23, 2), "past_observed_mask": (2, 23),
                      "static_categorical_features": (2, 1), "future_values": (2, 16),
                      "future_time_features": (2, 16, 2)}


def test_patch_forecasters_get_their_channels_and_no_lags():
    assert hf_inputs("PatchTSMixerForRegression", "PatchTSMixerConfig", context_length=32, num_input_channels=3,
                     patch_length=8, patch_stride=8, d_model=16, num_layers=1) == {"past_values": (2, 32, 3)}


def test_decision_transformers_get_a_trajectory():
    assert hf_inputs("DecisionTransformerModel", "DecisionTransformerConfig", state_dim=5, act_dim=3, max_ep_len=50,
                     hidden_size=32, n_layer=1, n_head=2) == {
        "states": (2, 16, 5), "actions": (2, 16, 3), "rewards": (2, 16, 1), "returns_to_go": (2, 16, 1),
        "timesteps": (2, 16), "attention_mask": (2, 16)}


def test_keypoint_matchers_get_a_pair_of_images():
    transformers = pytest.importorskip("transformers")
    with torch.device("meta"):
        model = transformers.SuperGlueForKeypointMatching(transformers.SuperGlueConfig())
    inputs = infer_inputs(model, "meta")
    assert {key: tuple(value.shape) for key, value in inputs.kwargs.items() if isinstance(value, torch.Tensor)} == {
        "pixel_values": (2, 2, 3, 224, 224)}


def test_speech_decoders_read_spectrogram_frames_and_vocoders_take_them():
    speech = dict(hidden_size=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                  decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=50, num_mel_bins=20)
    assert hf_inputs("SpeechT5ForTextToSpeech", "SpeechT5Config", **speech) == {
        "input_ids": (2, 16), "decoder_input_values": (2, 16, 20)}
    assert hf_inputs("SpeechT5ForSpeechToText", "SpeechT5Config", **speech) == {
        "input_values": (2, 16000), "decoder_input_ids": (2, 16)}
    assert hf_inputs("SpeechT5HifiGan", "SpeechT5HifiGanConfig", model_in_dim=20) == {"spectrogram": (2, 16, 20)}


def test_codecs_take_mono_audio_first_and_encoders_get_it_next():
    transformers = pytest.importorskip("transformers")
    from reslint.trace.inputs import candidate_inputs, infer_candidates

    with torch.device("meta"):
        codec = transformers.XcodecModel(transformers.XcodecConfig())
        encoder = transformers.Wav2Vec2ConformerForCTC(transformers.Wav2Vec2ConformerConfig(vocab_size=10, **SMALL))
    for model, shapes in ((codec, [(2, 1, 16000), (2, 16000)]), (encoder, [(2, 16000), (2, 1, 16000)])):
        candidates = [candidate_inputs(candidate, "meta") for candidate in infer_candidates(model)]
        assert [tuple(inputs.kwargs["input_values"].shape) for inputs in candidates] == shapes


def test_entity_heads_get_two_entities_and_span_heads_their_spans():
    luke = dict(SMALL, vocab_size=100, entity_vocab_size=10, entity_emb_size=16)
    assert hf_inputs("LukeForEntitySpanClassification", "LukeConfig", **luke) == {
        "input_ids": (2, 16), "entity_ids": (2, 2), "entity_attention_mask": (2, 2), "entity_position_ids": (2, 2, 1),
        "entity_start_positions": (2, 2), "entity_end_positions": (2, 2)}
    assert hf_inputs("LukeForEntityPairClassification", "LukeConfig", **luke) == {
        "input_ids": (2, 16), "entity_ids": (2, 2), "entity_attention_mask": (2, 2), "entity_position_ids": (2, 2, 1)}
    assert hf_inputs("LukeModel", "LukeConfig", **luke) == {"input_ids": (2, 16)}


def test_image_sides_hold_whole_windows_and_every_scale_of_a_tiled_model():
    transformers = pytest.importorskip("transformers")
    from reslint.trace.inputs import image_size

    # RF-DETR: 4 windows of 14-px patches a side, so 518 px becomes 560; Depth Pro: 384-px tiles at 1/4 scale.
    assert image_size(transformers.RfDetrConfig()) == (560, 560)
    assert image_size(transformers.DepthProConfig()) == (1536, 1536)
    assert image_size(transformers.ViTConfig(image_size=224)) == (224, 224)


def test_bark_fine_model_predicts_a_codebook_from_the_ids_of_all_of_them():
    transformers = pytest.importorskip("transformers")
    with torch.device("meta"):
        model = transformers.BarkFineModel(transformers.BarkFineConfig(hidden_size=32, num_layers=1, num_heads=2,
                                                                       n_codes_total=4, input_vocab_size=50))
    inputs = infer_inputs(model, "meta")
    assert (tuple(inputs.kwargs["input_ids"].shape), inputs.kwargs["codebook_idx"]) == ((2, 16, 4), 1)
