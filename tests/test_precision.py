"""bench/precision.py's counting: verdict rows matched to findings of a tiny synthetic report.

The real run (both modes over the installed transformers) takes an hour: `python bench/precision.py`.
"""

from __future__ import annotations

import json
import sys

import pytest

from golden import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import precision  # noqa: E402
from precision import BadInput, Seen, read_verdicts, tally  # noqa: E402

VERDICTS = """\
# transformers 5.24.0
path,line,code,modes,verdict,reason
models/a/modeling_a.py,10,RL103,static+full,true,no norm after the stack
models/a/modeling_a.py,20,RL103,static,false,"the neck norms it, across classes"
models/b/modeling_b.py,5,RL102,static,by-design,a flag picks the placement
models/b/modeling_b.py,7,RL501,static,unsure,a projection pair
models/c/modeling_c.py,3,RL103,static+full,true,a real missing final norm
models/c/modeling_c.py,9,RL902,full,false,reslint fed a 32x32 image to a 224 model
models/d/modeling_d.py,1,RL104,static,false,not checked in this run
"""


def seen(mode, path, line, code, severity="warning"):
    return Seen(mode, path, line, code, severity, "message")


FINDINGS = [
    seen("static", "models/a/modeling_a.py", 10, "RL103"),
    seen("full", "models/a/modeling_a.py", 10, "RL103"),
    seen("static", "models/a/modeling_a.py", 20, "RL103"),
    seen("full", "models/a/modeling_a.py", 20, "RL103"),  # the row covers static only: unjudged in full
    seen("static", "models/b/modeling_b.py", 5, "RL102"),
    seen("static", "models/b/modeling_b.py", 7, "RL501"),
    seen("static", "models/b/modeling_b.py", 8, "RL101", "info"),
    seen("static", "models/b/modeling_b.py", 30, "RL001", "error"),
    seen("full", "models/c/modeling_c.py", 9, "RL902"),
    # models/c line 3 RL103 is gone in both modes: a recall loss in each
]
COVERED = {
    "static": {"models/a/modeling_a.py", "models/b/modeling_b.py", "models/c/modeling_c.py"},
    "full": {"models/a/modeling_a.py", "models/c/modeling_c.py"},
}


def test_findings_are_counted_per_code_mode_and_verdict():
    result = tally(FINDINGS, read_verdicts(VERDICTS).rows, COVERED)
    assert dict(result.counts) == {
        ("RL103", "static", "true"): 1,
        ("RL103", "full", "true"): 1,
        ("RL103", "static", "false"): 1,
        ("RL103", "full", "unjudged"): 1,
        ("RL102", "static", "by-design"): 1,
        ("RL501", "static", "unsure"): 1,
        ("RL101", "static", "info"): 1,
        ("RL001", "static", "unjudged"): 1,
        ("RL902", "full", "false"): 1,
    }
    assert [(item.path, item.line, item.code, item.mode) for item in result.unjudged] == [
        ("models/a/modeling_a.py", 20, "RL103", "full"),
        ("models/b/modeling_b.py", 30, "RL001", "static"),
    ]
    assert [(item.line, item.code, item.mode) for item, _ in result.judged_false] == [(20, "RL103", "static"), (9, "RL902", "full")]
    assert [(item.line, row.reason) for item, row in result.own_guesses] == [(9, "reslint fed a 32x32 image to a 224 model")]
    assert result.failed


def test_gone_rows_are_split_into_fixed_and_recall_loss_only_where_the_file_was_checked():
    findings = [item for item in FINDINGS if not (item.line == 20 or item.code == "RL902")]
    result = tally(findings, read_verdicts(VERDICTS).rows, COVERED)
    assert [(mode, row.path, row.line, row.code) for mode, row in result.recall_loss] == [
        ("full", "models/c/modeling_c.py", 3, "RL103"),
        ("static", "models/c/modeling_c.py", 3, "RL103"),
    ]
    # the RL104 row's file was not checked in this run: not gone, just not seen
    assert [(mode, row.line, row.code, row.verdict) for mode, row in result.fixed] == [
        ("static", 20, "RL103", "false"),
        ("full", 9, "RL902", "false"),
    ]
    assert result.judged_false == []
    assert [(item.line, item.code) for item in result.unjudged] == [(30, "RL001")]


def test_info_findings_need_no_verdict_and_a_judged_report_passes():
    findings = [item for item in FINDINGS if item.severity == "info" or item.line == 10]
    result = tally(findings, read_verdicts(VERDICTS).rows, {"static": {"models/a/modeling_a.py"}})
    assert result.unjudged == [] and result.judged_false == []
    assert not result.failed


@pytest.mark.parametrize("text, message", [
    ("path,line,code\n", "first line must be"),
    ("# transformers 5.24.0\nmodels/a.py,x,RL103,static,true,why\n", "bad line"),
    ("# transformers 5.24.0\nmodels/a.py,1,RL103,static,maybe,why\n", "bad line"),
    ("# transformers 5.24.0\nmodels/a.py,1,RL103,trace,true,why\n", "bad line"),
    ("# transformers 5.24.0\nmodels/a.py,1,RL103,static,true\n", "expected 6 fields"),
    ("# transformers 5.24.0\nmodels/a.py,1,RL103,static,true,a\nmodels/a.py,1,RL103,static+full,false,b\n",
     "a second verdict"),
])
def test_a_malformed_verdict_file_is_refused(text, message):
    with pytest.raises(BadInput, match=message):
        read_verdicts(text)


def test_main_recounts_kept_results_and_exits_by_the_verdicts(tmp_path, capsys):
    installed = precision.package_version("transformers")
    if installed == "not installed":
        pytest.skip("transformers is not installed")
    results = tmp_path / "results"
    results.mkdir()
    finding = {"code": "RL103", "severity": "warning", "message": "no final norm",
               "path": "transformers/models/a/modeling_a.py", "line": 10}
    (results / "static.json").write_text(json.dumps({"findings": [finding], "checked": ["models/a/modeling_a.py"], "seconds": 1.0}))
    verdicts = tmp_path / "verdicts.csv"
    verdicts.write_text(f"# transformers {installed}\nmodels/a/modeling_a.py,10,RL103,static,true,no norm\n")
    arguments = ["--mode", "static", "--reuse", "--results", str(results), "--verdicts", str(verdicts)]
    assert precision.main(arguments) == 0
    assert "| RL103 | static | 1 | 1 | 0 | 0 | 0 | 0 | 0 |" in capsys.readouterr().out

    verdicts.write_text(f"# transformers {installed}\nmodels/a/modeling_a.py,10,RL103,static,false,the neck norms it\n")
    assert precision.main(arguments) == 1
    verdicts.write_text("# transformers 0.0.1\n")
    assert precision.main(arguments) == 2
    assert "the verdicts are for transformers 0.0.1" in capsys.readouterr().err


def test_the_full_check_is_judged_from_trace_coverage_results_a_later_folder_replacing_an_earlier(tmp_path, capsys):
    installed = precision.package_version("transformers")
    if installed == "not installed":
        pytest.skip("transformers is not installed")
    first, second = tmp_path / "before", tmp_path / "after"
    for folder, line in ((first, 80), (second, 12)):
        folder.mkdir()
        finding = {"code": "RL902" if line == 80 else "RL103", "severity": "warning", "message": "m", "line": line,
                   "path": ".venv/lib/python3.11/site-packages/transformers/models/a/modeling_a.py"}
        (folder / "a__modeling_a.json").write_text(json.dumps({"findings": [finding], "models": [], "exit": 1}))
    (first / "b__modeling_b.json").write_text(json.dumps({"error": "Traceback", "findings": [], "models": [], "exit": 1}))
    verdicts = tmp_path / "verdicts.csv"
    verdicts.write_text(f"# transformers {installed}\nmodels/a/modeling_a.py,12,RL103,full,true,no norm\n"
                        "models/a/modeling_a.py,80,RL902,full,false,a guess\n")
    arguments = ["--mode", "full", "--coverage", str(first), "--coverage", str(second), "--results", str(tmp_path / "r"),
                 "--verdicts", str(verdicts)]
    assert precision.main(arguments) == 0
    out = capsys.readouterr().out
    assert "| RL103 | full | 1 | 1 | 0 | 0 | 0 | 0 | 0 |" in out and "| RL902 | full |" not in out
    assert "runs that gave no result: 1" in out
    kept = json.loads((tmp_path / "r" / "full.json").read_text())
    assert sorted(kept["files"]) == ["models/a/modeling_a.py", "models/b/modeling_b.py"]
    assert kept["files"]["models/a/modeling_a.py"]["findings"][0]["path"] == "transformers/models/a/modeling_a.py"
    assert precision.main(["--mode", "full", "--coverage", str(tmp_path / "r"), "--verdicts", str(verdicts)]) == 2
    assert "--coverage: no results of bench/trace_coverage.py" in capsys.readouterr().err


def test_trace_coverage_counts_traced_built_and_groups_why_the_rest_were_not():
    def model(name, engine, note=None):
        return {"name": name, "engine": engine, "notes": [note] if note else []}

    document = {"files": {
        "models/a/modeling_a.py": {"findings": [], "models": [
            model("AModel", "traced (export)"),
            model("AForClassification", "static", "static only: tracing failed: ValueError: Input image size (32*32)"),
            model("AForMasking", "static", "static only: tracing failed: ValueError: Input image size (32*32)"),
            model("ABackbone", "static", "static only: build failed (cannot build ABackbone: TypeError: tuple)"),
            model("AForCausalLM", "static", "static only: building ATextModel: timed out after 120 s"),
            model("AForAudio", "static", "static only: importing the file timed out after 120 s"),
        ]},
        "models/b/modeling_b.py": {"failure": "reslint ran past 480 s and was stopped"},
    }}
    coverage = precision.trace_coverage(document)
    assert (coverage.traced, coverage.built, coverage.total) == (1, 3, 6)
    assert {why: [name.split(" — ")[0] for name in names] for why, names in coverage.why.items()} == {
        "tracing failed: ValueError": ["models/a/modeling_a.py:AForClassification", "models/a/modeling_a.py:AForMasking"],
        "build failed: TypeError": ["models/a/modeling_a.py:ABackbone"],
        "time budget spent building": ["models/a/modeling_a.py:AForCausalLM"],
        "time budget spent importing": ["models/a/modeling_a.py:AForAudio"],
    }
    assert coverage.failed_files == [("models/b/modeling_b.py", "reslint ran past 480 s and was stopped")]
