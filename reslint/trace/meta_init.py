"""Building and running models on the meta device without importing torch._dynamo.

A meta tensor has no values, so filling it changes nothing the trace engine reads; but torch runs
`normal_` (nn.Embedding's and most transformers models' init) on meta through a Python reference
implementation that imports torch._dynamo: 1.6 CPU-s, as much as `import torch`, for a check whose
capture never needs dynamo (fast_capture). Those fills are skipped (`skipped_meta_init`).

Every elementwise op on meta (`x + y`, a LayerNorm's `ones_`) runs through such a reference too: torch
wraps each in `torch._disable_dynamo`, which imports dynamo on the wrapper's first call only to build the
wrapper that keeps dynamo from compiling it, and caches that on the reference. Nothing is compiled while
a model is built or its fx graph is run on meta, so `refs_without_dynamo` caches the reference itself
there (as if already wrapped) and takes it back after: export, which does need dynamo, then wraps them
as always. A reference missed here only imports dynamo, as before.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

CACHED_WRAPPER = "__dynamo_disable"  # where torch._compile._disable_dynamo's wrapper keeps what it made
_references: list | None = None


@contextlib.contextmanager
def refs_without_dynamo() -> Iterator[None]:
    """Run torch's Python references on meta without importing torch._dynamo (see the module's doc)."""
    if "torch._dynamo" in sys.modules:  # imported anyway: its wrappers cost nothing more
        yield
        return
    marked = []
    for function in disabled_references():
        if CACHED_WRAPPER not in function.__dict__:
            function.__dict__[CACHED_WRAPPER] = function
            marked.append(function)
    try:
        yield
    finally:
        for function in marked:
            if function.__dict__.get(CACHED_WRAPPER) is function:
                del function.__dict__[CACHED_WRAPPER]


def disabled_references() -> list:
    """The functions torch's decompositions and references wrap in `torch._disable_dynamo` (found once)."""
    global _references
    if _references is None:
        try:
            _references = find_disabled_references()
        except Exception:  # noqa: BLE001 - another torch: dynamo is imported when needed, as before
            _references = []
    return _references


def find_disabled_references() -> list:
    import functools
    import types

    import torch._compile
    import torch._decomp

    wrapper_code = torch._compile._disable_dynamo(lambda: None).__code__
    found: dict[int, types.FunctionType] = {}
    seen: set[int] = set()
    pending = [value for table in torch._decomp.global_decomposition_table.values() for value in table.values()]
    pending += [value for name, module in list(sys.modules.items()) if module is not None
                and name.startswith(("torch._refs", "torch._prims", "torch._decomp")) for value in list(vars(module).values())]
    while pending:
        value = pending.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, functools.partial):
            pending.append(value.func)
        if type(value) is not types.FunctionType:
            continue
        if value.__code__ is wrapper_code:
            cells = dict(zip(value.__code__.co_freevars, value.__closure__ or ()))
            if "fn" in cells and type(cells["fn"].cell_contents) is types.FunctionType:
                found[id(cells["fn"].cell_contents)] = cells["fn"].cell_contents
        for cell in value.__closure__ or ():
            try:
                pending.append(cell.cell_contents)
            except ValueError:  # an empty cell
                continue
        if getattr(value, "__wrapped__", None) is not None:
            pending.append(value.__wrapped__)
    return list(found.values())


@contextlib.contextmanager
def skipped_meta_init() -> Iterator[None]:
    import torch
    from torch.overrides import TorchFunctionMode

    # Only the fillers that validate nothing a build could fail on (xavier_/kaiming_ check the fan).
    fillers = {torch.nn.init.normal_, torch.nn.init.trunc_normal_, torch.Tensor.normal_}

    class SkipMetaInit(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            target = args[0] if args else (kwargs or {}).get("tensor")  # nn.init passes it by keyword
            if func in fillers and isinstance(target, torch.Tensor) and target.is_meta:
                return target
            return func(*args, **(kwargs or {}))

    with SkipMetaInit(), refs_without_dynamo():
        yield
