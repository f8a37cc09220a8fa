"""bench/realworld.py's counting: a tiny synthetic verdict file against synthetic reslint JSON.

No third-party package is needed; the real run over twelve installed packages is
`python bench/realworld.py` (see its docstring).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from golden import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import realworld  # noqa: E402
from realworld import BadInput, Seen, read_verdicts, tally  # noqa: E402

VERDICTS = """\
# synthetic
package,file,line,code,kind,reason
pkg,pkg/model.py,10-14,RL103,defect,the Pre-LN stack has no final norm
pkg,pkg/model.py,30,RL201,defect,BatchNorm1d in the conformer conv module
pkg,pkg/model.py,40-50,RL101,silent,Pre-LN by default: the Post-LN branch needs a flag
pkg,pkg/model.py,60,RL402,false,channels-first norm: the statistics span channels
pkg,pkg/model.py,70,RL101,by-design,KEEL Post-LN on purpose
pkg,pkg/model.py,80,RL101,true,decoder layer defaults to Post-LN
pkg,pkg/other.py,5,RL103,defect,a file the run did not check
pkg,pkg/model.py,90,RL403,unsure,could not tell
"""


def seen(mode, line, code, severity="warning", file="pkg/model.py"):
    return Seen(mode, "pkg", file, line, code, severity, "message")


FINDINGS = [
    seen("static", 12, "RL103"),  # inside the defect's range: found
    seen("static", 13, "RL103"),  # the same defect reported twice: found once
    seen("full", 12, "RL103"),
    seen("static", 45, "RL101", "info"),  # breaks a must-stay-silent row
    seen("static", 60, "RL402", "error"),
    seen("static", 70, "RL101", "info"),
    seen("static", 80, "RL101", "info"),
    seen("static", 100, "RL501"),  # no row: unjudged
    seen("full", 1, "RL902", "info"),  # build failures are coverage, not judged
    seen("full", 2, "RL902", "warning"),  # unless they fail the gate: no row, unjudged
    # line 30 RL201 is not reported in either mode: missed twice
]
COVERED = {"static": {("pkg", "pkg/model.py")}, "full": {("pkg", "pkg/model.py")}}


def test_findings_are_matched_to_rows_and_counted_per_rule_and_mode():
    result = tally(FINDINGS, read_verdicts(VERDICTS), COVERED)
    assert dict(result.counts) == {
        ("RL103", "static", "true"): 1,
        ("RL103", "full", "true"): 1,
        ("RL101", "static", "false"): 1,
        ("RL402", "static", "false"): 1,
        ("RL101", "static", "by-design"): 1,
        ("RL101", "static", "true"): 1,
        ("RL501", "static", "unjudged"): 1,
        ("RL902", "full", "unjudged"): 1,
    }
    assert [(mode, row.first, row.code) for mode, row in result.missed] == [
        ("full", 30, "RL201"), ("full", 80, "RL101"), ("static", 30, "RL201")]
    assert [(item.line, row.kind) for item, row in result.false_alarms] == [(45, "silent"), (60, "false")]
    assert [(item.line, item.code) for item in result.unjudged] == [(100, "RL501"), (2, "RL902")]
    assert [(mode, row.first, row.kind) for mode, row in result.gone] == [
        ("full", 60, "false"), ("full", 70, "by-design"), ("full", 90, "unsure"), ("static", 90, "unsure")]
    assert result.failed


def test_recall_and_precision_per_rule_and_overall():
    result = tally(FINDINGS, read_verdicts(VERDICTS), COVERED)
    assert result.recall("RL103", "static") == (1, 1)
    assert result.recall("RL201", "static") == (0, 1)
    assert result.recall("RL101", "static") == (1, 1)  # the `true` row counts as a defect
    assert result.recall(None, "static") == (2, 3)
    assert result.recall(None, "full") == (1, 3)
    assert result.precision("RL101", "static") == (1, 2)  # by-design is shown, not counted
    assert result.precision("RL402", "static") == (0, 1)
    assert result.precision(None, "static") == (2, 4)
    lines = realworld.rule_lines(result, ["static", "full"])
    assert "| RL101 | static | 1/1 (100 %) | 1/2 (50 %) | 1 | 0 | 0 |" in lines
    assert "| **all** | **static** | **2/3 (67 %)** | **2/4 (50 %)** | 1 | 0 | 1 |" in lines


def test_a_row_of_an_unchecked_file_is_neither_found_nor_missed():
    result = tally([], read_verdicts(VERDICTS), {"static": {("pkg", "pkg/model.py")}})
    assert ("static", 5) not in [(mode, row.first) for mode, row in result.missed]
    assert result.recall(None, "static") == (0, 3)
    assert not result.failed


def test_an_exact_line_row_wins_over_a_range_and_a_verdict_over_a_silent_row():
    rows = read_verdicts("p,f.py,1-20,RL103,silent,a final norm follows\n"
                         "p,f.py,5,RL103,true,this one is real\n")
    assert realworld.matching_row(Seen("static", "p", "f.py", 5, "RL103", "warning", ""), rows).kind == "true"
    assert realworld.matching_row(Seen("static", "p", "f.py", 6, "RL103", "warning", ""), rows).kind == "silent"
    assert realworld.matching_row(Seen("static", "p", "f.py", 21, "RL103", "warning", ""), rows) is None


def test_a_row_for_one_mode_judges_that_mode_only():
    """The full check reports a layer of another file at the checked file's call of it: a true finding in full
    mode that static mode, which reports it where the layer is defined, must not count as missed."""
    rows = read_verdicts("p,f.py,7,RL201@full,true,the layer's BatchNorm at its call\n"
                         "p,f.py,7,RL201@static,silent,static reports it in the layer's own file\n")
    covered = {"static": {("p", "f.py")}, "full": {("p", "f.py")}}
    result = tally([Seen("full", "p", "f.py", 7, "RL201", "warning", "")], rows, covered)
    assert result.recall("RL201", "full") == (1, 1) and result.recall("RL201", "static") == (0, 0)
    assert result.missed == [] and result.silent["static"] == 1 and result.silent["full"] == 0
    broken = tally([Seen("static", "p", "f.py", 7, "RL201", "warning", "")], rows, covered)
    assert [(item.mode, row.kind) for item, row in broken.false_alarms] == [("static", "silent")]
    assert [(mode, row.mode) for mode, row in broken.missed] == [("full", "full")]


@pytest.mark.parametrize("text, message", [
    ("p,f.py,x,RL103,defect,why\n", "bad line"),
    ("p,f.py,9-3,RL103,defect,why\n", "runs backwards"),
    ("p,f.py,1,RL103,maybe,why\n", "bad line"),
    ("p,f.py,1,103,defect,why\n", "bad line"),
    ("p,f.py,1,RL103,defect,\n", "bad line"),
    ("p,f.py,1,RL103,defect\n", "expected 6 fields"),
    ("p,f.py,1,RL103,defect,a\np,f.py,1,RL103,false,b\n", "a second row"),
    ("p,f.py,1,RL103,defect,a\np,f.py,1,RL103@full,false,b\n", "a second row"),
    ("p,f.py,1,RL103@full,true,a\np,f.py,1,RL103@full,false,b\n", "a second row"),
    ("p,f.py,1,RL103@gpu,true,a\n", "bad line"),
])
def test_a_malformed_verdict_file_is_refused(text, message):
    with pytest.raises(BadInput, match=message):
        read_verdicts(text)


def test_every_target_of_the_package_list_is_named_once_and_twelve_packages_are_measured():
    assert len(realworld.PACKAGES) >= 12
    assert len({package.name for package in realworld.PACKAGES}) == len(realworld.PACKAGES)
    for package in realworld.PACKAGES:
        assert package.targets and len(set(package.targets)) == len(package.targets)
        assert all(not target.startswith("/") and ".." not in target for target in package.targets)


def test_setup_installs_torch_first_and_every_other_package_pinned_without_dependencies(tmp_path):
    commands = realworld.setup_commands(tmp_path / "venv", wheels=tmp_path / "no-wheels")
    installs = [command for command in commands if "install" in command]
    assert [command[-1] for command in installs] == ["torch==2.13.0", str(realworld.REQUIREMENTS)]
    assert "--no-deps" in installs[1] and "--no-deps" not in installs[0]
    pins = dict(line.split("==", 1) for line in realworld.REQUIREMENTS.read_text().splitlines()
                if line and not line.startswith("#"))
    assert "torch" not in pins
    for package in realworld.PACKAGES:
        assert pins[package.name] == package.version


def kept_results(tmp_path, findings):
    results = tmp_path / "results"
    results.mkdir()
    (results / "conformer.static.json").write_text(json.dumps(
        {"findings": findings, "checked": ["conformer/conformer.py"], "seconds": 2.0}))
    (results / "conformer.full.jsonl").write_text(json.dumps({"revision": "r", "path": "conformer/conformer.py", "result": {
        "findings": findings, "seconds": 5.0, "models": [
            {"name": "Conformer", "engine": "traced (export)", "notes": []},
            {"name": "ConformerBlock", "engine": "static", "notes": ["static only: build failed (cannot build: TypeError)"]}],
        # the models the full check tried ("traced N of M models"): the share counts these
        "traces": [
            {"path": "conformer/conformer.py", "name": "Conformer", "line": 1, "traced": True, "reason": None},
            {"path": "conformer/conformer.py", "name": "ConformerBlock", "line": 2, "traced": False,
             "reason": "build failed (cannot build: TypeError)"}]}})
        + "\n")
    return results


def run_bench(tmp_path, results, verdict_text, *extra):
    verdicts = tmp_path / "verdicts.csv"
    verdicts.write_text(verdict_text)
    command = [sys.executable, str(ROOT / "bench" / "realworld.py"), "--reuse", "--only", "conformer",
               "--results", str(results), "--verdicts", str(verdicts), *extra]
    return subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)


def test_the_cli_recounts_kept_results_writes_the_table_and_exits_by_the_verdicts(tmp_path):
    finding = {"code": "RL201", "severity": "warning", "message": "BatchNorm", "path": "conformer/conformer.py", "line": 165}
    results = kept_results(tmp_path, [finding])
    output = tmp_path / "BENCHMARKS.md"
    judged = "conformer,conformer/conformer.py,165,RL201,defect,BatchNorm1d in the conv module\n"
    done = run_bench(tmp_path, results, judged, "--write", "--output", str(output))
    assert done.returncode == 0, done.stderr
    assert "| RL201 | static | 1/1 (100 %) | 1/1 (100 %) | 0 | 0 | 0 |" in done.stdout
    assert "| conformer | not measured | 1/1 | 2 | 1 | 1/2 (50 %) |" in done.stdout
    assert "- conformer: 1 × build failed: TypeError" in done.stdout
    written = output.read_text()
    assert realworld.BEGIN_MARK in written and "| RL201 | full | 1/1 (100 %) |" in written

    done = run_bench(tmp_path, results, "")
    assert done.returncode == 1
    assert "- [static] conformer,conformer/conformer.py,165,RL201 warning: BatchNorm" in done.stdout

    done = run_bench(tmp_path, results, "conformer,conformer/conformer.py,165,RL201,maybe,why\n")
    assert done.returncode == 2 and done.stderr.startswith("realworld: verdict file row 1")
    assert "Traceback" not in done.stderr

    done = run_bench(tmp_path, tmp_path / "nowhere", judged)
    assert done.returncode == 2 and "--reuse: no kept results" in done.stderr


def test_a_package_that_does_not_import_is_not_run_in_full_mode_and_says_why(tmp_path):
    finding = {"code": "RL201", "severity": "warning", "message": "BatchNorm", "path": "conformer/conformer.py", "line": 165}
    results = kept_results(tmp_path, [finding])
    (results / "conformer.full.jsonl").unlink()
    (results / "imports.json").write_text(json.dumps({"conformer": "ModuleNotFoundError: No module named 'einops'"}))
    done = run_bench(tmp_path, results, "conformer,conformer/conformer.py,165,RL201,defect,BatchNorm1d\n")
    assert done.returncode == 0, done.stderr
    assert "| conformer | ModuleNotFoundError: No module named 'einops' | 0/1 | 0 | 0 | n/a |" in done.stdout
    assert ("- conformer: 1 files not run: `import conformer` fails in reslint's "
            "environment: ModuleNotFoundError: No module named 'einops'") in done.stdout
    assert "| RL201 | full | n/a | n/a | 0 | 0 | 0 |" in done.stdout  # a file not run is neither found nor missed


def test_the_table_also_counts_without_the_info_rule():
    result = tally(FINDINGS, read_verdicts(VERDICTS), COVERED)
    assert result.recall(None, "static", leave_out=("RL101",)) == (1, 2)
    assert result.precision(None, "static", leave_out=("RL101",)) == (1, 2)
    assert "| **all but RL101 (info)** | **static** | **1/2 (50 %)** | **1/2 (50 %)** | 0 | 0 | 1 |" in realworld.rule_lines(
        result, ["static"])


def test_a_static_run_that_crashed_is_reported_its_defects_missed_and_the_exit_is_1(tmp_path):
    results = kept_results(tmp_path, [])
    (results / "conformer.static.json").write_text(json.dumps(
        {"failure": "reslint exited 1: Traceback", "findings": [], "checked": ["conformer/conformer.py"], "seconds": 1.0}))
    done = run_bench(tmp_path, results, "conformer,conformer/conformer.py,165,RL201,defect,BatchNorm1d\n", "--mode", "static")
    assert done.returncode == 1
    assert "- STATIC RUN FAILED for conformer: reslint exited 1: Traceback" in done.stdout
    assert "- [static] conformer conformer/conformer.py:165 RL201: BatchNorm1d" in done.stdout


TINY_PACKAGE = '''\
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.ff = nn.Linear(dim, dim)

    def forward(self, x):
        return self.norm(x + self.ff(x))
'''


def test_the_full_check_runs_each_file_once_and_resumes_from_the_kept_lines(tmp_path):
    site = tmp_path / "site-packages"
    (site / "tiny").mkdir(parents=True)
    (site / "tiny" / "__init__.py").write_text("")
    (site / "tiny" / "blocks.py").write_text(TINY_PACKAGE)
    package = realworld.Package("tiny", "1.0", "tiny", ("tiny/blocks.py",))
    kept = tmp_path / "tiny.full.jsonl"
    logged: list[str] = []
    document = realworld.run_full(package, site, ["tiny/blocks.py"], 60, kept, "rev1", False, 1, logged.append)
    result = document["files"]["tiny/blocks.py"]
    assert "failure" not in result, result
    assert [(finding["line"], finding["code"]) for finding in result["findings"]] == [(11, "RL101")]
    assert [model["engine"] != "static" for model in result["models"]] == [True]  # built and traced
    assert len(logged) == 1 and len(kept.read_text().splitlines()) == 1

    again = realworld.run_full(package, site, ["tiny/blocks.py"], 60, kept, "rev1", False, 1, logged.append)
    assert len(logged) == 1 and again["files"] == document["files"]  # resumed: no second run
    realworld.run_full(package, site, ["tiny/blocks.py"], 60, kept, "rev2", False, 1, logged.append)
    assert len(logged) == 2  # another reslint revision runs again


def test_must_stay_silent_rows_are_counted_held_or_broken_per_mode():
    result = tally(FINDINGS, read_verdicts(VERDICTS), COVERED)
    assert (result.silent["static"], result.silent_broken["static"]) == (1, 1)
    assert (result.silent["full"], result.silent_broken["full"]) == (1, 0)
    assert "Correct patterns that must stay silent, held: static 0/1 (0 %); full 1/1 (100 %)." in realworld.rule_lines(
        result, ["static", "full"])


def test_models_whose_files_import_are_counted_apart_and_a_file_stopped_before_any_summary_counts_once():
    raised = "not imported: importing the file failed: RuntimeError: operator torchvision::nms does not exist"
    files = {
        "pkg/a.py": {"traces": [{"name": "A", "traced": True, "reason": None}], "models": [{"name": "A"}]},
        "pkg/b.py": {"traces": [{"name": "", "traced": False, "reason": raised}], "models": [{"name": "B"}, {"name": "C"}],
                     "findings": [{"code": "RL902", "message": raised.removeprefix("not imported: ")}]},
        "pkg/c.py": {"traces": [{"name": "", "traced": False, "reason": "importing the file: timed out after 120 s"}],
                     "models": [], "findings": [{"code": "RL902", "message": "importing the file: timed out after 120 s"}]},
    }
    run = realworld.PackageRun(realworld.Package("pkg", "1", "pkg", ("pkg",)), "ok", {"full": {"files": files}})
    lines, _ = realworld.coverage_lines([run])
    assert "| pkg | ok | 1/3 | 4 | 1 | 1/4 (25 %) |" in lines
    assert "| **all packages** | | | **4** | **1** | **1/4 (25 %)** |" in lines
    assert "| **models whose files import** | | | **2** | **1** | **1/2 (50 %)** |" in lines
