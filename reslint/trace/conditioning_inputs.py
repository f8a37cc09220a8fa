"""Conditioning inputs of a plain-torch model, shaped by the layer that reads them (see consuming_layers).

A diffusion block's `temb`, an adaptive norm's `emb`, a FiLM layer's `cond` are one vector per example:
`(batch, width)`, of the width of the nn.Linear they reach. A timestep or noise level reaching an
nn.Embedding is a `(batch,)` index below its size, else a `(batch,)` step a sinusoidal projection
turns into features (a timestep that reaches an nn.Linear directly is already an embedding: a vector).
Class labels are `(batch,)` indices below the nn.Embedding they reach. A second stream the model attends
to (`encoder_hidden_states`, `context`) is `(batch, time, width)` of the layer that reads it.
The name says what kind of input it is; the layer it reaches says its size. Without such a layer, only a
timestep is made (its size needs none).
"""

from __future__ import annotations

import re
from typing import Any

from reslint.trace.input_specs import TensorSpec

VECTOR_NAMES = re.compile(r"t?emb|(\w+_)?(emb|embs|embedding|embeddings)|cond(ition|itioning)?(_\w+)?|(\w+_)?cond"
                          r"|c|pooled(_\w+)?")
TIME_NAMES = re.compile(r"t|time|times|timesteps?|sigmas?|noise_levels?|(\w+_)?noise_time")
LABEL_NAMES = re.compile(r"(class_)?labels?|y|class_(ids?|idx)|classes")
SIDE_NAMES = re.compile(r"context|memory|encoder_(hidden_states|out|outputs?)|enc_out")
TIMESTEPS = 100  # the values of a timestep made without an nn.Embedding to bound it


def conditioning_kind(name: str) -> str | None:
    """'time', 'label', 'vector' or 'side' by the parameter's name; None for any other input."""
    lowered = name.lower()
    for kind, pattern in (("time", TIME_NAMES), ("label", LABEL_NAMES), ("side", SIDE_NAMES), ("vector", VECTOR_NAMES)):
        if pattern.fullmatch(lowered):
            return kind
    return None


def conditioning_spec(model: Any, parameter: Any, batch: int, seq: int) -> TensorSpec | None:
    """The tensor a conditioning parameter of the forward calls for, or None (not one, or its size unknown)."""
    from torch import nn

    from reslint.trace.consuming_layers import consuming_layer

    kind = conditioning_kind(parameter.name)
    if kind is None or "mask" in parameter.name.lower():
        return None
    keyword = parameter.name if parameter.kind is not parameter.POSITIONAL_ONLY else ""
    layer = consuming_layer(model, parameter.name)
    if isinstance(layer, nn.Embedding):
        return TensorSpec("int64", (batch,), layer.num_embeddings, keyword) if kind in ("time", "label") else None
    width = layer.in_features if isinstance(layer, nn.Linear) else \
        int(layer.normalized_shape[-1]) if isinstance(layer, (nn.LayerNorm, nn.RMSNorm)) and layer.normalized_shape \
        else None
    if width is not None and kind == "side":
        return TensorSpec("float32", (batch, seq, width), name=keyword)
    if width is not None and kind in ("vector", "time"):
        return TensorSpec("float32", (batch, width), name=keyword)
    if kind == "time":
        return TensorSpec("int64", (batch,), TIMESTEPS, keyword)
    return None
