"""Inputs for a forward that takes its tensors in one mapping: neuralforecast's `forward(self, windows_batch)`
reads `windows_batch["insample_y"]`, `windows_batch["futr_exog"]`, ...; no tensor can stand for it.

The keys are the string constants the forward's body subscripts the parameter with (or `.get`s from it), in the
order it reads them. The first key read is the series itself: `(batch, time, channels)` floats, the time one of
the window lengths the model keeps (`self.input_size`, `self.context_length`, ...) or the default sequence length,
the channels 1 or the series count it keeps (`self.n_series`). The other keys are optional covariates first
(None: what a model built without them is handed), then tensors like the series. The probe keeps the first set
that runs.

A forward that takes its tensors in one dataclass (darts' `forward(self, x_in: PLModuleInput)`, whose only
required field is `past_target`) gets the same: each required tensor field `(batch, time, width)` with the width
of the first layer the plain guess found and the time one of the window lengths the model keeps; the optional
fields keep their defaults (a model built without covariates).
"""

from __future__ import annotations

import ast
import inspect
from typing import Any

from reslint.trace.documented_inputs import StructSpec, struct_class, type_hints
from reslint.trace.forward_body import forward_tree
from reslint.trace.input_specs import BATCH, SEQ, Candidate, TensorSpec

WINDOW_ATTRIBUTES = ("input_size", "context_length", "input_len", "input_length", "seq_len", "lookback", "max_seq_len",
                     "input_chunk_length")
SERIES_ATTRIBUTES = ("n_series", "num_series", "enc_in", "n_vars", "c_in")
MAX_WINDOW = 2048


def read_keys(model: Any) -> dict[str, list[str]]:
    """{required forward parameter: the string keys the body reads from it, in order}."""
    tree, parameters = forward_tree(model)
    if tree is None:
        return {}
    required = {name for name, parameter in parameters.items() if parameter.default is inspect.Parameter.empty
                and parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)}
    found: list[tuple[int, int, str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in required \
                and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            found.append((node.lineno, node.col_offset, node.value.id, node.slice.value))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and isinstance(node.func.value, ast.Name) and node.func.value.id in required and node.args \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            found.append((node.lineno, node.col_offset, node.func.value.id, node.args[0].value))
    keys: dict[str, list[str]] = {}
    for _, _, name, key in sorted(found):
        if key not in keys.setdefault(name, []):
            keys[name].append(key)
    return keys


def own_sizes(model: Any, names: tuple[str, ...], limit: int) -> list[int]:
    sizes = [value for name in names if isinstance(value := getattr(model, name, None), int)
             and not isinstance(value, bool) and 0 < value <= limit]
    return list(dict.fromkeys(sizes))


def mapping_candidates(model: Any) -> list[Candidate]:
    """Candidates for a forward whose one mapping parameter holds its tensors; [] for any other forward."""
    keys = read_keys(model)
    if len(keys) != 1:
        return []
    (parameter, read), = keys.items()
    series, others = read[0], read[1:]
    windows = list(dict.fromkeys([SEQ, *own_sizes(model, WINDOW_ATTRIBUTES, MAX_WINDOW)]))
    channels = list(dict.fromkeys([1, *own_sizes(model, SERIES_ATTRIBUTES, MAX_WINDOW)]))
    candidates = []
    for covariates in ("none", "like"):
        for window in windows:
            for width in channels:
                first = TensorSpec("float32", (BATCH, window, width), name=series)
                fields = (first, *(TensorSpec("float32", first.shape, name=key) for key in others)) \
                    if covariates == "like" else (first,)
                nones = () if covariates == "like" else tuple(others)
                where = (f"the keys its forward reads from `{parameter}`"
                         + (", the covariates None" if nones else ""))
                candidates.append(([StructSpec(parameter, dict, fields, nones)], {}, where))
    return candidates


def bundle_candidates(model: Any, first: TensorSpec) -> list[Candidate]:
    """Candidates for a forward whose one required parameter is a dataclass of tensors; [] for any other forward.
    `first`: the plain guess of the first input, whose last dimension is the width the first layer takes."""
    import dataclasses

    import torch

    tree, parameters = forward_tree(model)
    required = [name for name, parameter in parameters.items() if parameter.default is inspect.Parameter.empty
                and parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)]
    hints = type_hints(inspect.unwrap(type(model).forward))
    bundle = struct_class(hints.get(required[0])) if len(required) == 1 else None
    if bundle is None or not dataclasses.is_dataclass(bundle) or not isinstance(first, TensorSpec) or not first.shape:
        return []
    fields = type_hints(bundle)
    needed = [item.name for item in dataclasses.fields(bundle) if item.init and item.default is dataclasses.MISSING
              and item.default_factory is dataclasses.MISSING]
    if not needed or any(fields.get(name) is not torch.Tensor for name in needed):
        return []
    return [([StructSpec(required[0], bundle, tuple(TensorSpec("float32", (BATCH, window, first.shape[-1]), name=name)
                                                    for name in needed))], {},
             f"the required tensors of `{bundle.__name__}`, sized from the first layer")
            for window in dict.fromkeys([*own_sizes(model, WINDOW_ATTRIBUTES, MAX_WINDOW), SEQ])]
