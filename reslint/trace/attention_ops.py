"""Attention written by hand in a traced graph: a softmax over the product of two activations (`q @ k^T`),
through the scaling, masking and position terms between them (espnet2's transducer attention, whose scores
come from a method its constructor chose). A sequence marker (RL201), worded as the static engine words it."""

from __future__ import annotations

SOFTMAX_OPS = {"softmax", "_softmax", "_safe_softmax", "log_softmax", "_log_softmax"}
ACTIVATION_PRODUCT_OPS = {"matmul", "bmm", "baddbmm", "einsum"}
MAX_STEPS_TO_PRODUCT = 8  # ops between the scores' product and the softmax (scale, bias, shift, mask)
MARKER = "attention (softmax over q @ k)"


def softmax_over_product(graph, node) -> bool:
    """True when `node` is a softmax whose input comes, within a few ops, from a product of two activations."""
    if graph.ops[node] not in SOFTMAX_OPS:
        return False
    pending, seen = list(graph.data_inputs(node)), set()
    for _ in range(MAX_STEPS_TO_PRODUCT):
        following = []
        for current in pending:
            if current in seen:
                continue
            seen.add(current)
            if graph.ops[current] in ACTIVATION_PRODUCT_OPS and not graph.parametrised(current) \
                    and len(graph.data_inputs(current)) >= 2:
                return True
            following.extend(graph.data_inputs(current))
        pending = following
    return False
