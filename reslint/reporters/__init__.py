"""Reporters: render a Report as text, JSON, SARIF or GitHub workflow commands."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from reslint.settings import Settings

if TYPE_CHECKING:
    from reslint.report import Report

FORMATS = ("text", "concise", "json", "sarif", "github")  # text: with code frames; concise: one line each
# Formats that show no offered fix (no `[*]` marker, no fix object): a check for them prepares none.
WITHOUT_FIXES = ("github",)


def render(report: Report, fmt: str, settings: Settings, stream: TextIO) -> None:
    if fmt in ("text", "concise"):
        from reslint.reporters.text import render_text

        render_text(report, settings, stream, code_frames=fmt == "text")
        return
    elif fmt == "json":
        from reslint.reporters.json import render_json as renderer
    elif fmt == "sarif":
        from reslint.reporters.sarif import render_sarif as renderer
    elif fmt == "github":
        from reslint.reporters.github import render_github as renderer
    else:
        raise ValueError(f"unknown output format: {fmt!r} (expected one of {', '.join(FORMATS)})")
    renderer(report, settings, stream)
