"""One file in, findings and model summaries out: decode, parse, extract facts, run rules."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
from collections.abc import Iterator

from reslint.findings import FileResult, Finding
from reslint.settings import Settings


def decode_source(data: bytes) -> str:
    """Decode like Python does: a BOM or coding cookie wins, else UTF-8. Raises UnicodeDecodeError/SyntaxError."""
    import io
    import tokenize

    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(encoding)
    return text.removeprefix("\ufeff")


def analyze_file(path: str, data: bytes, settings: Settings, source_path: str | None = None) -> FileResult:
    """Analyze one file: statically, then (unless `settings.static`) with the trace engine.

    `path` is the display path used in findings; `source_path` the file to import (default: `path`).
    """
    result = FileResult(path=path)
    try:
        text = decode_source(data)
    except (UnicodeDecodeError, SyntaxError, LookupError) as error:
        result.findings.append(Finding("RL901", f"cannot decode file: {error}", path, 1, 1))
        return result
    if skippable(path, text, settings, source_path):
        result.skipped = True
        return result
    with collector_paused():
        parsed, has_models = static_analysis(result, path, text, settings)
    if parsed and not settings.static and (has_models or names_file(settings, source_path or path)):
        add_trace_results(result, path, data, settings, source_path)
    return result


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection while one file is parsed and analysed.

    libcst builds hundreds of thousands of objects per large file, and the collector, triggered
    every few hundred allocations, walked them again and again: a fifth of the static time. The
    cycles the analysis leaves (graph nodes and their users) are collected after the file.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def static_analysis(result: FileResult, path: str, text: str, settings: Settings) -> tuple[bool, bool]:
    """Parse and analyse one file's text statically into `result` (an RL901 finding when it does not
    parse); (whether it parsed, whether it defines nn.Module classes)."""
    import libcst

    try:
        module = libcst.parse_module(text)
    except libcst.ParserSyntaxError as error:
        line, column, message = error.raw_line, error.raw_column + 1, "invalid syntax"
        try:
            # CPython's parser (parsing only, nothing runs) points at the offending token, libcst at the next one.
            import ast

            ast.parse(text, filename=path)
        except SyntaxError as precise:
            line, column = precise.lineno or line, precise.offset or column
            message = precise.msg
        result.findings.append(Finding("RL901", f"syntax error: {message}", path, line, column))
        return False, False

    from reslint.rules import run_rules
    from reslint.static.engine import extract_facts

    facts = extract_facts(path, module)
    result.findings.extend(run_rules(facts, settings))
    result.models.extend(facts.model_summaries())
    return True, bool(facts.models)


def names_file(settings: Settings, path: str) -> bool:
    """Whether a `--model` spec (or the config's models) targets this file."""
    if not settings.models:
        return False
    from reslint.trace.engine import factories_for

    return bool(factories_for(os.path.abspath(path), settings))


def skippable(path: str, text: str, settings: Settings, source_path: str | None) -> bool:
    """Whether the pre-filter lets this file go unanalysed (see reslint.prefilter)."""
    from reslint.prefilter import may_hold_model_or_training_code, parses

    if may_hold_model_or_training_code(text):
        return False
    real = os.path.abspath(source_path or path)
    if settings.train:
        from reslint.discovery import matches_glob, root_relative

        relative = root_relative(real, settings.root)
        if any(matches_glob(relative, glob) for glob in settings.train):
            return False
    if not settings.static and names_file(settings, real):
        return False
    return parses(text, path)


def torch_available() -> bool:
    """A torch with the trace engine's needs (torch.export, torch.fx); else static facts only."""
    try:
        import torch
        import torch.export
        import torch.fx
    except Exception:  # noqa: BLE001 - a broken torch install raises more than ImportError
        return False
    return hasattr(torch, "nn") and hasattr(torch.export, "export")


def add_trace_results(result: FileResult, path: str, data: bytes, settings: Settings,
                      source_path: str | None) -> None:
    """Run the trace engine and merge: one finding per (path, line, code), the trace engine's preferred."""

    if not torch_available():
        return
    from reslint.rules import run_rules
    from reslint.trace.engine import trace_file

    traced = trace_file(path, data, settings, source_path=source_path)
    result.imported = traced.imported
    result.cacheable = not traced.timed_out
    try:
        from reslint.trace.graph_facts import facts_from_capture
    except ImportError:
        facts_from_capture = None
    trace_findings = list(traced.findings)
    summaries = []
    static_only = dict(traced.static_only)
    for capture in traced.captures:
        if facts_from_capture is None:
            static_only.setdefault(capture.model_name, "the trace engine's graph analysis is not available")
            continue
        try:
            facts = facts_from_capture(capture, path)
        except Exception as error:  # noqa: BLE001 - a graph we cannot read must not lose the static findings
            from reslint.trace.loader import one_line

            reason = f"reading the {capture.method} graph failed: {one_line(error)}"
            trace_findings.append(Finding("RL903", f"{reason}; static facts were used", path,
                                          capture.class_line, 1, symbol=capture.model_name, engine="trace"))
            static_only[capture.model_name] = reason
            continue
        engine = f"traced ({capture.method})"
        trace_findings.extend(dataclasses.replace(finding, engine="trace") for finding in run_rules(facts, settings))
        for summary in facts.model_summaries():
            summaries.append(dataclasses.replace(summary, engine=engine, notes=tuple(capture.notes)))
        static_only.pop(capture.model_name, None)
    result.findings = merge_findings(result.findings, trace_findings)
    traced_names = {summary.name for summary in summaries}
    models = [summary for summary in result.models if summary.name not in traced_names]
    result.models = [
        dataclasses.replace(summary, notes=(*summary.notes, f"static only: {static_only_reason(summary.name, static_only, traced)}"))
        for summary in models
    ] + summaries


# Findings about a whole stack: the engines may point at different lines of it (the static engine at
# the `for` loop, the trace engine at the block call), so they are one finding per stack.
STACK_CODES = ("RL102", "RL103", "RL104")


def merge_findings(static: list[Finding], traced: list[Finding]) -> list[Finding]:
    """One finding per place and code, the trace engine's preferred; stack findings once per stack,
    at the static engine's place (the one the rule pages document) when it has one."""

    def key(finding: Finding) -> tuple:
        if finding.code in STACK_CODES and "." in finding.symbol:  # symbol is the stack: "TinyGPT.blocks"
            return (finding.path, finding.code, finding.symbol)
        return (finding.path, finding.line, finding.code)

    merged: dict[tuple, Finding] = {key(finding): finding for finding in static}
    for finding in traced:
        previous = merged.get(key(finding))
        if previous is not None and finding.code in STACK_CODES:
            finding = dataclasses.replace(finding, line=previous.line, column=previous.column)
        merged[key(finding)] = finding
    return list(merged.values())


def static_only_reason(name: str, static_only: dict[str, str], traced) -> str:
    if name in static_only:
        return static_only[name]
    if traced.notes:
        return traced.notes[0]
    if not traced.imported:
        return "the file was not imported"
    return "not built by the trace engine (not discovered as an outermost model; pass --model FILE:EXPR)"
