"""Weight initialisation skipped for tensors on the meta device while a model is built there.

A meta tensor has no values, so filling it changes nothing the trace engine reads; but torch runs
`normal_` (nn.Embedding's and most transformers models' init) on meta through a Python reference
implementation that imports torch._dynamo: 1.6 CPU-s, as much as `import torch`, for a check whose
capture never needs dynamo (fast_capture).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


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

    with SkipMetaInit():
        yield
