"""An fx graph traced with concrete values: for a forward whose control flow depends on its data.

`torch.export` and `draft_export` give up on some data-dependent guards (a padding mask built from
`lengths.max()`, a branch on `xs.size(1)` against a value computed from the lengths), and plain
`torch.fx` cannot take a branch on a traced value at all. This tracer runs the model for real (CPU
tensors, a small model) while it records the graph: each node carries the value it computed
(`meta["val"]`, what the graph reader takes shapes from), so a branch, `int()`, `len()` or a loop
over a traced value follows the example input, as draft_export's graph does. Inputs that are not
floating-point tensors (lengths, masks, further ids, flags) are fed as constants, except the first input
(token ids): what the model computes from them (a padding mask) enters the graph as a constant. torch.nn
layers stay leaves, as in fx.

A model too large to rebuild on CPU is traced as built, on meta, with the inputs on CPU: what is computed
from the inputs alone (`padding_mask = tokens.eq(pad)`) keeps its real value, so a guard on its truth
(`if not padding_mask.any()`, `.all()`, `bool(t)`) follows the example input; an op that meets a weight,
or a value computed from one, runs on meta, and a guard on such a value still fails.
"""

from __future__ import annotations

import contextlib
import inspect
import operator
import re
from collections.abc import Iterator
from typing import Any

CONCRETE_ATTRIBUTES = frozenset({"dtype", "device", "ndim", "shape", "layout", "is_cuda", "is_meta", "requires_grad"})


def concrete_trace(model: Any, arguments: dict[str, Any]) -> Any:
    """The fx GraphModule of `model(**arguments)`, every node's `meta["val"]` its concrete value."""
    import torch
    import torch.fx
    from torch.fx._symbolic_trace import _maybe_revert_all_patches
    from torch.fx.node import map_aggregate

    values: dict[Any, Any] = {}  # node -> the value it computed
    tensors = [name for name, value in arguments.items() if isinstance(value, torch.Tensor)]
    # the data flows from the first input (token ids too) and the features; lengths and masks stay constants,
    # so `isinstance(ilens, torch.Tensor)` and what is computed from them hold as in eager code
    traced = {name: arguments[name] for name in tensors if name == tensors[0] or arguments[name].is_floating_point()}
    parameters = inspect.signature(model.forward).parameters
    constants = {name: value for name, value in arguments.items() if name not in traced and name in parameters}

    def concrete(value: Any) -> Any:
        return map_aggregate(value, lambda item: values[item.node] if isinstance(item, torch.fx.Proxy) else item)

    class ConcreteProxy(torch.fx.Proxy):
        def __getattr__(self, name: str) -> Any:
            node = self.__dict__.get("node")
            if name in CONCRETE_ATTRIBUTES and isinstance(values.get(node), torch.Tensor):
                return getattr(values[node], name)  # `torch.finfo(x.dtype)`, `x.device`: plain values
            return super().__getattr__(name)

        def __len__(self) -> int:
            return len(values[self.node])

        def __int__(self) -> int:
            return int(values[self.node])

        def __index__(self) -> int:
            return int(values[self.node])

        def __float__(self) -> float:
            return float(values[self.node])

        def size(self, dim: int | None = None) -> Any:  # as `.shape`: a plain torch.Size (torch.distributions checks it)
            value = values[self.node]
            return value.size() if dim is None else value.size(dim)

        def __format__(self, spec: str) -> str:  # `self[f"expert_{index[0]}"]`: the submodule the value names
            return format(values[self.node], spec)

        def __setitem__(self, key: Any, value: Any) -> None:  # `scores[mask] = 0`: in place, as it runs
            self.tracer.create_proxy("call_function", operator.setitem, (self, key, value), {})

    class ConcreteTracer(torch.fx.Tracer):
        def proxy(self, node: Any) -> Any:
            return ConcreteProxy(node, self)

        def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None, proxy_factory_fn=None):
            proxy = super().create_proxy(kind, target, args, kwargs, name, type_expr, proxy_factory_fn)
            if kind == "placeholder":  # a constant input keeps one too (`mask_1`), which fx asserts on
                value = traced[target] if target in traced else constants.get(re.sub(r"_\d+$", "", target))
            elif kind == "get_attr":
                with _maybe_revert_all_patches():  # the module's own attribute, not the tracer's proxy of it
                    value = operator.attrgetter(target)(self.root)
            else:
                call_args, call_kwargs = concrete(tuple(args)), concrete(dict(kwargs))
                with _maybe_revert_all_patches():  # run the op itself, not the tracer's patched module calls
                    value = evaluate(self.root, kind, target, call_args, call_kwargs)
            values[proxy.node] = value
            proxy.node.meta["val"] = value
            return proxy

        def call_module(self, module: Any, forward: Any, args: Any, kwargs: Any) -> Any:
            try:
                self.path_of_module(module)
            except NameError:  # a layer made inside the forward (`nn.Softmax(dim=-1)(scores)`): its ops are traced
                return forward(*args, **kwargs)
            return super().call_module(module, forward, args, kwargs)

        def create_arg(self, value: Any) -> Any:
            try:
                return super().create_arg(value)
            except NotImplementedError:  # an object fx cannot hold (a key-value cache among the outputs): no op reads it
                return None

        def to_bool(self, obj: Any) -> bool:
            return bool(values[obj.node])

        def iter(self, obj: Any) -> Any:
            return iter([obj[index] for index in range(len(values[obj.node]))])

        def keys(self, obj: Any) -> Any:
            return values[obj.node].keys()

    from torch.nn.utils import rnn

    # packing checks its arguments' types: it runs whole, on the concrete values, as one node
    tracer = ConcreteTracer(autowrap_functions=(rnn.pack_padded_sequence, rnn.pad_packed_sequence, rnn.pack_sequence))
    tracer.record_stack_traces = True
    tracer.proxy_buffer_attributes = True
    with torch.no_grad(), unvalidated_distributions(), by_keyword(model, list(traced), constants) as explicit:
        graph = tracer.trace(model, concrete_args=None if explicit else constants or None)
    for node in graph.nodes:
        # else the generated code registers the wrapped functions with torch.fx.wrap for every later fx trace
        node.meta.pop("is_wrapped", None)
    return torch.fx.GraphModule(tracer.root, graph, type(model).__name__)


@contextlib.contextmanager
def unvalidated_distributions() -> Iterator[None]:
    """torch.distributions checks that its arguments are tensors (a probabilistic forecaster's output
    distribution, Autoformer's), which a proxy is not, and that their values are in its support, a
    data-dependent test export stops at and draft_export answers from whatever the process ran before (the
    first torch.compile turns it off for good); the values are the example input's anyway."""
    from torch.distributions import Distribution

    before = Distribution._validate_args
    Distribution.set_default_validate_args(False)
    try:
        yield
    finally:
        Distribution.set_default_validate_args(before)


@contextlib.contextmanager
def by_keyword(model: Any, names: list[str], constants: dict) -> Iterator[bool]:
    """A forward wrapped by a decorator that takes `*args, **kwargs` (transformers' `can_return_tuple`) gets
    fx's inputs by position, and the tensor itself as `*args`: for the trace the model's class has a forward
    with one parameter per traced input, which calls the decorated one by keyword. True when swapped."""
    forward = type(model).forward
    # a container among the constants (ESM-2's `repr_layers=[]`) too: fx flattens such concrete_args with a
    # pytree spec and generates code that does not compile
    containers = any(isinstance(value, (list, tuple, dict)) for value in constants.values())
    if (inspect.unwrap(forward) is forward and not containers) or not all(name.isidentifier() for name in names):
        yield False
        return
    namespace = {"decorated": forward, "constants": constants}
    listed = ", ".join(names)
    passed = "".join(f"{name}={name}, " for name in names)
    exec(f"def forward(self, {listed}):\n    return decorated(self, {passed}**constants)\n", namespace)
    original = model.__class__
    model.__class__ = type(original.__name__, (original,), {"forward": namespace["forward"],
                                                            "__module__": original.__module__})
    try:
        yield True
    finally:
        model.__class__ = original


def evaluate(root: Any, kind: str, target: Any, args: tuple, kwargs: dict) -> Any:
    module = root.get_submodule(target) if kind == "call_module" else None
    if on_meta(args, kwargs, module):  # a model kept on meta: what its weights touch runs on meta too
        args, kwargs = to_meta(args), to_meta(kwargs)
    if kind == "call_function":
        return target(*args, **kwargs)
    if kind == "call_method":
        return getattr(args[0], target)(*args[1:], **kwargs)
    return module(*args, **kwargs)  # call_module


def on_meta(args: tuple, kwargs: dict, module: Any) -> bool:
    import torch
    from torch.utils._pytree import tree_leaves

    if module is not None and any(tensor.is_meta for tensor in (*module.parameters(), *module.buffers())):
        return True
    return any(isinstance(leaf, torch.Tensor) and leaf.is_meta for leaf in tree_leaves((args, kwargs)))


def to_meta(value: Any) -> Any:
    """CPU tensors moved to meta: values computed from the inputs alone meet the weights' there."""
    import torch
    from torch.utils._pytree import tree_map

    return tree_map(lambda leaf: leaf.to("meta") if isinstance(leaf, torch.Tensor) and not leaf.is_meta else leaf, value)
