"""The filter stage: of the rules' findings, those a run reports.

Every entry point (`reslint check`, `reslint.check()`, `reslint.check_model()`, the re-checks of
`--fix`, `reslint probe`) filters through `reported`: the file's suppression comments, the selected
codes (select/ignore), and per-file-ignores matched against the path relative to the project root,
never against the display path, which changes with the working directory. `unique` then keeps one
finding per place (`place`): both engines, and a block reused by several stacks, report the same
place.
"""

from __future__ import annotations

from collections.abc import Iterable

from reslint.discovery import SourceFile, matches_glob
from reslint.file_gate import MAX_SOURCE_BYTES, decode_source, read_project_file
from reslint.findings import Finding
from reslint.settings import Settings
from reslint.suppression import filter_suppressed


def reported(findings: Iterable[Finding], source: SourceFile, text: str | None, settings: Settings) -> list[Finding]:
    """The findings about `source` that no suppression comment in `text` (None: undecodable) silences,
    that are selected, and that per-file-ignores do not drop."""
    return [finding for finding in filter_suppressed(findings, text) if is_reported(finding, source, settings)]


def is_reported(finding: Finding, source: SourceFile, settings: Settings) -> bool:
    """The config's part of `reported`: select/ignore and per-file-ignores."""
    if not settings.enabled(finding.code):
        return False
    return not any(
        finding.code in codes and matches_glob(source.relative, glob)
        for glob, codes in settings.per_file_ignores
    )


def place(finding: Finding) -> tuple[str, int, str]:
    """Where a finding is, for reporting it once: its file, line and code."""
    return finding.path, finding.line, finding.code


def unique(findings: Iterable[Finding]) -> list[Finding]:
    """The findings sorted, one per place (the first in sort order)."""
    seen: set[tuple[str, int, str]] = set()
    kept = []
    for finding in sorted(findings, key=lambda finding: finding.sort_key):
        if place(finding) not in seen:
            seen.add(place(finding))
            kept.append(finding)
    return kept


def decoded(data: bytes | None) -> str | None:
    """The text the suppression comments are read from; None when the file cannot be decoded."""
    if data is None:
        return None
    try:
        return decode_source(data)
    except (UnicodeDecodeError, SyntaxError, LookupError):
        return None


def file_text(path: str) -> str | None:
    """`decoded` of the file at `path`; None when it cannot be read."""
    try:
        return decoded(read_project_file(path, None, MAX_SOURCE_BYTES))
    except OSError:
        return None
