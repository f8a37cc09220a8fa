"""Inputs of a graph layer (a forward that takes `edge_index`): node features `(nodes, features)` without a
batch axis, `edge_index` a `(2, edges)` long tensor of valid node indices, and `batch` the graph of each
node, all zeros: one graph. Optional inputs (edge features, a batch vector that may be None) are left out.
"""

from __future__ import annotations

import inspect
from typing import Any

from reslint.trace.input_specs import SEQ, Candidate, TensorSpec, forward_parameters

NODES = SEQ
EDGES = 2 * NODES
NODE_FEATURE_NAMES = ("x", "h", "node_feats", "node_features", "features", "feats")


def graph_candidate(model: Any, features: int) -> Candidate | None:
    """The graph inputs of a forward that takes `edge_index`, with `features` per node; None for another forward
    or one with a required input these names do not tell."""
    parameters = [parameter for parameter in forward_parameters(model).values()
                  if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD,
                                        parameter.KEYWORD_ONLY)]
    if "edge_index" not in {parameter.name for parameter in parameters}:
        return None
    specs = []
    for parameter in parameters:
        name = parameter.name
        keyword = "" if parameter.kind is parameter.POSITIONAL_ONLY else name
        if name == "edge_index":
            specs.append(TensorSpec("int64", (2, EDGES), NODES, keyword))
        elif name == "batch" and parameter.default is inspect.Parameter.empty:
            specs.append(TensorSpec("int64", (NODES,), name=keyword, fill=0))
        elif name in NODE_FEATURE_NAMES and not any(spec.name in NODE_FEATURE_NAMES for spec in specs):
            specs.append(TensorSpec("float32", (NODES, features), name=keyword))
        elif parameter.default is inspect.Parameter.empty:
            return None
    return specs, {}, f"a graph of {NODES} nodes and {EDGES} edges, {features} features a node"
