"""Inputs of a tabular model, whose forward takes its categorical and its continuous features apart
(`forward(x_categ, x_cont)`, `forward(x_num, x_cat)`): rows `(batch, columns)`, the categorical ones category
indices, the continuous ones floats. How many columns each has, the model says: an integer it keeps
(`self.num_categories`, `self.num_continuous`), else its layers, the embeddings of the categorical columns (one
table per column) and the per-column weights of the continuous ones (`(columns, width)`), else as many as
constructor_arguments infers for a count. Indices are 0 or 1: every categorical column has two categories or more.
"""

from __future__ import annotations

import re
from typing import Any

from reslint.trace.constructor_arguments import COUNT
from reslint.trace.input_specs import BATCH, Candidate, TensorSpec, forward_parameters

CATEGORICAL = re.compile(r"(x_|inputs?_)?(cat|categ|categorical|categories)(_\w+)?")
CONTINUOUS = re.compile(r"(x_|inputs?_)?(cont|continuous|num|numer|numerical|numeric)(_\w+)?")
KINDS = {"categorical": (CATEGORICAL, ("categ", "cat_")), "continuous": (CONTINUOUS, ("cont", "numer"))}
CATEGORY_VALUES = 2


def tabular_candidate(model: Any) -> Candidate | None:
    """The rows of a forward that takes categorical and continuous features apart, or None."""
    parameters = [parameter for parameter in forward_parameters(model).values()
                  if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD)
                  and parameter.default is parameter.empty]
    kinds = [kind_of(parameter.name) for parameter in parameters]
    if len(parameters) != 2 or sorted(kinds, key=str) != ["categorical", "continuous"]:
        return None
    specs = []
    for parameter, kind in zip(parameters, kinds):
        columns = column_count(model, kind) or COUNT  # else as many as an inferred count of columns
        dtype, high = ("int64", CATEGORY_VALUES) if kind == "categorical" else ("float32", None)
        specs.append(TensorSpec(dtype, (BATCH, columns), high, parameter.name))
    return specs, {}, "categorical and continuous columns of a tabular model"


def kind_of(name: str) -> str | None:
    lowered = name.lower()
    return next((kind for kind, (pattern, _) in KINDS.items() if pattern.fullmatch(lowered)), None)


def column_count(model: Any, kind: str) -> int | None:
    """How many columns of `kind` the model reads: a count it keeps, else its layers for them."""
    from torch import nn

    words = KINDS[kind][1]
    for name, value in vars(model).items():
        if isinstance(value, int) and not isinstance(value, bool) and value > 0 and \
                re.fullmatch(r"(num|n)_\w+", name) and any(word in name + "_" for word in words):
            return value
    for name, module in model.named_children():
        if not any(word in name + "_" for word in words) or module is None:
            continue
        if kind == "categorical":
            tables = [layer for layer in module.modules() if isinstance(layer, nn.Embedding)]
            if len(tables) > 1:
                return len(tables)
        else:
            weights = [parameter for parameter in module.parameters() if parameter.dim() == 2]
            if weights:
                return int(weights[0].shape[0])
    return None
