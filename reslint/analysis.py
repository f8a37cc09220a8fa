"""One file in, findings and model summaries out: decode, parse, extract facts, run rules."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from reslint.findings import FileResult, Finding, ModelSummary
from reslint.project_facts import FileLinks, PostLNBlock
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
    import libcst

    result = FileResult(path=path)
    try:
        text = decode_source(data)
    except (UnicodeDecodeError, SyntaxError, LookupError) as error:
        result.findings.append(Finding("RL901", f"cannot decode file: {error}", path, 1, 1))
        return result
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
        return result

    from reslint.rules import run_rules
    from reslint.static.engine import extract_facts

    facts = extract_facts(path, module)
    result.findings.extend(run_rules(facts, settings))
    result.models.extend(facts.model_summaries())
    result.links = file_links(facts, text)
    if not settings.static:
        add_trace_results(result, path, data, settings, source_path)
    return result


def file_links(facts, text: str) -> FileLinks:
    """What the file offers to and asks of other files: Post-LN classes, class uses, training code."""
    from reslint.static.training import extract_training

    model_refs, optimizers, schedules = extract_training(text)
    return FileLinks(
        post_ln_blocks=[PostLNBlock(cls, add.span.line, add.span.column, f"`{add.builtin}` in `{cls}`" if add.builtin else "")
                        for cls, add in facts.post_ln_blocks.items()],
        class_uses={cls: list(uses) for cls, uses in facts.class_uses.items()},
        imports=dict(facts.class_imports),
        model_refs=model_refs if optimizers else [],
        optimizers=optimizers,
        schedules=schedules if optimizers else [],
    )


def torch_available() -> bool:
    """A torch with the trace engine's needs (torch.export, torch.fx); else static facts only."""
    try:
        import torch
        import torch.export
        import torch.fx
    except Exception:  # noqa: BLE001 - a broken torch install raises more than ImportError
        return False
    return hasattr(torch, "nn") and hasattr(torch.export, "export")


@dataclass
class TracedFile:
    """What the trace engine found in one file, in plain values that cross a process boundary."""

    findings: list[Finding] = field(default_factory=list)
    summaries: list[ModelSummary] = field(default_factory=list)
    static_only: dict[str, str] = field(default_factory=dict)  # model name -> why it was not traced
    notes: list[str] = field(default_factory=list)
    imported: bool = False


def add_trace_results(result: FileResult, path: str, data: bytes, settings: Settings,
                      source_path: str | None) -> None:
    """Run the trace engine in an isolated child and merge: one finding per (path, line, code), the
    trace engine's preferred. Whatever the checked code does, the static findings stay."""
    from reslint.isolation import ChildFailure, run_isolated
    from reslint.trace.engine import file_timeout, needs_import

    if not torch_available() or not needs_import(path, data, settings, source_path):
        return
    timeout = file_timeout(settings)
    # The child's own per-model limits report precisely; this one also stops hangs in C code, crashes and exits.
    traced = run_isolated(trace_and_check, path, data, settings, source_path, timeout=timeout + 2)
    result.cacheable = False
    if isinstance(traced, ChildFailure):
        traced = failed_trace(path, traced, timeout)
    result.findings = merge_findings(result.findings, traced.findings)
    traced_names = {summary.name for summary in traced.summaries}
    models = [summary for summary in result.models if summary.name not in traced_names]
    result.models = [
        dataclasses.replace(summary, notes=(*summary.notes, f"static only: {static_only_reason(summary.name, traced)}"))
        for summary in models
    ] + traced.summaries


def failed_trace(path: str, failure, timeout: float) -> TracedFile:
    """The child died or hung: one RL902 (import, build) or RL903 (tracing) naming what it was doing."""
    cause = failure.cause
    if cause.startswith("timed out"):
        cause = f"timed out after {timeout:g} s"
    code = "RL903" if failure.stage.startswith("tracing") else "RL902"
    message = f"{failure.stage}: {cause}; static findings are still reported"
    finding = Finding(code, message, path, failure.line, 1, symbol=failure.symbol, engine="trace")
    return TracedFile(findings=[finding], notes=[f"{failure.stage}: {cause}"], imported=True)


def trace_and_check(path: str, data: bytes, settings: Settings, source_path: str | None) -> TracedFile:
    """Import the file, trace its models and run the rules on the graphs (in the isolated child)."""
    from reslint.trace.engine import trace_file

    return check_captures(trace_file(path, data, settings, source_path=source_path), path, settings)


def check_captures(traced, path: str, settings: Settings, static_fallback: bool = True) -> TracedFile:
    """Run the rules on the graphs of a `TraceResult`: findings and summaries named after the trace engine.

    `static_fallback`: a graph that cannot be read is an RL903 saying the static facts stand for it.
    """
    from reslint.rules import run_rules

    try:
        from reslint.trace.graph_facts import facts_from_capture
    except ImportError:
        facts_from_capture = None
    outcome = TracedFile(findings=list(traced.findings), static_only=dict(traced.static_only),
                         notes=list(traced.notes), imported=traced.imported)
    for capture in traced.captures:
        if facts_from_capture is None:
            outcome.static_only.setdefault(capture.model_name, "the trace engine's graph analysis is not available")
            continue
        try:
            facts = facts_from_capture(capture, path)
        except Exception as error:  # noqa: BLE001 - a graph we cannot read must not lose the static findings
            from reslint.trace.loader import one_line

            reason = f"reading the {capture.method} graph failed: {one_line(error)}"
            outcome.findings.append(Finding("RL903", reason + ("; static facts were used" if static_fallback else ""), path,
                                            capture.class_line, 1, symbol=capture.model_name, engine="trace"))
            outcome.static_only[capture.model_name] = reason
            continue
        engine = f"traced ({capture.method})"
        outcome.findings.extend(dataclasses.replace(finding, engine="trace")
                                for finding in run_rules(facts, settings))
        for summary in facts.model_summaries():
            outcome.summaries.append(dataclasses.replace(summary, engine=engine, notes=tuple(capture.notes)))
        outcome.static_only.pop(capture.model_name, None)
    return outcome


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


def static_only_reason(name: str, traced: TracedFile) -> str:
    if name in traced.static_only:
        return traced.static_only[name]
    if traced.notes:
        return traced.notes[0]
    if not traced.imported:
        return "the file was not imported"
    return "not built by the trace engine (not discovered as an outermost model; pass --model FILE:EXPR)"
