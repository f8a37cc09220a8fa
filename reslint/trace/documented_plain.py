"""Inputs a plain-torch model's forward documents: ``name (`torch.Tensor` of shape `(batch_size, embedding_dim)`)``.

Where the layers leave the shapes open (a prior that reads a `(batch, width)` vector, not a sequence; a second
and a third stream, `encoder_hidden_states` and `global_hidden_states`, that default to None but are read
unconditionally), the forward's docstring says them. A dimension named like a field of the model's config (a
diffusers `model.config`) or an int attribute of the model takes its value (`embedding_dim` 768,
`num_embeddings` 77: a position table may need exactly that many), else the one field whose name ends with
it (`projection_dim`: `pooled_projection_dim`); `batch size` the batch, any other name the sequence length.
Every documented tensor is given, optional ones too (the model may read them whatever their default), except
an optional mask (none means no masking), and so is a timestep (conditioning_inputs), which is seldom given a
shape. This candidate comes after the ones the layers suggest, so a model they already run is traced as before.
"""

from __future__ import annotations

import inspect
from typing import Any

from reslint.trace.conditioning_inputs import conditioning_kind, conditioning_spec
from reslint.trace.documented_inputs import INDEX, MASK, documented_shapes
from reslint.trace.input_specs import BATCH, SEQ, Candidate, TensorSpec, forward_parameters


def documented_candidate(model: Any) -> Candidate | None:
    """The inputs the forward's docstring gives shapes for, or None when it documents none or a required
    parameter can be made neither from a documented shape nor as a timestep."""
    shapes = documented_shapes(inspect.getdoc(type(model).forward) or "")
    if not shapes:
        return None
    specs = []
    for parameter in forward_parameters(model).values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        required = parameter.default is inspect.Parameter.empty
        if parameter.name in shapes and (required or not MASK.search(parameter.name)):
            specs.append(documented_spec(model, parameter.name, shapes[parameter.name]))
        elif conditioning_kind(parameter.name) == "time" and \
                (spec := conditioning_spec(model, parameter, BATCH, SEQ)) is not None:
            specs.append(TensorSpec(spec.dtype, spec.shape, spec.high, parameter.name, spec.fill))
        elif required:
            return None
    if not specs:
        return None
    return specs, {}, f"the shapes {type(model).__name__}.forward documents"


def documented_spec(model: Any, name: str, dims: list[str]) -> TensorSpec:
    shape = tuple(dimension_size(model, dim) for dim in dims)
    if MASK.search(name):
        return TensorSpec("bool", shape, name=name)
    if INDEX.search(name):
        return TensorSpec("int64", shape, name=name, fill=0)
    return TensorSpec("float32", shape, name=name)


def dimension_size(model: Any, dim: str) -> int:
    name = "_".join(dim.split())
    if name.isdigit():
        return int(name)
    if name in ("batch_size", "batch", "bsz"):
        return BATCH
    fields = int_fields(model)
    if name in fields:
        return fields[name]
    ending = [value for field, value in fields.items() if field.endswith("_" + name)]
    return ending[0] if len(ending) == 1 else SEQ


def int_fields(model: Any) -> dict[str, int]:
    """The positive int fields of the model's config (a mapping or an object) and then of the model itself."""
    config = getattr(model, "config", None)
    items = dict(config) if isinstance(config, dict) else dict(vars(config)) if hasattr(config, "__dict__") else {}
    for name, value in vars(model).items():
        items.setdefault(name, value)
    return {name: value for name, value in items.items()
            if isinstance(value, int) and not isinstance(value, bool) and value > 0}
