"""Capture one FX graph of a built model, with shapes, on meta/fake tensors.

Order (measured on torch 2.13 / transformers 5.24):

0. (before this module, `fast_capture.capture_fast_first`: torch.fx symbolic tracing on meta, kept only where its graph reads as export's would)
1. `torch.export.export(model, args, kwargs, strict=False)` - never decomposed, so
   `aten.layer_norm`/`rms_norm`/`linear` stay visible, with `stack_trace` and `nn_module_stack`.
1b. When the meta device itself cannot run the forward (autocast on `meta`): export again on the
   model rebuilt on CPU, when it is small enough.
2. On data-dependent control flow: `torch.export.draft_export`, which needs real values, so the
   model is rebuilt on CPU when it is small enough. The graph follows the branch the example
   input took; the note names the guard's `file:line`.
3. `torch.fx.Tracer` (record_stack_traces=True) plus shape propagation on meta tensors
   (`meta['val']`, `meta['tensor_meta']`). torch.nn layers stay leaves there.
4. When fx cannot take the forward either (a branch on a traced value) and the model is small
   enough to rebuild on CPU: fx with concrete values (`concrete_fx`), which runs the model while
   it records, so every branch follows the example input. torch.nn layers stay leaves there too.
   A model too large for that runs as built, on meta, with its inputs on CPU: a branch on what the
   inputs alone compute (`padding_mask.any()`) follows the example input.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Callable

from reslint.trace.inputs import Inputs
from reslint.trace.loader import (
    TraceTimeout,
    exception_chain,
    locate,
    one_line,
    same_file,
)

DRAFT_EXPORT_MAX_PARAMETERS = 50_000_000  # rebuilding on CPU for draft_export: at most ~200 MB of weights
exported = False  # whether this process ran torch.export (the parent of the next traces warms it up then)
# draft_export runs every op on fake and real values and can take minutes (ViLT's patch selection, a chain of
# `nonzero`/`multinomial` and per-row loops: 433 s); past this share of the time left, fx with concrete values
# (step 4) follows the example input's branches the same way in seconds.
DRAFT_SHARE = 0.5


class DraftTimeout(Exception):
    def __str__(self) -> str:
        return f"draft_export ran past its share ({DRAFT_SHARE:g}) of the time left"


@dataclass
class Capture:
    graph_module: Any  # torch.fx.GraphModule
    method: str  # "export" | "draft_export" | "fx" | "concrete_fx"
    model: Any  # the nn.Module that was traced
    model_name: str
    class_line: int
    notes: list[str] = field(default_factory=list)
    exported: Any = None  # the ExportedProgram for export/draft_export
    inputs: str = ""  # description of the example inputs
    shape_error: tuple[str, str] | None = None  # (node name, one-line message) where fx shape propagation raised
    reduction: list = field(default_factory=list)  # (config field, before, after): the config was shrunk to trace
    backbone: Any = None  # the Capture of the backbone this head was traced with replayed (shared_backbone)
    facts: Any = None  # this capture's FileFacts, once computed (a backbone's, shared by its heads)


@dataclass
class Failure:
    method: str
    error: BaseException
    reason: str  # one line

    @property
    def data_dependent(self) -> bool:
        for link in exception_chain(self.error):
            name = type(link).__name__
            if "DataDependent" in name or "data-dependent" in str(link) or "data dependent" in str(link):
                return True
        return False


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """torch's export logs warnings and reports to stderr; a linter's output is not the place."""
    # torch.__trace: TORCH_TRACE's structured log, which pytest's log capture shows under a failing test.
    loggers = [logging.getLogger(name) for name in ("torch", "torch.export", "torch._export", "torch.fx",
                                                     "torch.fx.experimental.symbolic_shapes", "torch._dynamo",
                                                     "torch.__trace")]
    levels = [logger.level for logger in loggers]
    try:
        for logger in loggers:
            logger.setLevel(logging.CRITICAL)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def export_capture(model: Any, inputs: Inputs) -> Any:
    import torch

    from reslint.trace.concrete_fx import unvalidated_distributions

    with unvalidated_distributions():
        return torch.export.export(model, tuple(inputs.args), dict(inputs.kwargs), strict=False)


def draft_capture(model: Any, inputs: Inputs, path: str, fallback: str = "") -> tuple[Any, list[str]]:
    """draft_export; `fallback` is the guard's `file:line` from export's own failure."""
    import torch

    from reslint.trace.concrete_fx import unvalidated_distributions

    with unvalidated_distributions():
        program = torch.export.draft_export(model, tuple(inputs.args), dict(inputs.kwargs), strict=False)
    notes = []
    report = getattr(program, "_report", None)
    for failure in getattr(report, "failures", ()) or ():
        where = guard_location(failure, report, path) or fallback
        notes.append("draft_export: the graph follows the branch the example input took at data-dependent "
                     f"control flow{' (' + where + ')' if where else ''}")
    if not notes:
        notes.append("draft_export: the graph follows the branch the example input took"
                     + (f" at data-dependent control flow ({fallback})" if fallback else ""))
    return program, list(dict.fromkeys(notes))


def guard_location(failure: Any, report: Any, path: str) -> str:
    """`file:line` of the guard in the user's code, from a draft_export failure report."""
    data = getattr(failure, "data", None)
    stack = data.get("user_stack") if isinstance(data, dict) else None
    if not stack:
        return ""
    names = getattr(report, "str_to_filename", None) or {}
    by_index = {value: key for key, value in names.items()} if names and isinstance(next(iter(names)), str) else names
    located = []
    for frame in stack:
        filename = frame.get("filename") if isinstance(frame, dict) else None
        if isinstance(filename, int):
            filename = by_index.get(filename)
        if isinstance(filename, str):
            located.append((filename, frame.get("line")))
    for filename, line in reversed(located):
        if same_file(filename, path):
            return f"{os.path.basename(filename)}:{line}"
    for filename, line in reversed(located):
        if "site-packages" not in filename and "/torch/" not in filename:
            return f"{os.path.basename(filename)}:{line}"
    return ""


def positional(model: Any, inputs: Inputs) -> list:
    """The forward's arguments in order, keywords folded in, defaults filled."""
    try:
        signature = inspect.signature(model.forward)
    except (TypeError, ValueError):
        return list(inputs.args)
    bound = signature.bind(*inputs.args, **inputs.kwargs)  # TypeError (a missing input): fx fails too
    bound.apply_defaults()
    values = []
    for name, parameter in bound.signature.parameters.items():
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL,):
            values.extend(bound.arguments.get(name, ()))
        elif parameter.kind is not inspect.Parameter.VAR_KEYWORD:
            values.append(bound.arguments.get(name))
    return values


def fx_capture(model: Any, inputs: Inputs) -> tuple[Any, tuple[str, str] | None]:
    """Symbolic trace + shape propagation; returns (graph module, (node, error) where propagation raised)."""
    import torch
    import torch.fx
    from torch.fx.passes.shape_prop import ShapeProp

    tracer = torch.fx.Tracer()
    tracer.record_stack_traces = True
    # Every parameter a Proxy, the optional ones too: this runs where export failed, and a forward whose optional
    # argument is needed after all (`torch.cat([x, temb])` with `temb=None`) is traced as given it.
    graph = tracer.trace(model)
    module = torch.fx.GraphModule(tracer.root, graph, type(model).__name__)

    class ValueProp(ShapeProp):
        def run_node(self, node: Any) -> Any:
            self.current = node
            result = super().run_node(node)
            node.meta["val"] = result
            return result

    arguments = positional(model, inputs)
    propagator = ValueProp(module)
    propagator.current = None
    try:
        propagator.propagate(*arguments)
    except (TraceTimeout, KeyboardInterrupt):
        raise
    except Exception as error:  # noqa: BLE001 - a shape error at an add is a finding (RL001), not a crash
        node = getattr(propagator, "current", None)
        return module, (node.name if node is not None else "", one_line(root_cause(error)))
    return module, None


def root_cause(error: BaseException) -> BaseException:
    """ShapeProp wraps the op's error in RuntimeError('ShapeProp error for: ...'); unwrap it."""
    chain = exception_chain(error)
    return chain[-1] if len(chain) > 1 else error


def capture_model(
    model: Any,
    inputs: Inputs,
    *,
    name: str,
    line: int,
    path: str,
    cpu_variant: Callable[[], tuple[Any, Inputs]] | None = None,
) -> tuple[Capture | None, list[Failure]]:
    """Try export, draft_export (data-dependent control flow only), then fx (the fast path before these is
    fast_capture.capture_fast_first). Never raises but TraceTimeout."""
    failures: list[Failure] = []

    def attempt(method: str, run: Callable[[], Capture]) -> Capture | None:
        try:
            with quiet():
                return run()
        except (TraceTimeout, KeyboardInterrupt):
            raise
        except BaseException as error:  # noqa: BLE001 - user code and tracer internals
            failures.append(Failure(method, error, one_line(error)))
            return None

    def via_export() -> Capture:
        program = export_capture(model, inputs)
        return Capture(program.graph_module, "export", model, name, line, [], program, inputs.description)

    global exported
    exported = True
    result = attempt("export", via_export)
    if result is None and cpu_variant is not None and on_meta(model, inputs) and meta_limited(failures[-1].error):
        def via_cpu_export() -> Capture:
            target, example = cpu_variant()
            program = export_capture(target, example)
            return Capture(program.graph_module, "export", target, name, line,
                           ["export on CPU: the meta device cannot run this forward"], program, example.description)

        result = attempt("export_cpu", via_cpu_export)
    if result is not None:
        return result, failures

    if failures[-1].data_dependent:
        def via_draft() -> Capture:
            target, example = model, inputs
            if on_meta(model, inputs):
                if cpu_variant is None:
                    raise RuntimeError("draft_export needs real values and the model is too large to build on CPU")
                target, example = cpu_variant()
            where = locate(failures[0].error, path)
            fallback = f"{os.path.basename(path)}:{where.line}" if where else ""
            program, notes = draft_capture(target, example, path, fallback)
            return Capture(program.graph_module, "draft_export", target, name, line, notes, program,
                           example.description)

        result = attempt("draft_export", lambda: within_share(via_draft))
        if result is not None:
            return result, failures

    def via_fx() -> Capture:
        module, shape_error = fx_capture(model, inputs)
        notes = ["fx: torch.nn layers are leaves, so residuals inside them are not seen"]
        if shape_error is not None:
            notes.append(f"shape propagation failed at {shape_error[0]}: {shape_error[1]}")
        capture = Capture(module, "fx", model, name, line, notes, None, inputs.description, shape_error)
        return capture

    result = attempt("fx", via_fx)
    # fx that stopped inside the forward (a branch on a traced value), not on inputs that do not bind; fx
    # refusing the forward itself too (see fx_refused). A model too large to rebuild on CPU is traced as built,
    # on meta, with the inputs on CPU: what the inputs alone compute is concrete (concrete_fx).
    stopped = result is None and (locate(failures[-1].error, path) is not None or fx_refused(failures[-1].error))
    if stopped and (cpu_variant is not None or (on_meta(model, inputs) and inputs.on("cpu") is not None)):
        where = locate(failures[0].error, path)
        guard = f"{os.path.basename(path)}:{where.line}" if where else ""
        build = cpu_variant or (lambda: (model, inputs.on("cpu")))
        result = attempt("concrete_fx", lambda: concrete_capture(build, name, line, guard,
                                                                 weights_on_meta=cpu_variant is None))
    if result is not None:
        first = failures[0]
        result.notes.insert(0, f"export failed: {first.reason}")
        return result, failures
    return None, failures


def fx_refused(error: BaseException) -> bool:
    """Whether fx itself gave up on the forward: a Proxy iterated or branched on outside the file (a
    transformers decorator unpacking `**kwargs`), a decorator writing into the `**kwargs` fx made a Proxy
    of ("'Proxy' object does not support item assignment": transformers' `merge_with_config_defaults`), or
    a decorated forward's `*args, **kwargs` signature its argument patching cannot rewrite ("co_varnames is
    too small": Switch Transformers); concrete_fx calls such a forward by keyword."""
    if type(error).__name__ == "TraceError" or "'Proxy' object" in str(error):
        return True
    frame, last = error.__traceback__, ""
    while frame is not None:
        last, frame = frame.tb_frame.f_code.co_filename, frame.tb_next
    return f"{os.sep}torch{os.sep}fx{os.sep}" in last


def within_share(run: Callable[[], Capture]) -> Capture:
    """`run()` limited to DRAFT_SHARE of the time left (DraftTimeout); no limit where none is set."""
    import signal

    from reslint.trace.time_limit import time_limit

    left = signal.getitimer(signal.ITIMER_REAL)[0] if hasattr(signal, "getitimer") else 0.0
    with time_limit(left * DRAFT_SHARE if left else None, DraftTimeout):
        return run()


def concrete_capture(cpu_variant: Callable[[], tuple[Any, Inputs]], name: str, line: int, guard: str,
                     weights_on_meta: bool = False) -> Capture:
    """fx with concrete values on the model rebuilt on CPU: the branches follow the example input. `weights_on_meta`:
    the model stays on meta, only what the inputs alone compute is concrete (concrete_fx)."""
    from reslint.trace.concrete_fx import concrete_trace

    target, example = cpu_variant()
    signature = inspect.signature(target.forward)
    bound = signature.bind(*example.args, **example.kwargs)
    bound.apply_defaults()  # a parameter left to its default is a constant too (`if mask is not None`)
    arguments = {name: value for name, value in bound.arguments.items()
                 if signature.parameters[name].kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)}
    module = concrete_trace(target, arguments)
    notes = ["concrete_fx: torch.nn layers are leaves, and the graph follows the branch the example input took "
             "at data-dependent control flow" + (f" ({guard})" if guard else "")
             + ("; the weights stayed on meta, the values computed from the inputs alone were concrete"
                if weights_on_meta else "")]
    return Capture(module, "concrete_fx", target, name, line, notes, None, example.description)


def on_meta(model: Any, inputs: Inputs) -> bool:
    return next((p for p in model.parameters() if p.device.type == "meta"), None) is not None or any(
        getattr(value, "device", None) is not None and value.device.type == "meta"
        for value in (*inputs.args, *inputs.kwargs.values()))


META_LIMITS = ("unsupported scalarType", "meta tensor", "on meta", "'meta'", "device type meta")


def meta_limited(error: BaseException) -> bool:
    """Whether the meta device itself stopped export (autocast on `meta`, a value read off a meta tensor)."""
    return any(limit in str(link) for link in exception_chain(error) for limit in META_LIMITS)


def failure_location(failures: list[Failure], path: str) -> tuple[int | None, bool]:
    """(user line, whether the user's code raised it itself) of the first failure."""
    for failure in failures:
        where = locate(failure.error, path)
        if where is not None:
            return where.line, where.raised_here
    return None, False
