"""The fast capture path, tried before torch.export: torch.fx symbolic tracing plus shape propagation on
meta tensors.

torch.export pays seconds of dynamo warm-up in every fresh process and dispatches each op through fake
tensors in Python (about 5x fx's time on a 12-block GPT); a plain nn.Module whose forward has no
data-dependent control flow gives the same facts through fx. Only then is fx's graph kept: every node
must spell what it computes as export's graph does (the layers and ops below, each checked on the
fixtures and examples, both engines' results compared in tests/test_fast_capture.py). The forward is traced
as it is called: a None-defaulting parameter the inputs leave out is None, as export runs it. A tracing
error, a shape error, any other node or a size operator that computed a tensor, and capture_model goes on to
export exactly as without this step.
"""

from __future__ import annotations

import operator
import os
from typing import Any

from reslint.static import torch_api

ENABLED = True  # off: export first, as before (the identity tests compare both)
# torch.nn layers kept whole (fx leaves) whose insides hold no residual, norm or stack: export's
# graph shows their ops, fx's one call; the trace engine reads both alike (op_tables.MODULE_OPS).
# Other torch.nn modules (activations, containers) are traced through, into the functions below.
LEAF_LAYERS = (torch_api.LINEAR_MODULES | torch_api.DROPOUT_MODULES | torch_api.PASSTHROUGH_MODULES
               | set(torch_api.NORM_MODULES) | torch_api.CONV_MODULES | {"Embedding", "MultiheadAttention"})
# Python operators and torch functions/methods that export records as the one aten op of that name (`split` with a
# list of sizes is export's `split_with_sizes`, which the trace engine reads alike: kept_rows.SPLIT_OPS).
OPERATORS = {operator.add, operator.sub, operator.mul, operator.truediv, operator.neg, operator.getitem,
             operator.matmul}
# Python operators on sizes only (`C // self.n_head`): export's graph holds the number they compute, no node; on a
# tensor they are an op export spells otherwise (`floor_divide`), and the fast path declines.
SIZE_OPERATORS = {operator.floordiv}
METADATA = {"device", "dtype", "shape", "ndim"}
SAME_OPS = {
    "add", "sub", "mul", "div", "neg", "matmul", "bmm", "linear", "embedding", "dropout",
    "layer_norm", "rms_norm", "gelu", "relu", "silu", "tanh", "sigmoid", "softmax", "log_softmax", "glu",
    "scaled_dot_product_attention", "transpose", "permute", "view", "reshape", "contiguous", "size",
    "arange", "unsqueeze", "squeeze", "flatten", "cat", "expand", "masked_fill", "pow", "mean", "rsqrt",
    "sqrt", "to", "float", "type_as", "split", "chunk", "var", "std", "sum", "exp", "sin", "cos", "stack",
}


def capture_fast_first(model: Any, inputs: Any, *, name: str, line: int, path: str, cpu_variant=None):
    """capture.capture_model with this fast path first: (capture, failures)."""
    from reslint.trace.capture import capture_model

    if ENABLED:
        fast = fast_capture(model, inputs, name, line)
        if fast is not None:
            return fast, []
    return capture_model(model, inputs, name=name, line=line, path=path, cpu_variant=cpu_variant)


def fast_capture(model: Any, inputs: Any, name: str, line: int):
    """A Capture (method "fx") where fx's graph reads as export's would, else None (nothing recorded)."""
    from reslint.trace.capture import Capture, TraceTimeout, positional, quiet

    try:
        with quiet():
            module = traced(model, inputs)
            if module is None:
                return None
            propagate(module, positional(model, inputs))
    except (TraceTimeout, KeyboardInterrupt):
        raise
    except BaseException:  # noqa: BLE001 - user code and tracer internals: export decides
        return None
    if not sizes_only(module):
        return None
    return Capture(module, "fx", model, name, line, [], None, inputs.description)


def stack_tracer():
    import torch.fx

    class StackTracer(torch.fx.Tracer):
        def is_leaf_module(self, module: Any, qualified_name: str) -> bool:
            return type(module).__name__ in LEAF_LAYERS and type(module).__module__.startswith("torch.nn")

        def create_node(self, *args: Any, **kwargs: Any) -> Any:
            node = super().create_node(*args, **kwargs)
            if not node.stack_trace:
                node.stack_trace = user_stack() or None
            return node

    return StackTracer()


def traced(model: Any, inputs: Any):
    """fx's GraphModule of the model, or None when a node is outside the shared vocabulary."""
    import torch.fx

    tracer = stack_tracer()
    graph = trace_as_called(tracer, model, inputs)
    module = torch.fx.GraphModule(tracer.root, graph, type(model).__name__)
    modules = dict(module.named_modules())
    return module if all(same_meaning(node, modules) for node in graph.nodes) else None


def trace_as_called(tracer: Any, model: Any, inputs: Any):
    """`tracer.trace(model)` with the forward's None-defaulting parameters that the inputs leave out held None."""
    left_out = omitted_optional_arguments(model, inputs)
    graph = tracer.trace(model, concrete_args=dict.fromkeys(left_out, None) or None)
    for node in list(graph.nodes):
        # fx's guard that a specialised argument stays None: the calls that run the graph never pass one.
        if node.op == "call_function" and getattr(node.target, "__name__", "") == "_assert_is_none":
            graph.erase_node(node)
    return graph


def omitted_optional_arguments(model: Any, inputs: Any) -> list[str]:
    """The forward's parameters that default to None and that the inputs leave out. fx makes every parameter a
    Proxy, which `mask is None` takes as given; export, like the call, runs the forward with them None
    (`if mask is None: x = self.head(x)` applies the head), and so must fx's graph."""
    import inspect

    try:
        signature = inspect.signature(model.forward)
        given = signature.bind(*inputs.args, **inputs.kwargs).arguments
    except (TypeError, ValueError):
        return []
    return [name for name, parameter in signature.parameters.items() if parameter.default is None and name not in given
            and parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)]


def user_stack() -> str:
    """The `forward` frames of the caller's stack outside torch, as export's stack traces keep them
    (fx's own `record_stack_traces` keeps every frame after the first forward, and imports
    torch._inductor and sympy on first use: 1.5 CPU-s)."""
    import sys
    import traceback

    import torch

    torch_dir = os.path.dirname(torch.__file__) + os.sep
    kept = []  # only these frames are summarised (their source lines read): a few of the stack's hundred
    frame = sys._getframe()
    while frame is not None:
        code = frame.f_code
        if code.co_name == "forward" and not code.co_filename.startswith(torch_dir):
            kept.append((frame, frame.f_lineno))
        frame = frame.f_back
    kept.reverse()
    return "".join(traceback.StackSummary.extract(kept).format()).strip()


def same_meaning(node: Any, modules: dict) -> bool:
    if node.op == "call_module":
        layer = modules.get(node.target)
        return type(layer).__name__ in LEAF_LAYERS and type(layer).__module__.startswith("torch.nn")
    if node.op == "call_function":
        if node.target is getattr:  # `x.device`, `x.shape`: metadata, no node in export's graph
            return len(node.args) == 2 and node.args[1] in METADATA
        return node.target in OPERATORS or node.target in SIZE_OPERATORS \
            or getattr(node.target, "__name__", None) in SAME_OPS
    if node.op == "call_method":
        return node.target in SAME_OPS
    return True  # placeholder, get_attr, output


def sizes_only(module: Any) -> bool:
    """Whether every size operator of the propagated graph computed a number, not a tensor."""
    import torch

    return not any(node.op == "call_function" and node.target in SIZE_OPERATORS
                   and isinstance(node.meta.get("val"), torch.Tensor) for node in module.graph.nodes)


def propagate(module: Any, arguments: list) -> None:
    """Each node's value on meta tensors into `meta["val"]`, where export leaves it (torch's ShapeProp
    imports sympy and dynamo for symbolic shapes this never has)."""
    import torch.fx

    from reslint.trace.meta_init import refs_without_dynamo
    from reslint.trace.meta_memo import memoized

    class ValueProp(torch.fx.Interpreter):
        def run_node(self, node: Any) -> Any:
            result = super().run_node(node)
            node.meta["val"] = result
            return result

        def call_function(self, target: Any, args: tuple, kwargs: dict) -> Any:
            return memoized(lambda: super(ValueProp, self).call_function(target, args, kwargs),
                            "function", target, args, kwargs)

        def call_method(self, target: Any, args: tuple, kwargs: dict) -> Any:
            return memoized(lambda: super(ValueProp, self).call_method(target, args, kwargs),
                            "method", target, args, kwargs)

        def call_module(self, target: Any, args: tuple, kwargs: dict) -> Any:
            return memoized(lambda: super(ValueProp, self).call_module(target, args, kwargs),
                            "module", target, args, kwargs, self.fetch_attr(target))

    with refs_without_dynamo():
        ValueProp(module).run(*arguments)
