from __future__ import annotations

import io
import json
from pathlib import Path

import jsonschema
import pytest

import reslint
from reslint.catalog import RULES
from reslint.findings import Finding, ModelSummary, StackSummary
from reslint.reporters import render
from reslint.reporters.github import annotation, escape_data, escape_property
from reslint.report import Report
from reslint.settings import Settings

SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())

FINDINGS = [
    Finding("RL001", "skip (B, T, 512) vs branch (B, T, 256)", "pkg/model.py", 12, 9, "Block.forward"),
    Finding("RL101", "`Block` uses Post-LN", "pkg/model.py", 20, 16, "Block"),
    Finding("RL101", "`Other` uses Post-LN", "pkg/other.py", 4, 1, "Other"),
    Finding("RL201", "BatchNorm1d in a sequence model", "pkg/other.py", 8, 5),
    Finding("RL102", "policy says pre", "pkg/other.py", 9, 5, severity="error"),
]
MODELS = [
    ModelSummary("pkg/model.py", "TinyLM", 30, (
        StackSummary("self.blocks", "Block", 12, "pre", True, 33),
        StackSummary("self.decoder", "DecBlock", None, "post", None, 35),
    )),
    ModelSummary("pkg/other.py", "Mlp", 3, (), "post", notes=("tracing failed: data-dependent branch",)),
    ModelSummary("pkg/other.py", "Plain", 40),
]


def report(findings=FINDINGS, models=MODELS, files=3) -> Report:
    return Report(findings=list(findings), models=list(models), files_checked=files)


def rendered(fmt: str, the_report: Report | None = None, stream=None, **settings) -> str:
    stream = stream or io.StringIO()
    render(the_report or report(), fmt, Settings(**settings), stream)
    return stream.getvalue()


class TtyStream(io.StringIO):
    def isatty(self) -> bool:
        return True


# text

def test_text_lines_model_summary_and_total(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert rendered("text").splitlines() == [
        "pkg/model.py:12:9: RL001 [error] skip (B, T, 512) vs branch (B, T, 256)",
        "pkg/model.py:20:16: RL101 [info] `Block` uses Post-LN",
        "pkg/other.py:4:1: RL101 [info] `Other` uses Post-LN",
        "pkg/other.py:8:5: RL201 [warning] BatchNorm1d in a sequence model",
        "pkg/other.py:9:5: RL102 [error] policy says pre",
        "",
        "Models:",
        "  pkg/model.py:30: TinyLM: 12 blocks (self.blocks: Block), Pre-LN, final norm yes [static]",
        "  pkg/model.py:30: TinyLM: ? blocks (self.decoder: DecBlock), Post-LN [static]",
        "  pkg/other.py:3: Mlp: Post-LN [static]",
        "      note: tracing failed: data-dependent branch",
        "",
        "Found 5 findings (2 errors, 1 warning, 2 infos) in 3 files.",
    ]


def test_text_all_checks_passed_and_singulars():
    assert rendered("text", report([], [], 1)) == "All checks passed! (1 file)\n"
    single = rendered("text", report(FINDINGS[3:4], [], 1))
    assert single.splitlines()[-1] == "Found 1 finding (0 errors, 1 warning, 0 infos) in 1 file."


def test_text_colour_only_on_a_tty_without_no_color(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert "\033[" not in rendered("text")
    coloured = rendered("text", stream=TtyStream())
    assert "\033[31m" in coloured and "\033[0m" in coloured
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\033[" not in rendered("text", stream=TtyStream())


def test_statistics_counts_per_code_by_count_then_code():
    lines = rendered("text", statistics=True).splitlines()
    assert lines[:4] == [
        "2  RL101  post-ln",
        "1  RL001  residual-shape-mismatch",
        "1  RL102  mixed-norm-placement",
        "1  RL201  batchnorm-in-sequence-model",
    ]
    assert lines[-1] == "Found 5 findings (2 errors, 1 warning, 2 infos) in 3 files."
    assert not any(": RL" in line for line in lines)


def test_statistics_as_json():
    assert json.loads(rendered("json", statistics=True))[0] == {"code": "RL101", "name": "post-ln", "count": 2}


# json

def test_json_document_shape():
    document = json.loads(rendered("json"))
    assert list(document) == ["version", "findings", "models", "summary", "traces"]
    assert document["version"] == reslint.__version__
    assert document["findings"][0] == FINDINGS[0].to_dict()
    assert list(document["findings"][0]) == [
        "code", "name", "severity", "message", "path", "line", "column", "symbol", "engine", "help", "fix",
    ]
    assert document["findings"][4]["severity"] == "error"
    assert document["models"] == [model.to_dict() for model in MODELS]
    assert document["summary"] == {
        "files": 3, "files_skipped": 0, "findings": 5, "errors": 2, "warnings": 1, "infos": 2,
        "by_code": {"RL001": 1, "RL101": 2, "RL102": 1, "RL201": 1}, "skipped": {},
        "models_traced": 0, "models_total": 0, "not_traced": {}, "files_not_imported": 0,
    }
    assert document["traces"] == []


def test_json_is_byte_identical_across_renders():
    assert rendered("json") == rendered("json")


# sarif

def sarif(the_report: Report | None = None, root: Path | None = None) -> dict:
    return json.loads(rendered("sarif", the_report, root=str(root) if root else "."))


def test_sarif_validates_against_the_official_schema(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    findings = FINDINGS + [Finding("RL903", "a path with spaces", "dir with space/m ü.py", 1, 1)]
    document = sarif(report(findings), tmp_path)
    jsonschema.Draft7Validator(SCHEMA, format_checker=jsonschema.FormatChecker()).validate(document)
    # jsonschema checks the uri formats only when optional packages are installed: check by hand.
    last = document["runs"][0]["results"][-1]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert last["uri"] == "dir%20with%20space/m%20%C3%BC.py"


def test_sarif_fields_github_needs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    document = sarif(report(), tmp_path)
    assert document["version"] == "2.1.0"
    assert "$schema" in document
    (run,) = document["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "reslint" and driver["version"] == reslint.__version__
    assert driver["informationUri"].startswith("https://")
    assert [rule["id"] for rule in driver["rules"]] == list(RULES)
    for rule in driver["rules"]:
        info = RULES[rule["id"]]
        assert rule["name"] == info.name
        assert rule["shortDescription"]["text"] and rule["fullDescription"]["text"]
        assert rule["help"]["text"] and rule["help"]["markdown"]
        assert rule["helpUri"] == info.doc_url
        assert rule["defaultConfiguration"]["level"] == {"error": "error", "warning": "warning", "info": "note"}[info.severity]
    levels = [result["level"] for result in run["results"]]
    assert levels == ["error", "note", "note", "warning", "error"]
    first = run["results"][0]
    assert first["ruleId"] == "RL001"
    assert driver["rules"][first["ruleIndex"]]["id"] == "RL001"
    assert first["message"]["text"] == FINDINGS[0].message
    location = first["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "pkg/model.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"] == {"startLine": 12, "startColumn": 9}
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.as_uri() + "/"


def test_sarif_uris_are_relative_to_the_git_toplevel(tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()
    subdir = tmp_path / "src"
    subdir.mkdir()
    monkeypatch.chdir(subdir)
    document = sarif(report([Finding("RL101", "m", "model.py", 3)]), subdir)
    (result,) = document["runs"][0]["results"]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "src/model.py"


def test_sarif_paths_outside_the_root_become_absolute_file_uris(tmp_path, monkeypatch):
    root = tmp_path / "project"
    root.mkdir()
    monkeypatch.chdir(root)
    outside = (tmp_path / "elsewhere" / "m.py").as_posix()
    document = sarif(report([Finding("RL101", "m", outside, 3)]), root)
    artifact = document["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert artifact == {"uri": Path(outside).as_uri()}
    jsonschema.Draft7Validator(SCHEMA, format_checker=jsonschema.FormatChecker()).validate(document)


def test_sarif_without_findings_is_valid(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    document = sarif(report([], [], 0), tmp_path)
    assert document["runs"][0]["results"] == []
    jsonschema.Draft7Validator(SCHEMA).validate(document)


# github

@pytest.mark.parametrize(
    ("text", "data", "prop"),
    [
        ("plain", "plain", "plain"),
        ("100% sure", "100%25 sure", "100%25 sure"),
        ("two\nlines\r\n", "two%0Alines%0D%0A", "two%0Alines%0D%0A"),
        ("a:b,c", "a:b,c", "a%3Ab%2Cc"),
        ("%0A", "%250A", "%250A"),
    ],
)
def test_github_escaping(text, data, prop):
    assert escape_data(text) == data
    assert escape_property(text) == prop


def test_github_annotations(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    lines = rendered("github", root=str(tmp_path)).splitlines()
    assert lines[0] == "::error file=pkg/model.py,line=12,col=9,title=RL001::skip (B, T, 512) vs branch (B, T, 256)"
    assert lines[1].startswith("::notice file=pkg/model.py,line=20,col=16,title=RL101::")
    assert lines[3].startswith("::warning file=pkg/other.py,line=8,col=5,title=RL201::")
    assert lines[4].startswith("::error ")
    assert len(lines) == 5


def test_github_escapes_paths_and_messages(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    finding = Finding("RL201", "first line\nsecond: 50%", "odd,name:1.py", 2, 3)
    assert annotation(finding, str(tmp_path)) == (
        "::warning file=odd%2Cname%3A1.py,line=2,col=3,title=RL201::first line%0Asecond: 50%25"
    )


def test_unknown_format_is_rejected():
    with pytest.raises(ValueError, match="unknown output format"):
        rendered("xml")
