"""One file in, findings and model summaries out: decode, parse, extract facts, run rules."""

from __future__ import annotations

from reslint.findings import FileResult, Finding
from reslint.settings import Settings


def decode_source(data: bytes) -> str:
    """Decode like Python does: a BOM or coding cookie wins, else UTF-8. Raises UnicodeDecodeError/SyntaxError."""
    import io
    import tokenize

    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(encoding)
    return text[1:] if text.startswith("\ufeff") else text


def analyze_file(path: str, data: bytes, settings: Settings) -> FileResult:
    """Analyze one file statically. `path` is the display path used in findings."""
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

    facts = extract_facts(path, module, text)
    result.findings.extend(run_rules(facts, settings))
    result.models.extend(facts.model_summaries())
    return result
