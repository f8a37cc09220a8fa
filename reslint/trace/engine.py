"""Trace one file: import it, build its models on meta, capture a graph of each.

`trace_file` never raises for problems of the checked code: an import or build failure is an
RL902 finding at the user's line, a model no tracer could capture an RL903 (or RL902 when the
user's forward itself raised on inputs the user gave), a timeout an RL903; the static facts stand
for those models. Where reslint's own guess failed (a discovered model, inferred inputs, a missing
optional package, a time limit) the finding is `info`: reslint's limits never fail the gate. A
factory the user named that raises, or a discovered model whose defaults crash in the checked
file's own code (a bug in the model, not a wrong guess), is a `warning`.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from reslint.findings import Finding
from reslint.settings import Settings
from reslint.trace.loader import ImportFailed, TraceTimeout, loaded_module
from reslint.trace.time_limit import time_limit

SHARE_BACKBONES = True  # trace a backbone once for the heads built on it (shared_backbone)
DEFAULT_TIMEOUT = 60.0  # seconds per file (import, build and trace its models) when --timeout is not given
# A forward, or a class whose base looks like a module or a transformers model (`LlamaForCausalLM`, `BertModel`).
MODULE_HINT = re.compile(r"\bdef\s+forward\s*\(|^\s*class\s+\w+\s*\([^)]*(?:Module|(?<!Base)Model|For[A-Z]\w*)\b",
                         re.MULTILINE)


@dataclass
class TraceResult:
    captures: list = field(default_factory=list)  # list[Capture]
    findings: list[Finding] = field(default_factory=list)  # RL902 / RL903
    static_only: dict[str, str] = field(default_factory=dict)  # model name -> why it was not traced
    notes: list[str] = field(default_factory=list)
    imported: bool = False
    timed_out: bool = False  # a time limit cut something short: the result may differ next time
    lines: dict[str, int] = field(default_factory=dict)  # model name -> its line, for every model it tried
    import_failed: bool = False  # the file itself could not be imported: its models are unknown
    built_from: dict[str, str] = field(default_factory=dict)  # model name -> construction site ("train.py:42")
    reads: list[str] = field(default_factory=list)  # other files the models' arguments were read from
    depths: dict[str, int | None] = field(default_factory=dict)  # model name -> the depth a shrunk build stands for (None: inferred)

    def untraced(self, name: str, line: int, reason: str) -> None:
        """A model reslint tried and could not trace: static facts stand for it."""
        self.static_only[name] = reason
        self.lines[name] = line


def might_define_models(text: str) -> bool:
    """Cheap pre-filter: a file without a forward or a *Module base is never imported."""
    return MODULE_HINT.search(text) is not None


def seconds_left(deadline: float) -> float:
    return max(deadline - time.monotonic(), 0.001)


def seconds_text(seconds: float) -> str:
    return f"{seconds:g} s"


def factories_for(path: str, settings: Settings) -> list:
    from reslint.trace.models import factory_matches, split_factory

    return [factory for factory in settings.models
            if factory_matches(split_factory(factory.factory)[0], path, settings.root)]


def file_timeout(settings: Settings) -> float:
    return settings.timeout if settings.timeout is not None else DEFAULT_TIMEOUT


def needs_import(path: str, data: bytes | None, settings: Settings, source_path: str | None = None) -> bool:
    """Only a file with a model factory aimed at it, or one that may define models, is imported."""
    if factories_for(os.path.abspath(source_path or path), settings) or data is None:
        return True
    try:
        from reslint.file_gate import decode_source

        return might_define_models(decode_source(data))
    except (UnicodeDecodeError, SyntaxError, LookupError):
        return False


def trace_file(path: str, data: bytes | None, settings: Settings, source_path: str | None = None) -> TraceResult:
    """Trace the models of one file. `path` is the display path, `source_path` the file to import."""
    from reslint.isolation import report_stage

    result = TraceResult()
    real = os.path.abspath(source_path or path)
    timeout = file_timeout(settings)
    factories = factories_for(real, settings)
    if not needs_import(path, data, settings, source_path):
        return result
    result.imported = True
    report_stage("importing the file")
    try:
        # The checked code and torch's export print (graphs, warnings); the report owns stdout.
        deadline = time.monotonic() + timeout  # one budget for the whole file: import, builds, traces
        with silenced(), time_limit(timeout), loaded_module(real, settings.root) as module:
            signal_off()  # the import is done; each model gets its own limit
            trace_module(module, path, real, settings, factories, timeout, deadline, result)
    except ImportFailed as error:
        result.import_failed = True
        # Importing is reslint's own step unless the user named a factory in this file.
        severity = "" if factories else "info"
        message = f"{error.message}{missing_package_hint(error.message)}; static findings are still reported"
        result.findings.append(Finding("RL902", message, path, error.line, 1, engine="trace", severity=severity))
        result.notes.append("not imported: " + error.message)
    except TraceTimeout:
        result.timed_out = result.import_failed = True
        result.findings.append(Finding("RL902", f"importing the file timed out after {seconds_text(timeout)}; "
                                       "static findings are still reported", path, 1, 1, engine="trace",
                                       severity="info"))
        result.notes.append(f"import timed out after {seconds_text(timeout)}")
    return result


def missing_package_hint(message: str) -> str:
    """` (an optional package is not installed)` for an import that failed on a missing module."""
    return " (an optional package is not installed)" if re.search(r"\b(ModuleNotFoundError|ImportError)\b", message) else ""


class TextSink(io.StringIO):
    # A stream the checked code may ask its encoding (`sys.stdout.encoding.lower()` on import, as ai4ts does):
    # StringIO's is None.
    encoding = "utf-8"


@contextlib.contextmanager
def silenced() -> Iterator[None]:
    sink = TextSink()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        yield


def signal_off() -> None:
    if hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread():
        signal.setitimer(signal.ITIMER_REAL, 0)


def trace_module(module: Any, path: str, real: str, settings: Settings, factories: list,
                 timeout: float, deadline: float, result: TraceResult) -> None:
    from reslint.trace.models import (
        BuildFailed,
        build_model,
        discover_models,
        factory_spec,
        outermost,
        split_factory,
    )

    if factories:
        specs = [factory_spec(split_factory(factory.factory)[1], module, real, factory.inputs or settings.inputs)
                 for factory in factories]
        skipped: dict[str, str] = {}
    else:
        specs, skipped = discover_models(module, real, settings.root)
        for spec in specs:
            spec.inputs = settings.inputs
            if spec.site:
                result.built_from[spec.name] = spec.site
                if spec.depth or spec.depth_unknown:
                    result.depths[spec.name] = spec.depth or None
                result.reads.extend(read for read in spec.reads if read not in result.reads)
    result.static_only.update({name: reason for name, reason in skipped.items()})

    from reslint.isolation import report_stage

    built, failed = [], []
    for spec in specs:
        report_stage(f"building {spec.name}", spec.line, spec.name)
        try:
            with time_limit(seconds_left(deadline)):
                built.append(build_model(spec, real))
            if spec.site and not factories:  # a retried guess says what it was built from after the build
                result.built_from[spec.name] = spec.site
                if spec.depth or spec.depth_unknown:
                    result.depths[spec.name] = spec.depth or None
        except BuildFailed as error:
            failed.append((spec, error))
        except TraceTimeout:
            result.timed_out = True
            message = f"building {spec.name} timed out after {seconds_text(timeout)}; static facts were used"
            result.findings.append(Finding("RL903", message, path, spec.line, 1, symbol=spec.name, engine="trace"))
            result.untraced(spec.name, spec.line, f"timed out after {seconds_text(timeout)}")
    kept = outermost(built)
    from reslint.trace.shared_backbone import backbone_links
    inner = {type(sub) for item in built for name, sub in item.model.named_modules() if name}
    for spec, error in failed:
        if spec.origin in ("discovered", "site", "inferred") and spec.cls in inner:
            continue  # a part of a model that was built: it is checked through that model
        if spec.unbuildable:
            message = f"{error.message}; pass --model FILE:EXPR to build it yourself; static findings are still reported"
            severity = "info"
        elif spec.origin == "site":
            message = (f"{error.message} (reslint built it with the arguments at {spec.site}{missing_package_hint(error.message)}; "
                       "pass --model FILE:EXPR to build it yourself); static findings are still reported")
            severity = "info"
        elif spec.origin == "inferred":
            message = (f"{error.message} (reslint built it from {spec.site}{missing_package_hint(error.message)}; "
                       "pass --model FILE:EXPR to build it yourself); static findings are still reported")
            severity = "info"
        elif spec.origin == "factory":
            message, severity = f"{error.message}; static findings are still reported", ""
        elif error.crashed_here:
            message = (f"{error.message}: building it from its defaults crashes in this file's own code, "
                       "a bug unless those defaults are not meant to build; static findings are still reported")
            severity = ""
        else:
            message = (f"{error.message} (reslint built it from its defaults{missing_package_hint(error.message)}; "
                       "pass --model FILE:EXPR to build it yourself); static findings are still reported")
            severity = "info"
        result.findings.append(Finding("RL902", message, path, error.line, 1, symbol=spec.name, engine="trace",
                                       severity=severity))
        result.untraced(spec.name, spec.line, f"build failed ({error.message})")
    links = backbone_links(kept, built) if SHARE_BACKBONES else {}
    backbones: dict[int, Any] = {}  # id(backbone item) -> its Capture, or None when it cannot stand for heads
    for item in kept:
        link = links.get(id(item))
        if link is not None:
            attribute, backbone = link
            if id(backbone) not in backbones:
                backbones[id(backbone)] = trace_backbone(backbone, module, path, real, timeout, deadline)
            if backbones[id(backbone)] is not None and trace_with_backbone(
                    item, attribute, backbones[id(backbone)], module, path, real, timeout, deadline, result):
                continue
        trace_one(item, module, path, real, timeout, deadline, result)


def trace_backbone(backbone: Any, module: Any, path: str, real: str, timeout: float, deadline: float) -> Any:
    """The backbone's Capture when its facts can stand for its heads' (see shared_backbone), else None."""
    from reslint.trace.graph_facts import facts_from_capture
    from reslint.trace.shared_backbone import reusable

    scratch = TraceResult()
    trace_one(backbone, module, path, real, timeout, deadline, scratch)
    if not scratch.captures or scratch.captures[0].shape_error is not None:
        return None
    capture = scratch.captures[0]
    try:
        capture.facts = facts_from_capture(capture, path)
    except Exception:  # noqa: BLE001 - a graph we cannot read: the heads are traced in full
        return None
    return capture if reusable(capture.facts) else None


def trace_with_backbone(item: Any, attribute: str, backbone: Any, module: Any, path: str, real: str,
                        timeout: float, deadline: float, result: TraceResult) -> bool:
    """Trace a head with its backbone replayed; False (nothing recorded) when that capture fails."""
    from reslint.trace.shared_backbone import make_replay

    original = getattr(item.model, attribute)
    scratch = TraceResult()
    # A backbone captured on CPU (data-dependent code: its meta build cannot run) replays on that CPU build.
    replayed = backbone.model if type(backbone.model) is type(original) and not on_meta(backbone.model) else original
    setattr(item.model, attribute, make_replay(replayed))
    try:
        trace_one(item, module, path, real, timeout, deadline, scratch, cpu_fallback=False)
    finally:
        setattr(item.model, attribute, original)
    if not scratch.captures or scratch.captures[0].method != "export":
        return False
    capture = scratch.captures[0]
    capture.model = item.model
    capture.backbone = backbone
    capture.notes.append(f"the backbone {backbone.model_name} (self.{attribute}) was traced once for the heads "
                         "built on it; this graph holds the head's own layers")
    result.captures.append(capture)
    result.lines[item.spec.name] = item.spec.line
    return True


def on_meta(model: Any) -> bool:
    return any(parameter.device.type == "meta" for parameter in model.parameters())


def trace_one(item: Any, module: Any, path: str, real: str, timeout: float, deadline: float,
              result: TraceResult, cpu_fallback: bool = True) -> None:
    from reslint.trace.config_reduction import reduction_note
    from reslint.trace.inputs import candidate_inputs, from_text, infer_candidates
    from reslint.trace.models import evaluation_namespace, parameter_count

    spec, model = item.spec, item.model
    namespace = evaluation_namespace(module)

    def make_inputs(target: Any, device: str) -> list:
        if spec.inputs:
            return [from_text(spec.inputs, namespace, device)]
        return [candidate_inputs(candidate, device) for candidate in infer_candidates(target)]

    narrowing: dict = {}  # a model over the CPU limit: its narrower build (narrow_config), made once when needed

    def cpu_variant(index: int = 0):
        import torch

        build = spec.build
        if not small:
            if "build" not in narrowing:
                narrowing["build"] = narrow_builder(model, _max_cpu_parameters())
            if narrowing["build"] is None:
                raise RuntimeError("the model is too large to build on CPU")
            build = narrowing["build"][0]
        with torch.random.fork_rng():
            torch.manual_seed(0)
            target = build()
        target.eval()
        if not small:
            narrowing.setdefault("models", set()).add(id(target))
        return target, make_inputs(target, "cpu")[index]

    from reslint.isolation import report_stage
    from reslint.trace.narrow_config import narrow_builder, narrowable, narrowing_note

    report_stage(f"tracing {spec.name}", spec.line, spec.name)
    small = parameter_count(model) <= _max_cpu_parameters()
    reduced = reduction_note(spec.reduction)
    before = len(result.captures)
    capture_one(model, lambda: make_inputs(model, item.device), name=spec.name, line=spec.line, path=path, real=real,
                result=result, cpu_variant=cpu_variant if cpu_fallback and (small or narrowable(model)) else None,
                notes=[*item.notes, *filter(None, [reduced])], deadline=deadline, timeout=timeout,
                inferred=not spec.inputs)
    for capture in result.captures[before:]:
        capture.reduction = list(spec.reduction)
        if id(capture.model) in narrowing.get("models", ()):
            capture.notes.append(narrowing_note(narrowing["build"][1]))


def capture_one(model: Any, make_inputs: Callable[[], Any], *, name: str, line: int, path: str, real: str,
                result: TraceResult, cpu_variant: Callable[[], tuple] | None = None, notes: Sequence[str] = (),
                deadline: float | None = None, timeout: float | None = None, static_fallback: bool = True,
                inputs_hint: str = "--inputs", inferred: bool = True) -> None:
    """Capture one built model into `result.captures`, or record why it could not be: an RL902 at the
    user's line when their forward raised on inputs they gave, else an RL903 (info) at the class (`line`),
    or at the user's line when their forward raised on inputs reslint inferred.

    `path` is the display path, `real` the file whose frames count as the user's. With `deadline`
    (a `time.monotonic()` value; main thread only) making the inputs and capturing are limited to it.
    `make_inputs` gives one `Inputs` or a list of candidates, tried in turn until one traces (a failure
    reports the first); `cpu_variant(index)` rebuilds the model on CPU with candidate `index`'s inputs.
    `static_fallback`: the messages say that the static engine's facts stand for the model (a file's
    check); `inputs_hint` is how the messages tell the user to pass inputs; `inferred`: reslint
    guessed the inputs, so a failure is its own limit, never the model's bug.
    """
    from reslint.trace.capture import failure_location
    from reslint.trace.fast_capture import capture_fast_first
    from reslint.trace.inputs import InputError

    used = "; static facts were used" if static_fallback else ""
    still = "; static findings are still reported" if static_fallback else ""
    inputs = None

    def untraced(code: str, message: str, at: int, reason: str) -> None:
        result.findings.append(Finding(code, message, path, at, 1, symbol=name, engine="trace",
                                       severity="info" if code == "RL903" else ""))
        result.untraced(name, line, reason)

    try:
        with time_limit(seconds_left(deadline) if deadline is not None else None), unchanged_to_is_noop():
            made = make_inputs()
            candidates = made if isinstance(made, list) else [made]
            inputs, capture, failures = candidates[0], None, []
            for index, candidate in enumerate(candidates):
                variant = (lambda index=index: cpu_variant(index)) if cpu_variant is not None else None
                found, tried = capture_fast_first(model, candidate, name=name, line=line, path=real, cpu_variant=variant)
                failures = failures or tried
                if found is not None and (capture is None or capture.shape_error is not None):
                    capture = found
                # A shape error on guessed inputs may be the guess's: another candidate may run cleanly.
                if capture is not None and capture.shape_error is None:
                    break
    except InputError as error:
        untraced("RL903", f"cannot trace {name}: {error}{used}", line, str(error))
        return
    except TraceTimeout:
        result.timed_out = True
        shown = seconds_text(timeout) if timeout is not None else "its limit"
        untraced("RL903", f"tracing {name} timed out after {shown}{used}", line, f"timed out after {shown}")
        return
    if capture is not None and capture.shape_error is not None and not inferred:
        # The user's own inputs do not run through their model: a usage problem to fix, not a fact to trust.
        node, reason = capture.shape_error
        where_line, _ = failure_location(failures, real)
        message = (f"the forward of {name} raised {reason} at {node} on the inputs given "
                   f"({capture.inputs}); fix {inputs_hint}{still}")
        untraced("RL902", message, where_line or line, f"the forward raised {reason} on the given inputs")
        return
    if capture is not None:
        capture.notes[:0] = list(notes)
        capture.notes.append(f"inputs: {capture.inputs}")
        result.captures.append(capture)
        result.lines[name] = line
        return
    first = failures[0]
    where_line, raised_here = failure_location(failures, real)
    given = f"; reslint inferred the inputs {inputs.description}" if inferred and inputs is not None else ""
    hint = f"; pass {inputs_hint}" if inferred else ""
    if raised_here and where_line is not None:
        code = "RL903" if inferred else "RL902"
        message = f"the forward of {name} raised {first.reason}{given}{hint}{still}"
        untraced(code, message, where_line, f"the forward raised {first.reason}")
        return
    tried = ", ".join(dict.fromkeys(failure.method for failure in failures))
    where = f" at {os.path.basename(real)}:{where_line}" if where_line is not None else ""
    message = f"tracing {name} failed ({tried}){where}: {first.reason}{given}{hint}{used}"
    untraced("RL903", message, line, f"tracing failed: {first.reason}")


@contextlib.contextmanager
def unchanged_to_is_noop() -> Iterator[None]:
    """`module.to(dtype)` inside a forward (Switch Transformers' router casts its classifier each call) swaps
    every parameter under export, which fake parameters refuse; where nothing changes it is a no-op anyway."""
    import torch

    original = torch.nn.Module.to

    def to(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            device, dtype, _, memory_format = torch._C._nn._parse_to(*args, **kwargs)
        except Exception:  # noqa: BLE001 - let the real method report bad arguments
            return original(self, *args, **kwargs)
        tensors = [*self.parameters(), *self.buffers()]
        unchanged = memory_format is None and all(
            (device is None or tensor.device == device)
            and (dtype is None or not (tensor.is_floating_point() or tensor.is_complex()) or tensor.dtype == dtype)
            for tensor in tensors)
        return self if unchanged else original(self, *args, **kwargs)

    torch.nn.Module.to = to
    try:
        yield
    finally:
        torch.nn.Module.to = original


def _max_cpu_parameters() -> int:
    from reslint.trace.capture import DRAFT_EXPORT_MAX_PARAMETERS

    return DRAFT_EXPORT_MAX_PARAMETERS
