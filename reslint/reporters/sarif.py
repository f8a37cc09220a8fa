"""SARIF 2.1.0 for GitHub code scanning: every catalog rule with help, results with locations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from reslint.catalog import RULES, RuleInfo
from reslint.docs import rule_page
from reslint.findings import Finding
from reslint.reporters.common import artifact_uri, repository_root
from reslint.reporters.escaping import valid_unicode
from reslint.settings import Settings
from reslint.version import __version__

if TYPE_CHECKING:
    from reslint.report import Report

SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
INFORMATION_URI = "https://github.com/reslint/reslint"
SRCROOT = "%SRCROOT%"
LEVELS = {"error": "error", "warning": "warning", "info": "note"}


def rule_descriptor(rule: RuleInfo) -> dict:
    summary = rule.summary[0].upper() + rule.summary[1:]
    help_text = f"{summary}. How to fix: {rule.fix}. See {rule.doc_url}"
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": f"{rule.name}: {rule.summary}"},
        "fullDescription": {"text": f"{summary}. How to fix: {rule.fix}."},
        "help": {"text": help_text, "markdown": rule_page(rule.code) or help_markdown(rule, summary)},
        "helpUri": rule.doc_url,
        "defaultConfiguration": {"level": LEVELS[rule.severity]},
        "properties": {"tags": ["pytorch", rule.engine]},
    }


def help_markdown(rule: RuleInfo, summary: str) -> str:
    return (
        f"**{rule.code} {rule.name}**\n\n{summary}.\n\n**How to fix:** {rule.fix}.\n\n"
        f"Suppress with `# noqa: {rule.code}`.\n\n[Documentation]({rule.doc_url})"
    )


def result(finding: Finding, rule_index: dict[str, int], root: str) -> dict:
    uri, under_root = artifact_uri(finding.path, root)
    artifact = {"uri": uri, "uriBaseId": SRCROOT} if under_root else {"uri": uri}
    document = {
        "ruleId": finding.code,
        "ruleIndex": rule_index[finding.code],
        "level": LEVELS[finding.effective_severity],
        "message": {"text": finding.message},
        "locations": [{
            "physicalLocation": {
                "artifactLocation": artifact,
                "region": {"startLine": max(1, finding.line), "startColumn": max(1, finding.column)},
            },
        }],
        "properties": {"engine": finding.engine},
    }
    if finding.fix is not None:
        document["fixes"] = [sarif_fix(finding, artifact)]
        document["properties"]["fixApplicability"] = finding.fix.applicability
    if finding.symbol:
        document["locations"][0]["logicalLocations"] = [{"fullyQualifiedName": finding.symbol}]
    return document


def sarif_fix(finding: Finding, artifact: dict) -> dict:
    replacements = [{
        "deletedRegion": {"startLine": edit.line, "startColumn": edit.column,
                          "endLine": edit.end_line, "endColumn": edit.end_column},
        "insertedContent": {"text": edit.content},
    } for edit in finding.fix.edits]
    return {"description": {"text": f"{finding.fix.message} ({finding.fix.applicability} fix)"},
            "artifactChanges": [{"artifactLocation": artifact, "replacements": replacements}]}


def directory_uri(directory: str) -> str:
    uri = Path(directory).as_uri()
    return uri if uri.endswith("/") else uri + "/"


def sarif_document(report: Report, root: str) -> dict:
    rules = list(RULES.values())
    rule_index = {rule.code: index for index, rule in enumerate(rules)}
    return {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "reslint",
                "version": __version__,
                "semanticVersion": __version__,
                "informationUri": INFORMATION_URI,
                "rules": [rule_descriptor(rule) for rule in rules],
            }},
            "originalUriBaseIds": {SRCROOT: {"uri": directory_uri(root)}},
            "columnKind": "unicodeCodePoints",
            "results": [result(finding, rule_index, root) for finding in report.findings],
        }],
    }


def render_sarif(report: Report, settings: Settings, stream: TextIO) -> None:
    document = sarif_document(report, repository_root(settings.root))
    stream.write(json.dumps(valid_unicode(document), indent=2) + "\n")
