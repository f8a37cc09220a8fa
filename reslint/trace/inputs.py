"""Example inputs for tracing: parse `--inputs` specs, or infer them from the model.

Input spec language (`--inputs`, `[[tool.reslint.models]] inputs`):

    SPEC   := ITEM (";" ITEM)*
    ITEM   := [NAME "="] DTYPE "[" DIM ("," DIM)* "]" ["<" HIGH]
    DTYPE  := long | int | int64 | int32 | float | float32 | double | float64 | half | float16
              | bfloat16 | bool

`long[2,64]<50257` is one positional argument, token ids below 50257;
`float[2,16,512]; bool[2,16]` two positional arguments; `input_ids=long[2,64]<50257; use_cache=False`
is not a shape spec (keyword values other than tensors need an expression). Anything that is not
a shape spec is an EXPR evaluated in the checked file's namespace (`torch`, `nn` available): a
tuple is the positional arguments, a dict the keyword arguments, anything else one argument.
Tensors are moved to the model's device (meta): only shapes and dtypes matter.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from reslint.trace.documented_inputs import StructSpec, documented_specs, make_value
from reslint.trace.documented_plain import documented_candidate
from reslint.trace.input_specs import BATCH, SEQ, Candidate, InputError, TensorSpec, forward_parameters
from reslint.trace.plain_inputs import plain_candidates

DTYPES = {
    "long": "int64", "int64": "int64", "int": "int32", "int32": "int32", "int16": "int16", "int8": "int8",
    "uint8": "uint8", "float": "float32", "float32": "float32", "double": "float64", "float64": "float64",
    "half": "float16", "float16": "float16", "bfloat16": "bfloat16", "bool": "bool",
}
ITEM = re.compile(r"\s*(?:([A-Za-z_]\w*)\s*=\s*)?([A-Za-z0-9]+)\s*\[\s*(\d+(?:\s*,\s*\d+)*)?\s*,?\s*\]\s*(?:<\s*(\d+))?\s*")


@dataclass
class Inputs:
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    description: str = ""  # e.g. "long[2,16]<100 (inferred from nn.Embedding)"
    specs: list = field(default_factory=list)  # the specs they were made from, so they can be made again elsewhere
    extra: dict = field(default_factory=dict)

    def on(self, device: str) -> Inputs | None:
        """The same inputs made on `device` (real values on CPU), or None when they were not made from specs."""
        if not self.specs:
            return None
        made = from_specs(self.specs, device, self.extra)
        return Inputs(made.args, made.kwargs, self.description, self.specs, self.extra)


def parse_shape_spec(text: str) -> list[TensorSpec] | None:
    """The tensor specs of `text`, or None when it is not a shape spec (then it is an EXPR)."""
    items = [item for item in text.split(";")]
    specs = []
    for item in items:
        match = ITEM.fullmatch(item)
        if not match or match.group(2).lower() not in DTYPES:
            return None
        name, dtype, dims, high = match.groups()
        shape = tuple(int(dim) for dim in dims.split(",")) if dims else ()
        specs.append(TensorSpec(DTYPES[dtype.lower()], shape, int(high) if high else None, name or ""))
    return specs or None


def describe(specs: list[TensorSpec]) -> str:
    reverse = {"int64": "long", "int32": "int", "float32": "float"}
    parts = []
    for spec in specs:
        if isinstance(spec, StructSpec):
            fields = [describe(list(spec.fields)).replace("; ", ", "), *(f"{key}=None" for key in spec.nones)]
            parts.append(f"{spec.name}={spec.cls.__name__}({', '.join(field for field in fields if field)})")
            continue
        text = f"{reverse.get(spec.dtype, spec.dtype)}[{','.join(map(str, spec.shape))}]"
        if spec.high is not None:
            text += f"<{spec.high}"
        parts.append(f"{spec.name}={text}" if spec.name else text)
    return "; ".join(parts)


def from_specs(specs: list[TensorSpec], device: str, extra_kwargs: dict | None = None) -> Inputs:
    args = tuple(make_value(spec, device) for spec in specs if not spec.name)
    kwargs = {spec.name: make_value(spec, device) for spec in specs if spec.name}
    kwargs.update(extra_kwargs or {})
    return Inputs(args, kwargs, describe(specs), list(specs), dict(extra_kwargs or {}))


def to_device(value: Any, device: str) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device) if value.device.type != device else value
    if isinstance(value, tuple):
        return tuple(to_device(item, device) for item in value)
    if isinstance(value, list):
        return [to_device(item, device) for item in value]
    if isinstance(value, dict):
        return {key: to_device(item, device) for key, item in value.items()}
    return value


def from_text(text: str, namespace: dict, device: str) -> Inputs:
    """Inputs from a shape spec or an expression; raises InputError."""
    import torch

    specs = parse_shape_spec(text)
    if specs is not None:
        return from_specs(specs, device)
    try:
        with torch.device(device):
            value = eval(text, namespace)
    except Exception as error:  # noqa: BLE001
        raise InputError(f"cannot evaluate --inputs {text!r}: {type(error).__name__}: {error}") from None
    value = to_device(value, device)
    if isinstance(value, tuple):
        return Inputs(value, {}, text)
    if isinstance(value, dict):
        return Inputs((), value, text)
    return Inputs((value,), {}, text)


def hf_config(model: Any) -> Any:
    config = getattr(model, "config", None)
    if config is not None and hasattr(config, "to_dict") and getattr(type(model), "config_class", None) is not None:
        return config
    return None


def accepts(model: Any, name: str) -> bool:
    import inspect

    parameters = forward_parameters(model)
    return name in parameters or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


SUB_CONFIGS = ("text_config", "vision_config", "audio_config", "encoder_config", "speech_config", "encoder",
               "vision_encoder_config", "backbone_config", "decoder_config", "decoder")


def config_value(config: Any, *names: str) -> Any:
    """The first of `names` set on the config or, failing that, on one of its sub-configs."""
    for holder in (config, *(getattr(config, sub, None) for sub in SUB_CONFIGS)):
        if holder is None or isinstance(holder, (str, int, float, bool)):
            continue
        for name in names:
            value = getattr(holder, name, None)
            if value is not None and not callable(value):
                return value
    return None


def image_size(config: Any) -> tuple[int, int]:
    height, width = declared_image_size(config)
    # A windowed backbone (RF-DETR's DINOv2) splits each side into `num_windows` windows of whole patches.
    windows, patch = config_value(config, "num_windows"), config_value(config, "patch_size")
    if isinstance(windows, int) and windows > 1 and isinstance(patch, int) and patch > 0:
        step = windows * patch
        height, width = (-(-side // step) * step for side in (height, width))
    return height, width


def declared_image_size(config: Any) -> tuple[int, int]:
    size = config_value(config, "image_size", "img_size", "input_size")
    if isinstance(size, dict):
        size = (size.get("height"), size.get("width")) if "height" in size else size.get("shortest_edge")
    if isinstance(size, (list, tuple)) and len(size) >= 2 and all(isinstance(item, int) for item in size[-2:]):
        return int(size[-2]), int(size[-1])
    if isinstance(size, int) and size > 0:
        return size, size
    # Depth Pro tiles the image into patches of `patch_size` at each of its scales: the smallest scale must hold one.
    ratios, patch = config_value(config, "scaled_images_ratios"), getattr(config, "patch_size", None)
    if isinstance(ratios, (list, tuple)) and ratios and isinstance(patch, int) and min(ratios) > 0:
        side = int(math.ceil(patch / min(ratios)))
        return side, side
    return processor_image_size(config) or (224, 224)


def processor_image_size(config: Any) -> tuple[int, int] | None:
    """The (height, width) the model's own image processor resizes to, where that is smaller than the default
    224²: a text-line recogniser's head assumes the height its backbone folds to one row (PP-OCR rec: 48x320).
    Read from the source beside the config's module (`size = {"height": ..., "width": ...}` in a class body),
    never imported (processors import optional packages)."""
    import ast
    import pathlib
    import sys

    from reslint.static.literals import literal_eval

    module = sys.modules.get(type(config).__module__)
    source = getattr(module, "__file__", None)
    if not source:
        return None
    for path in sorted(pathlib.Path(source).parent.glob("image_processing_*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for klass in (node for node in tree.body if isinstance(node, ast.ClassDef)):
            for statement in klass.body:
                if isinstance(statement, ast.Assign) and [getattr(t, "id", None) for t in statement.targets] == ["size"]:
                    try:
                        size = literal_eval(statement.value)
                    except ValueError:
                        continue
                    if isinstance(size, dict) and isinstance(size.get("height"), int) and isinstance(size.get("width"), int) \
                            and 0 < size["height"] * size["width"] < 224 * 224:
                        return size["height"], size["width"]
    return None


def integer(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default


def hf_main_specs(model: Any, config: Any, main: str, batch: int) -> list[TensorSpec] | None:
    """The main input the model declares (`main_input_name`), sized from its config."""
    if main in ("input_ids", "decoder_input_ids", "token_ids"):
        vocab = integer(config_value(config, "vocab_size"), 100)
        limit = config_value(config, "max_position_embeddings", "n_positions", "max_seq_len")
        seq = min(SEQ, limit) if isinstance(limit, int) and limit > 0 else SEQ
        if is_head(model, "ForMultipleChoice"):  # (batch, choices, sequence)
            return [TensorSpec("int64", (batch, 2, seq), vocab, main)]
        return [TensorSpec("int64", (batch, seq), vocab, main)]
    if main in ("pixel_values", "pixel_values_videos", "images"):
        channels = integer(config_value(config, "num_channels", "in_channels", "in_chans", "input_channels"), 3)
        height, width = image_size(config)
        if is_head(model, "ForKeypointMatching"):  # a pair of images: (batch, 2, channels, height, width)
            return [TensorSpec("float32", (batch, 2, channels, height, width), name=main)]
        frames = config_value(config, "num_frames")
        if isinstance(frames, int) and frames > 0:  # video: (batch, frames, channels, height, width)
            return [TensorSpec("float32", (batch, frames, channels, height, width), name=main)]
        return [TensorSpec("float32", (batch, channels, height, width), name=main)]
    if main == "input_values":  # raw waveforms: one second
        rate = integer(config_value(config, "sampling_rate", "sample_rate"), 16000)
        channels = config_value(config, "audio_channels")
        shape = (batch, int(channels), rate) if isinstance(channels, int) and channels > 0 else (batch, rate)
        return [TensorSpec("float32", shape, name=main)]
    if main == "input_features":  # log-mel spectrograms
        mels = integer(config_value(config, "num_mel_bins", "feature_size", "input_feat_per_channel", "n_mels"), 80)
        positions = config_value(config, "max_source_positions")
        frames = 2 * positions if isinstance(positions, int) and 0 < positions <= 4096 else 64
        return [TensorSpec("float32", (batch, mels, frames), name=main)]
    if main == "spectrogram":  # a vocoder's log-mel frames: (batch, frames, mel bins)
        mels = integer(config_value(config, "model_in_dim", "num_mel_bins"), 80)
        return [TensorSpec("float32", (batch, SEQ, mels), name=main)]
    if main == "past_values":
        return time_series_specs(model, config, batch)
    if main == "states":
        return trajectory_specs(config, batch)
    if main == "inputs_embeds":
        width = integer(config_value(config, "hidden_size", "d_model", "n_embd"), 32)
        return [TensorSpec("float32", (batch, SEQ, width), name=main)]
    return None


def count(config: Any, name: str) -> int:
    value = getattr(config, name, None)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def time_series_specs(model: Any, config: Any, batch: int) -> list[TensorSpec]:
    """A forecasting model's context window (`context_length` plus the largest lag) with the time
    features, observed mask, static features and future window its forward takes."""
    parameters = forward_parameters(model)
    context = count(config, "context_length") or count(config, "prediction_length") or 32
    lags = getattr(config, "lags_sequence", None)
    past = context + (max(lags) if isinstance(lags, (list, tuple)) and lags else 0)
    width = integer(config_value(config, "input_size", "num_input_channels"), 1)
    univariate = width == 1 and lags is not None  # lag-based models take (batch, time) for one series
    values = (lambda length: (batch, length)) if univariate else (lambda length: (batch, length, width))
    features = count(config, "num_time_features") + count(config, "num_dynamic_real_features")
    specs = [TensorSpec("float32", values(past), name="past_values")]
    if "past_time_features" in parameters:
        specs.append(TensorSpec("float32", (batch, past, features), name="past_time_features"))
    if "past_observed_mask" in parameters:
        specs.append(TensorSpec("bool", values(past), name="past_observed_mask"))
    categorical = count(config, "num_static_categorical_features")
    if categorical and "static_categorical_features" in parameters:
        cardinality = getattr(config, "cardinality", None) or [2]
        specs.append(TensorSpec("int64", (batch, categorical), max(1, min(cardinality)), "static_categorical_features"))
    real = count(config, "num_static_real_features")
    if real and "static_real_features" in parameters:
        specs.append(TensorSpec("float32", (batch, real), name="static_real_features"))
    prediction = count(config, "prediction_length")
    if prediction and "future_time_features" in parameters:  # an encoder-decoder forecaster: its decoder window
        specs.append(TensorSpec("float32", values(prediction), name="future_values"))
        specs.append(TensorSpec("float32", (batch, prediction, features), name="future_time_features"))
    return specs


def trajectory_specs(config: Any, batch: int) -> list[TensorSpec]:
    """A Decision Transformer's trajectory: states, actions, rewards, returns-to-go and timesteps."""
    states, actions = integer(getattr(config, "state_dim", None), 17), integer(getattr(config, "act_dim", None), 4)
    episode = integer(getattr(config, "max_ep_len", None), 1000)
    return [TensorSpec("float32", (batch, SEQ, states), name="states"),
            TensorSpec("float32", (batch, SEQ, actions), name="actions"),
            TensorSpec("float32", (batch, SEQ, 1), name="rewards"),
            TensorSpec("float32", (batch, SEQ, 1), name="returns_to_go"),
            TensorSpec("int64", (batch, SEQ), episode, "timesteps"),
            TensorSpec("int64", (batch, SEQ), 2, "attention_mask", fill=1)]


def declared_dummy_inputs(model: Any) -> list[TensorSpec]:
    """The class's own `dummy_inputs` (where it overrides the generic one), as specs it accepts."""
    import torch

    for klass in type(model).__mro__:
        if "dummy_inputs" in vars(klass):
            if klass.__module__.startswith("transformers.modeling_utils"):
                return []
            break
    else:
        return []
    try:
        values = model.dummy_inputs
    except Exception:  # noqa: BLE001 - a property of the checked code
        return []
    if not isinstance(values, dict):
        return []
    specs = []
    for key, value in values.items():
        if isinstance(value, torch.Tensor) and accepts(model, key):
            dtype = str(value.dtype).removeprefix("torch.")
            high = int(value.max()) + 1 if not value.is_floating_point() and value.device.type != "meta" else None
            specs.append(TensorSpec(dtype, tuple(value.shape), high, key))
    return specs


def is_head(model: Any, suffix: str) -> bool:
    """Whether the model is (derived from) a transformers head class named `...{suffix}`."""
    return any(klass.__name__.endswith(suffix) for klass in type(model).__mro__)


def hf_candidates(model: Any, config: Any) -> list[Candidate]:
    """Inputs for a transformers model, most faithful first: its declared dummy inputs, then its main
    input sized from the config (with decoder inputs for an encoder-decoder, and the other inputs its
    forward requires), then that main input with every other modality input it accepts."""
    main = getattr(model, "main_input_name", "input_ids")
    main = main[0] if isinstance(main, (list, tuple)) and main else main
    name = type(model).__name__
    # A classification head that pools at the last non-pad token needs a pad token for batches > 1.
    batch = 1 if getattr(config, "pad_token_id", None) is None and is_head(model, "ForSequenceClassification") else BATCH
    extra = {"use_cache": False} if accepts(model, "use_cache") else {}
    candidates: list[Candidate] = []
    dummy = declared_dummy_inputs(model)
    if dummy:
        candidates.append((dummy, extra, f"{name}.dummy_inputs"))
    if main == "codebook_idx":  # Bark's fine model: the codebook to predict, from the ids of every codebook
        codes, given = integer(config_value(config, "n_codes_total"), 8), integer(config_value(config, "n_codes_given"), 1)
        vocab = integer(config_value(config, "input_vocab_size", "vocab_size"), 100)
        ids = TensorSpec("int64", (batch, SEQ, codes), vocab, "input_ids")
        return [*candidates, ([ids], {**extra, main: given}, f"{name} input_ids of its {codes} codebooks")]
    patches = flattened_patch_specs(model, config)
    if patches:
        return [*candidates, (patches, extra, f"{name} flattened patches with their grid, sized from its config")]
    specs = hf_main_specs(model, config, main, batch) if isinstance(main, str) and accepts(model, main) else None
    if specs is None:  # a main input of its own kind and a bundle of inputs (EsmFold2): what its forward documents
        documented = documented_specs(model, config)
        return [*candidates, (documented, extra, f"{name}'s documented inputs, sized from its config")] \
            if documented else candidates
    where = f"{name} {main}, sized from its config"
    seq = SEQ
    # Only a forward that names decoder inputs takes them (an encoder-only head's **kwargs would pass them on).
    if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in forward_parameters(model) \
            and main != "decoder_input_ids":
        vocab = integer(config_value(config, "vocab_size"), 100)
        specs = [*specs, TensorSpec("int64", (batch, seq), vocab, "decoder_input_ids")]
        where += ", with decoder_input_ids"
    elif getattr(config, "is_encoder_decoder", False) and "decoder_input_values" in forward_parameters(model):
        # A speech decoder (SpeechT5's text-to-speech) reads spectrogram frames, not token ids.
        mels = integer(config_value(config, "num_mel_bins"), 80)
        specs = [*specs, TensorSpec("float32", (batch, seq, mels), name="decoder_input_values")]
        where += ", with decoder_input_values"
    if {"context_input_ids", "doc_scores"} <= set(forward_parameters(model)):
        specs = [*specs, *retrieved_specs(config, specs[0])]
        where += ", with retrieved documents"
    if "entity_ids" in forward_parameters(model) and "Entity" in name:
        specs = [*specs, *entity_specs(model, config, batch, specs[0].shape[-1])]
        where += ", with entity inputs"
    declared = (specs, extra, where)
    if main == "input_values" and len(specs[0].shape) == 2:  # a codec takes mono audio as (batch, 1, samples)
        mono = ([TensorSpec("float32", (batch, 1, specs[0].shape[1]), name=main), *specs[1:]], extra,
                f"{where}, as mono audio (batch, 1, samples)")
        candidates.extend([mono, declared] if is_head(model, "AudioTokenizerBase") else [declared, mono])
    else:
        candidates.append(declared)
    if main == "input_features":  # some encoders take (batch, frames, features): Speech2Text, Wav2Vec2-BERT
        width = integer(config_value(config, "feature_projection_input_dim", "input_feat_per_channel", "feature_size",
                                     "num_mel_bins"), specs[0].shape[1])
        frames = TensorSpec("float32", (batch, 64, width), name=main)
        candidates.append(([frames, *specs[1:]], extra, f"{name} {main} as (batch, frames, features), sized from its config"))
    others = [other for other in ("input_ids", "pixel_values", "input_values", "input_features")
              if other != main and other in forward_parameters(model)]
    if others:
        more = [spec for other in others for spec in (hf_main_specs(model, config, other, batch) or [])]
        candidates.append(([*specs, *more], extra, f"{where}, with {', '.join(others)}"))
    fullest, _, described = candidates[-1]
    if fullest[0].dtype == "int64" and len(fullest[0].shape) == 2 and "attention_mask" in forward_parameters(model) \
            and all(spec.name != "attention_mask" for spec in fullest):
        # A forward that builds its default mask only outside export (Switch Transformers) needs one passed.
        mask = TensorSpec("int64", fullest[0].shape, 2, "attention_mask", fill=1)
        candidates.append(([*fullest, mask], extra, f"{described}, with an all-ones attention_mask"))
    return candidates


def flattened_patch_specs(model: Any, config: Any) -> list[TensorSpec]:
    """A Qwen2-VL-style vision tower's `(hidden_states, grid_thw)`: the patches of all images flattened to
    (patches, channels * temporal_patch_size * patch_size²), and each image's (t, h, w) grid of patches. The
    grid's sides are whole multiples of `spatial_merge_size`, since the merger folds merge² patches into one.
    [] for a forward that does not take them."""
    parameters = forward_parameters(model)
    patch, merge = config_value(config, "patch_size"), config_value(config, "spatial_merge_size")
    patch = patch[0] if isinstance(patch, (list, tuple)) and patch else patch
    if not {"hidden_states", "grid_thw"} <= set(parameters) or not isinstance(patch, int) or not isinstance(merge, int):
        return []
    temporal = config_value(config, "temporal_patch_size")
    temporal = integer(temporal[0] if isinstance(temporal, (list, tuple)) and temporal else temporal, 1)
    channels = integer(config_value(config, "in_channels", "num_channels", "in_chans"), 3)
    side = 2 * integer(merge, 1)  # one grid of side³ patches (t = h = w: a spec fills every entry alike)
    return [TensorSpec("float32", (side ** 3, channels * temporal * patch * patch), name="hidden_states"),
            TensorSpec("int64", (1, 3), name="grid_thw", fill=side)]


def retrieved_specs(config: Any, question: TensorSpec) -> list[TensorSpec]:
    """A retrieval-augmented generator without a retriever (RAG) reads the retrieved documents as inputs:
    `n_docs` contexts per question, their mask and the retrieval scores."""
    batch, seq = question.shape[0], question.shape[-1]
    docs = integer(getattr(config, "n_docs", None), 1)
    return [TensorSpec("int64", (batch * docs, seq), question.high, "context_input_ids"),
            TensorSpec("int64", (batch * docs, seq), 2, "context_attention_mask", fill=1),
            TensorSpec("float32", (batch, docs), name="doc_scores")]


def entity_specs(model: Any, config: Any, batch: int, seq: int) -> list[TensorSpec]:
    """LUKE's entity heads classify entities (and entity pairs, spans) of the text: two entities, each a
    one-token mention, with the span positions a span head asks for."""
    parameters = forward_parameters(model)
    vocab = integer(config_value(config, "entity_vocab_size"), 2)
    specs = [TensorSpec("int64", (batch, 2), vocab, "entity_ids", fill=1),
             TensorSpec("int64", (batch, 2), 2, "entity_attention_mask", fill=1),
             TensorSpec("int64", (batch, 2, 1), seq, "entity_position_ids")]
    specs += [TensorSpec("int64", (batch, 2), seq, name) for name in ("entity_start_positions", "entity_end_positions")
              if name in parameters]
    return specs


def infer_candidates(model: Any) -> list[Candidate]:
    """Every plausible set of inputs, the likeliest first; raises InputError when there is none."""
    config = hf_config(model)
    if config is not None:
        candidates = hf_candidates(model, config)
        if candidates:
            return candidates
    # what the forward's docstring gives shapes for comes last: a model the layers' guesses run is traced as before
    documented = documented_candidate(model)
    try:
        candidates = plain_candidates(model)
    except InputError:
        if documented is None:
            raise
        return [documented]
    return candidates + [documented] if documented is not None and documented not in candidates else candidates


def infer_inputs(model: Any, device: str) -> Inputs:
    return candidate_inputs(infer_candidates(model)[0], device)


def candidate_inputs(candidate: Candidate, device: str) -> Inputs:
    specs, extra, where = candidate
    inputs = from_specs(specs, device, extra)
    inputs.description = f"{inputs.description} (inferred from {where})"
    return inputs


def as_inputs(value: Any) -> Inputs:
    """Inputs given as values: an `Inputs`, a tuple (the positional arguments), a dict (the keyword
    arguments), or anything else (the one positional argument), described like a shape spec."""
    if isinstance(value, Inputs):
        return value
    if isinstance(value, tuple):
        inputs = Inputs(value, {})
    elif isinstance(value, dict):
        inputs = Inputs((), value)
    else:
        inputs = Inputs((value,), {})
    inputs.description = describe_value(inputs)
    return inputs


def describe_value(inputs: Inputs) -> str:
    """`long[2,64]; mask=bool[2,64]`: the tensors' dtypes and shapes, other values' type names."""
    import torch

    names = {value: key for key, value in DTYPES.items() if key in ("long", "int", "float", "half", "double", "bfloat16", "bool")}

    def one(value: Any) -> str:
        if isinstance(value, torch.Tensor):
            dtype = str(value.dtype).removeprefix("torch.")
            return f"{names.get(dtype, dtype)}[{','.join(map(str, value.shape))}]"
        return type(value).__name__

    parts = [one(value) for value in inputs.args] + [f"{key}={one(value)}" for key, value in inputs.kwargs.items()]
    return "; ".join(parts)
