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

import re
from dataclasses import dataclass, field
from typing import Any

DTYPES = {
    "long": "int64", "int64": "int64", "int": "int32", "int32": "int32", "int16": "int16", "int8": "int8",
    "uint8": "uint8", "float": "float32", "float32": "float32", "double": "float64", "float64": "float64",
    "half": "float16", "float16": "float16", "bfloat16": "bfloat16", "bool": "bool",
}
ITEM = re.compile(r"\s*(?:([A-Za-z_]\w*)\s*=\s*)?([A-Za-z0-9]+)\s*\[\s*(\d+(?:\s*,\s*\d+)*)?\s*,?\s*\]\s*(?:<\s*(\d+))?\s*")

BATCH, SEQ = 2, 16


class InputError(Exception):
    """The inputs cannot be parsed, evaluated or inferred (one-line reason)."""


@dataclass(frozen=True)
class TensorSpec:
    dtype: str  # torch dtype name
    shape: tuple[int, ...]
    high: int | None = None  # integer values lie in [0, high)
    name: str = ""  # keyword argument name, "" for positional


@dataclass
class Inputs:
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    description: str = ""  # e.g. "long[2,16]<100 (inferred from nn.Embedding)"


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


def make_tensor(spec: TensorSpec, device: str) -> Any:
    import torch

    dtype = getattr(torch, spec.dtype)
    if device == "meta":
        return torch.empty(spec.shape, dtype=dtype, device="meta")
    generator = torch.Generator().manual_seed(0)
    if dtype == torch.bool:
        return torch.ones(spec.shape, dtype=dtype)
    if dtype.is_floating_point:
        return torch.randn(spec.shape, generator=generator).to(dtype)
    return torch.randint(0, spec.high or 2, spec.shape, generator=generator, dtype=dtype)


def describe(specs: list[TensorSpec]) -> str:
    reverse = {"int64": "long", "int32": "int", "float32": "float"}
    parts = []
    for spec in specs:
        text = f"{reverse.get(spec.dtype, spec.dtype)}[{','.join(map(str, spec.shape))}]"
        if spec.high is not None:
            text += f"<{spec.high}"
        parts.append(f"{spec.name}={text}" if spec.name else text)
    return "; ".join(parts)


def from_specs(specs: list[TensorSpec], device: str, extra_kwargs: dict | None = None) -> Inputs:
    args = tuple(make_tensor(spec, device) for spec in specs if not spec.name)
    kwargs = {spec.name: make_tensor(spec, device) for spec in specs if spec.name}
    kwargs.update(extra_kwargs or {})
    return Inputs(args, kwargs, describe(specs))


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

    try:
        parameters = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False
    return name in parameters or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


def infer_specs(model: Any) -> tuple[list[TensorSpec], dict, str]:
    """(tensor specs, extra keyword arguments, where they come from); raises InputError."""
    from torch import nn

    config = hf_config(model)
    if config is not None and getattr(model, "main_input_name", "input_ids") == "input_ids":
        vocab = getattr(config, "vocab_size", None) or 100
        limit = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
        seq = min(SEQ, limit) if isinstance(limit, int) and limit > 0 else SEQ
        extra = {"use_cache": False} if accepts(model, "use_cache") else {}
        return [TensorSpec("int64", (BATCH, seq), int(vocab), "input_ids")], extra, f"{type(model).__name__} input_ids"

    for name, module in model.named_modules():
        where = f"{type(module).__name__}" + (f" ({name})" if name else "")
        if isinstance(module, nn.TransformerEncoder):
            module = module.layers[0]
        if isinstance(module, (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)):
            width, batch_first = module.self_attn.embed_dim, module.self_attn.batch_first
            if isinstance(module, nn.TransformerDecoderLayer):
                shape = (BATCH, SEQ, width) if batch_first else (SEQ, BATCH, width)
                return [TensorSpec("float32", shape), TensorSpec("float32", shape)], {}, where
            return [TensorSpec("float32", (BATCH, SEQ, width) if batch_first else (SEQ, BATCH, width))], {}, where
        if isinstance(module, nn.MultiheadAttention):
            shape = (BATCH, SEQ, module.embed_dim) if module.batch_first else (SEQ, BATCH, module.embed_dim)
            if name == "":
                return [TensorSpec("float32", shape)] * 3, {}, where
            return [TensorSpec("float32", shape)], {}, where
        if isinstance(module, nn.Embedding):
            return [TensorSpec("int64", (BATCH, SEQ), module.num_embeddings)], {}, where
        if isinstance(module, nn.EmbeddingBag):
            return [TensorSpec("int64", (BATCH, SEQ), module.num_embeddings)], {}, where
        if isinstance(module, nn.Linear):
            return [TensorSpec("float32", (BATCH, SEQ, module.in_features))], {}, where
        if isinstance(module, nn.Conv1d):
            return [TensorSpec("float32", (BATCH, module.in_channels, 64))], {}, where
        if isinstance(module, nn.Conv2d):
            return [TensorSpec("float32", (BATCH, module.in_channels, 32, 32))], {}, where
        if isinstance(module, nn.Conv3d):
            return [TensorSpec("float32", (BATCH, module.in_channels, 8, 16, 16))], {}, where
        if isinstance(module, (nn.RNN, nn.LSTM, nn.GRU)):
            shape = (BATCH, SEQ, module.input_size) if module.batch_first else (SEQ, BATCH, module.input_size)
            return [TensorSpec("float32", shape)], {}, where
        if isinstance(module, (nn.LayerNorm, nn.RMSNorm)) and module.normalized_shape:
            return [TensorSpec("float32", (BATCH, SEQ, *module.normalized_shape))], {}, where
    # Hand-written layers (a manual LayerNorm's weight (d,), a raw weight matrix (out, in)): features of that width.
    for name, parameter in model.named_parameters():
        if parameter.dim() in (1, 2) and parameter.is_floating_point():
            width = int(parameter.shape[-1])
            return [TensorSpec("float32", (BATCH, SEQ, width))], {}, f"parameter {name} {tuple(parameter.shape)}"
    if next(model.parameters(), None) is None:  # a parameter-free function (a hand-written norm, an activation)
        return [TensorSpec("float32", (BATCH, SEQ, 32))], {}, "default features: the model has no parameters"
    raise InputError("cannot infer the inputs (no embedding, linear, conv or attention layer found); pass --inputs")


def infer_inputs(model: Any, device: str) -> Inputs:
    specs, extra, where = infer_specs(model)
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
