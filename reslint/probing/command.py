"""`reslint probe FILE --model EXPR`: build the model, feed it, measure, report; the CLI's side of the probe.

The model and inputs are named as for `reslint check`: `--model EXPR` (evaluated in FILE's
namespace with `torch` and `nn` available) or `--model FILE_OR_MODULE:EXPR`; without `--model`,
the file's `[[tool.reslint.models]]` factory, else the one outermost model `check` would discover.
`--inputs` takes the same shape specs and expressions, and is inferred the same way when absent.
An expression is evaluated again for every step, under the probe's seed.

The model runs in a forked child (reslint/isolation.py), as the full check's tracing does: a hang
past `--timeout`, a crash or an exit of the model's code ends that child, never reslint; its
prints go to /dev/null, so the report reslint writes stays valid JSON or SARIF; processes the
model starts are killed with it. The child sends back the report as plain data (`to_dict`).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import sys
import traceback
from dataclasses import dataclass, replace
from typing import Any, TextIO

from reslint.probing import DEFAULT_TIMEOUT
from reslint.probing.api import ProbeError, input_maker, measure_model
from reslint.probing.report import ProbeReport
from reslint.probing.verdicts import Thresholds

TARGET = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


@dataclass
class ProbeOptions:
    file: str | None
    model: str | None = None
    inputs: str | None = None
    device: str = "auto"
    dtype: str | None = None
    loss: str = "auto"
    steps: int = 1
    seed: int = 0
    plot: str | None = None
    output_format: str = "text"
    wrap: str = "auto"
    compare: str | None = None
    vanishing_gradient_factor: float | None = None
    exploding_gradient_factor: float | None = None
    activation_growth_factor: float | None = None
    timeout: float | None = DEFAULT_TIMEOUT


def thresholds_from(settings: Any, options: ProbeOptions) -> Thresholds:
    def pick(flag: float | None, configured: float) -> float:
        return flag if flag is not None else configured

    return Thresholds(
        pick(options.vanishing_gradient_factor, settings.vanishing_gradient_factor),
        pick(options.exploding_gradient_factor, settings.exploding_gradient_factor),
        pick(options.activation_growth_factor, settings.activation_growth_factor),
    )


def looks_like_target(target: str) -> bool:
    return target.endswith((".py", ".pyi")) or "/" in target or os.sep in target or TARGET.fullmatch(target) is not None


def resolve_target(target: str, flag: str) -> str:
    """A FILE_OR_MODULE to the file to import."""
    if target.endswith((".py", ".pyi")) or "/" in target or os.sep in target:
        if not os.path.isfile(target):
            raise ProbeError(f"{flag}: file not found: {target}")
        return os.path.abspath(target)
    relative = target.replace(".", os.sep)
    for candidate in (relative + ".py", os.path.join(relative, "__init__.py")):
        if os.path.isfile(candidate):
            return os.path.abspath(candidate)
    saved = list(sys.path)
    try:
        sys.path.insert(0, os.getcwd())
        spec = importlib.util.find_spec(target)
    except (ImportError, ValueError):
        spec = None
    finally:
        sys.path[:] = saved
    if spec is None or not spec.origin or not os.path.isfile(spec.origin):
        raise ProbeError(f"{flag}: cannot find module {target!r}")
    return spec.origin


def model_target(file: str | None, model: str | None) -> tuple[str, str | None]:
    """(the file to import, the model expression or None)."""
    from reslint.trace.loader import same_file
    from reslint.trace.models import split_factory

    expression = model.strip() if model else None
    if model:
        target, expr = split_factory(model)
        if target and looks_like_target(target):
            if not expr:
                raise ProbeError(f"--model {model!r}: expected EXPR or FILE_OR_MODULE:EXPR, e.g. GPT() or model.py:GPT()")
            resolved = resolve_target(target, f"--model {model!r}")
            if file and not same_file(file, resolved):
                raise ProbeError(f"--model {model!r} names {target}, but the file to probe is {file}")
            return resolved, expr
    if not file:
        raise ProbeError("probe needs the model's FILE (or --model FILE_OR_MODULE:EXPR)")
    if os.path.isdir(file):
        raise ProbeError(directory_message(file))
    if not os.path.isfile(file):
        raise ProbeError(f"file not found: {file}")
    return os.path.abspath(file), expression


def directory_message(path: str) -> str:
    return (f"{path} is a directory: reslint probe measures one model, give its FILE "
            f"(e.g. reslint probe model.py --model \"GPT()\"); reslint check takes directories")


def resolve_loss_option(loss: str, module: Any, path: str) -> Any:
    """A kind of LOSS_KINDS, or MODULE:FUNC (FILE:FUNC, or the probed file's FUNC as `:FUNC`)."""
    from reslint.probing.losses import LOSS_KINDS
    from reslint.trace.loader import same_file
    from reslint.trace.models import split_factory

    if loss in LOSS_KINDS:
        return loss
    target, name = split_factory(loss)
    if not name:
        raise ProbeError(f"--loss {loss!r}: expected {', '.join(LOSS_KINDS)} or MODULE:FUNC")
    if not target or (target.endswith((".py", ".pyi")) and same_file(target, path)):
        namespace: Any = module
    elif target.endswith((".py", ".pyi")):
        file = resolve_target(target, f"--loss {loss!r}")
        spec = importlib.util.spec_from_file_location(f"_reslint_loss_{abs(hash(file))}", file)
        namespace = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(namespace)
        except Exception as error:  # noqa: BLE001 - user code
            raise ProbeError(f"--loss {loss!r}: importing {target} failed: {type(error).__name__}: {error}") from None
    else:
        try:
            namespace = importlib.import_module(target)
        except Exception as error:  # noqa: BLE001 - user code
            raise ProbeError(f"--loss {loss!r}: cannot import {target}: {type(error).__name__}: {error}") from None
    value: Any = namespace
    for part in name.split("."):
        value = getattr(value, part, None)
        if value is None:
            raise ProbeError(f"--loss {loss!r}: {target or os.path.basename(path)} has no {name!r}")
    if not callable(value):
        raise ProbeError(f"--loss {loss!r}: {name} is not callable")
    return value


def choose_spec(module: Any, path: str, expression: str | None, settings: Any) -> Any:
    """The ModelSpec to probe: the expression, the config's factory for the file, or the one discovered model."""
    from reslint.trace.engine import factories_for
    from reslint.trace.models import (
        BuildFailed,
        build_model,
        discover_models,
        factory_spec,
        outermost,
        split_factory,
    )

    if expression:
        return factory_spec(expression, module, path, None)
    factories = factories_for(path, settings)
    if factories:
        return factory_spec(split_factory(factories[0].factory)[1], module, path, factories[0].inputs)
    specs, skipped = discover_models(module, path)
    built = []
    for spec in specs:
        try:
            built.append(build_model(spec, path))
        except BuildFailed:
            continue
    kept = outermost(built)
    if len(kept) == 1:
        return kept[0].spec
    shown = os.path.basename(path)
    if not kept:
        reasons = "; ".join(f"{name}: {why}" for name, why in skipped.items())
        raise ProbeError(f"no model to probe in {shown} that can be built without arguments"
                         + (f" ({reasons})" if reasons else "") + "; pass --model EXPR")
    names = ", ".join(item.spec.name for item in kept)
    raise ProbeError(f"{shown} defines several models ({names}); pass --model EXPR to pick one")


def build(spec: Any, path: str, seed: int, label: str | None = None) -> Any:
    import torch

    from reslint.trace.loader import locate, one_line

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        try:
            return spec.build()
        except (Exception, SystemExit) as error:  # user code: a factory's sys.exit() must not end the run silently
            where = locate(error, path)
            at = f" ({os.path.basename(path)}:{where.line})" if where else ""
            raise ProbeError(f"cannot build {label or spec.name}: {one_line(error)}{at}") from error


def inputs_for(text: str | None, spec: Any, module: Any, model: Any, device: Any, dtype: Any) -> tuple[Any, str]:
    from reslint.trace.inputs import InputError, parse_shape_spec
    from reslint.trace.models import evaluation_namespace

    text = text or spec.inputs
    if text is None or parse_shape_spec(text) is not None:
        return input_maker(text, model, device, dtype)
    from reslint.probing.api import to_device
    from reslint.trace.inputs import describe_value, from_text

    namespace = evaluation_namespace(module)

    def make(step: int) -> Any:
        try:
            value = from_text(text, namespace, "cpu")
        except InputError as error:
            raise ProbeError(str(error)) from None
        value.args, value.kwargs = to_device(value.args, device, dtype), to_device(value.kwargs, device, dtype)
        return value

    shapes = describe_value(make(0))
    return make, text if shapes == text else f"{text} = {shapes}"


def run_probe(options: ProbeOptions, settings: Any, world: Any) -> tuple[ProbeReport, ProbeReport | None]:
    """The report of the model and, with --compare, of the compared model; raises ProbeError (one line)."""
    import torch

    from reslint.probing.devices import DeviceError, resolve_device, torch_dtype
    from reslint.trace.loader import ImportFailed, loaded_module

    path, expression = model_target(options.file, options.model)
    try:
        device = resolve_device(options.device, world.local_rank)
        dtype = torch_dtype(options.dtype)
    except DeviceError as error:
        raise ProbeError(str(error)) from None
    if device.type == "cuda":
        torch.cuda.set_device(device)
    try:
        with loaded_module(path, settings.root) as module:
            loss = resolve_loss_option(options.loss, module, path)
            spec = choose_spec(module, path, expression, settings)
            report = probe_spec(spec, expression, module, path, loss, device, dtype, options, settings, world)
            compared = None
            if options.compare:
                from reslint.trace.models import factory_spec

                other = factory_spec(options.compare, module, path, spec.inputs)
                compared = probe_spec(other, options.compare, module, path, loss, device, dtype, options, settings, world)
            return report, compared
    except ImportFailed as error:
        raise ProbeError(f"cannot import {os.path.basename(path)}: {error.message.removeprefix('importing the file failed: ')}"
                         f" (line {error.line})") from None


def probe_isolated(options: ProbeOptions, settings: Any, world: Any,
                   parent_computed: bool = True) -> tuple[ProbeReport, ProbeReport | None]:
    """`run_probe` in a killable child; raises ProbeError (one line, the child's traceback in `.details`).

    `parent_computed`: this process may have run torch on the CPU already (it had imported torch
    before the probe). A forked child cannot use the OpenMP threads its parent started (libgomp
    deadlocks, as DataLoader workers would: they run one thread for that reason), so such a
    child runs one thread; the CLI's fresh process keeps them all.
    """
    from reslint.isolation import ChildFailure, run_isolated

    outcome = run_isolated(probe_in_child, options, settings, world, parent_computed, timeout=options.timeout)
    if isinstance(outcome, ChildFailure):
        raise ProbeError(failure_message(outcome, options.timeout))
    if "error" in outcome:
        error = ProbeError(outcome["error"])
        error.details = outcome.get("traceback", "")
        raise error
    compared = outcome["compared"]
    return ProbeReport.from_dict(outcome["report"]), ProbeReport.from_dict(compared) if compared else None


def probe_in_child(options: ProbeOptions, settings: Any, world: Any, one_thread: bool = False) -> dict:
    """Join the world, probe, leave; the reports or the error as plain data (all a child sends back)."""
    import torch

    from reslint.probing.devices import DeviceError, resolve_device
    from reslint.probing.distributed import join, leave

    if one_thread:
        torch.set_num_threads(1)
    created = False
    try:
        device = resolve_device(options.device, world.local_rank)
        created = join(world, device.type)
        report, compared = run_probe(replace(options, device=str(device)), settings, world)
        return {"report": report.to_dict(), "compared": compared.to_dict() if compared else None}
    except (ProbeError, DeviceError) as error:
        return {"error": str(error), "traceback": traceback.format_exc()}
    except Exception as error:  # noqa: BLE001 - reslint's own failure, reported like the CLI's internal errors
        return {"error": f"internal error: {type(error).__name__}: {error}", "traceback": traceback.format_exc()}
    finally:
        leave(created)


def failure_message(failure: Any, timeout: float | None) -> str:
    """The child hung, crashed or exited: one line naming what it was doing."""
    if failure.cause.startswith("timed out"):
        return (f"the probe timed out after {timeout:g} s while {failure.stage}; "
                f"pass a larger --timeout (default {DEFAULT_TIMEOUT:g}) if the model needs longer")
    return f"the probe's process {failure.cause} while {failure.stage}"


def probe_spec(spec: Any, expression: str | None, module: Any, path: str, loss: Any, device: Any, dtype: Any,
               options: ProbeOptions, settings: Any, world: Any) -> ProbeReport:
    """Build one model, place it, wrap it for the world, measure it."""
    from reslint.isolation import report_stage
    from reslint.probing.devices import (
        is_out_of_memory,
        out_of_memory_message,
        release_memory,
    )
    from reslint.probing.distributed import unwrap, wrap
    from reslint.probing.structure import find_layout

    label = expression or spec.name
    report_stage(f"building {label}", spec.line, spec.name)
    model = build(spec, path, options.seed, expression)
    inner, wrapping = unwrap(model)
    try:
        inner.to(device)
        if dtype is not None:
            inner.to(dtype)
        make_inputs, description = inputs_for(options.inputs, spec, module, inner, device, dtype)
    except ProbeError:
        raise
    except Exception as error:
        if is_out_of_memory(error):
            release_memory(device)
            raise ProbeError(out_of_memory_message(error, device, inner, options.inputs or "",
                                                   options.dtype or "float32", f"moving {spec.name} to {device}")) from error
        raise
    layout = find_layout(inner)
    how = options.wrap
    if how == "auto":
        how = "ddp" if world.distributed and wrapping == "none" else "none"
    if how != "none" and wrapping != "none":
        raise ProbeError(f"--wrap {how}: the factory already returned a {wrapping.upper()} model")
    if how != "none" and not world.distributed:
        raise ProbeError(f"--wrap {how} needs a distributed launch: torchrun --nproc-per-node N -m reslint probe ...")
    call, model_class = model, type(inner)
    if how != "none":
        blocks = [block for stack in layout.stacks if stack.origin != "children" for block in stack.blocks]
        call = wrap(inner, how, blocks, device)
        wrapping = how
    report_stage(f"running the forward and backward pass of {label}", spec.line, spec.name)
    report = measure_model(call, inner, make_inputs, loss=loss, device=device, steps=options.steps,
                           seed=options.seed, train=True, thresholds=thresholds_from(settings, options),
                           wrap=wrapping, world_size=world.size, inputs_description=description,
                           dtype=dtype, source_path=path, fallback_line=spec.line, layout=layout,
                           model_class=model_class)
    report.expression = expression or ""
    return report


def reported(findings: list, settings: Any) -> list:
    """Config and inline suppressions, as `reslint check` applies them."""
    import os

    from reslint.discovery import SourceFile, root_relative
    from reslint.filtering import file_text, reported as filtered

    by_path: dict[str, list] = {}
    for finding in findings:
        by_path.setdefault(finding.path, []).append(finding)
    result = []
    for path, items in by_path.items():
        absolute = os.path.abspath(path)
        source = SourceFile(absolute, path, root_relative(absolute, settings.root))
        result += filtered(items, source, file_text(absolute), settings)
    return sorted(result, key=lambda finding: finding.sort_key)


def write_report(report: ProbeReport, compared: ProbeReport | None, output_format: str, stream: TextIO,
                 settings: Any) -> None:
    if output_format == "json":
        from reslint.probing.report import comparison_document

        document = report.to_dict()
        if compared is not None:
            document["comparison"] = comparison_document(report, compared)
        stream.write(json.dumps(document, indent=2) + "\n")
        return
    if output_format in ("sarif", "github"):
        from reslint.reporters import render
        from reslint.report import Report

        findings = sorted(report.findings + (compared.findings if compared is not None else []),
                          key=lambda finding: finding.sort_key)
        render(Report(findings=findings, files_checked=1, settings=settings), output_format, settings, stream)
        return
    from reslint.probing.text import render_text

    render_text(report, stream, compared)
