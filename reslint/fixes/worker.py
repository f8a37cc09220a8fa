"""The fix check a static worker runs beside its analysis of a file (see fixes.apply.prepare_fixes).

Its own module, light to import: the parent passes it to the workers before any file is read, and a run
whose files are all skipped must not import libcst for it."""

from __future__ import annotations

from reslint.discovery import SourceFile
from reslint.findings import Finding
from reslint.settings import Settings


def worker_fixes(source: SourceFile, data: bytes, text: str, result, findings: list[Finding], settings: Settings):
    """prepare_fixes for a file a static worker analysed, or None (the parent then checks its fixes as before)."""
    from reslint.fixes import FIXERS

    if not any(finding.code in FIXERS for finding in findings):
        return None
    from reslint.fixes.apply import prepare_fixes, remember_analysis

    try:
        remember_analysis(source.display, data, settings, result)
        return prepare_fixes(source.display, data, text, result.module, result.findings, findings, settings,
                             result.syntax_tree)
    except Exception:  # noqa: BLE001 - the parent's own check of the fixes then says what is wrong
        return None
