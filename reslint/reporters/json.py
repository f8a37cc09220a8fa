"""Machine output: one deterministic JSON document (DESIGN.md fixes its keys)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, TextIO

from reslint.catalog import RULES
from reslint.reporters.common import counts_by_code, skipped_counts, trace_counts
from reslint.reporters.escaping import valid_unicode
from reslint.settings import Settings
from reslint.version import __version__

if TYPE_CHECKING:
    from reslint.report import Report


def report_document(report: Report) -> dict:
    return {
        "version": __version__,
        "findings": [finding.to_dict() for finding in report.findings],
        "models": [model.to_dict() for model in report.models],
        "summary": {
            "files": report.files_checked,
            "files_skipped": report.files_skipped,
            "findings": len(report.findings),
            "errors": report.count("error"),
            "warnings": report.count("warning"),
            "infos": report.count("info"),
            "by_code": {code: count for code, count in sorted(counts_by_code(report.findings))},
            "skipped": skipped_counts(report.skipped),
            **trace_counts(report.traces),
        },
        "traces": [trace.to_dict() for trace in report.traces],
    }


def statistics_document(report: Report) -> list[dict]:
    return [
        {"code": code, "name": RULES[code].name, "count": count}
        for code, count in counts_by_code(report.findings)
    ]


def render_json(report: Report, settings: Settings, stream: TextIO) -> None:
    document = statistics_document(report) if settings.statistics else report_document(report)
    stream.write(json.dumps(valid_unicode(document), indent=2) + "\n")
