"""Eager execution, for when capture fails at a residual add: run the model once and find the add that
raised on mismatched shapes."""

from __future__ import annotations

from reslint.facts import ResidualAdd, Span
from reslint.trace.attribution import resolve
from reslint.trace.fx_graph import format_shape
from reslint.trace.source_index import source_index


def failing_add(model, args=(), kwargs=None, path: str = "") -> ResidualAdd | None:
    """Run `model` once (meta/fake inputs) and describe the add that raised on mismatched shapes.

    For when capture fails at a residual add: shape propagation raised, so there is no graph. Returns
    a ResidualAdd with `width_mismatch` naming both shapes (`(2, 16, 16) + (2, 16, 17)`) at the
    add's line in `path`, or None when the forward fails elsewhere or not at all.
    """
    import sys

    import torch
    from torch.overrides import TorchFunctionMode

    real = resolve(path)
    add_functions = {torch.Tensor.__add__, torch.Tensor.__radd__, torch.Tensor.__iadd__, torch.Tensor.add,
                     torch.Tensor.add_, torch.add}
    found: dict = {}

    class _Watch(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            try:
                return func(*args, **kwargs)
            except RuntimeError:
                if func in add_functions and not found and len(args) >= 2 \
                        and all(isinstance(a, torch.Tensor) for a in args[:2]):
                    frame = sys._getframe(1)
                    while frame is not None and resolve(frame.f_code.co_filename) != real:
                        frame = frame.f_back
                    owner = frame.f_locals.get("self") if frame is not None else None
                    found.update(shapes=(tuple(args[0].shape), tuple(args[1].shape)),
                                 line=frame.f_lineno if frame is not None else None,
                                 block=type(owner).__name__ if owner is not None else "")
                raise

    try:
        with _Watch():
            model(*args, **(kwargs or {}))
    except Exception:  # noqa: BLE001 - the model's own failure is what we look for
        pass
    if not found or found["line"] is None:
        return None
    first, second = found["shapes"]
    index = source_index(real)
    line = found["line"]
    column = index.column(line, "add") if index else 1
    written = index.add_terms(line) if index else None
    skip, branch = written if written and all(written) else ("x", "sublayer(x)")
    text = f"{format_shape(first)} + {format_shape(second)}"
    return ResidualAdd(
        span=Span(path, line, column), block=found["block"] or "model", placement="none", skip=skip,
        branch=branch, width_mismatch=f"`{skip} + {branch}` adds shapes {text}, which do not broadcast",
        skip_shape=first, branch_shape=second)
