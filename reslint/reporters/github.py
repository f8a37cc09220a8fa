"""GitHub Actions workflow commands: one `::error|warning|notice ...::message` per finding."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from reslint.findings import Finding
from reslint.reporters.common import repository_path, repository_root
from reslint.reporters.escaping import valid_unicode
from reslint.settings import Settings

if TYPE_CHECKING:
    from reslint.report import Report

COMMANDS = {"error": "error", "warning": "warning", "info": "notice"}


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(finding: Finding, root: str) -> str:
    # Annotations need paths relative to the repository root, whatever directory reslint ran in.
    path = repository_path(finding.path, root) or finding.path
    properties = ",".join((
        f"file={escape_property(path)}",
        f"line={finding.line}",
        f"col={finding.column}",
        f"title={escape_property(finding.code)}",
    ))
    return f"::{COMMANDS[finding.effective_severity]} {properties}::{escape_data(finding.message)}"


def render_github(report: Report, settings: Settings, stream: TextIO) -> None:
    root = repository_root(settings.root)
    for finding in report.findings:
        stream.write(valid_unicode(annotation(finding, root)) + "\n")
