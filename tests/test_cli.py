from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from cli_support import (
    BATCHNORM, BATCHNORM_LINE, CLEAN, POST_LN, POST_LN_LINE, REPO_ROOT, SYNTAX_ERROR, codes, run_module,
    run_reslint, write,
)
from reslint import api, cli
from reslint.catalog import RULES
from reslint.cli import TORCH_MISSING

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib


@dataclass
class Outcome:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write(tmp_path, {"post.py": POST_LN, "bn.py": BATCHNORM, "clean.py": CLEAN})


def check(cwd: Path, *args: str):
    """A real `reslint check --static` process."""
    return run_reslint("check", "--static", "--no-cache", *args, cwd=cwd)


@pytest.fixture
def check_here(monkeypatch, capsys):
    """`reslint check --static` in this process: same code path as the console script, faster."""
    monkeypatch.setenv("NO_COLOR", "1")

    def invoke(cwd: Path, *args: str) -> Outcome:
        monkeypatch.chdir(cwd)
        status = cli.run(["check", "--static", "--no-cache", "--jobs", "1", *args])
        captured = capsys.readouterr()
        return Outcome(status, captured.out, captured.err)

    return invoke


def one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("reslint: error: ")
    return lines[0]


# exit codes

def test_clean_files_exit_0(tmp_path):
    write(tmp_path, {"clean.py": CLEAN})
    result = check(tmp_path)
    expected = "All checks passed! (1 file, 1 skipped: no model or training code)\n"
    assert (result.returncode, result.stdout, result.stderr) == (0, expected, "")


def test_warnings_fail_by_default(project):
    result = check(project)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    # Each finding with its source line under it (ruff's full output), a caret at the column.
    assert lines[:11] == [
        f"bn.py:{BATCHNORM_LINE}:21: RL201 [warning] " + lines[0].split("[warning] ")[1],
        "  |",
        f"{BATCHNORM_LINE} |         self.norm = nn.BatchNorm1d(16)",
        "  |                     ^ RL201",
        "  |",
        "",
        f"post.py:{POST_LN_LINE}:26: RL101 [info] " + lines[6].split("[info] ")[1],
        "   |",
        f"{POST_LN_LINE} |         return self.norm(x + self.ff(x))",
        "   |                          ^ RL101",
        "   |",
    ]
    assert result.stdout.endswith(
        "Found 2 findings (0 errors, 1 warning, 1 info) in 3 files (1 skipped: no model or training code).\n"
        "[*] 0 fixable with --fix (1 more with --unsafe-fixes).\n")


@pytest.mark.parametrize(
    ("files", "fail_on", "status"),
    [
        ({"post.py": POST_LN}, None, 0),
        ({"post.py": POST_LN}, "info", 1),
        ({"post.py": POST_LN}, "INFO", 1),
        ({"bn.py": BATCHNORM}, "error", 0),
        ({"bn.py": BATCHNORM, "broken.py": SYNTAX_ERROR}, "error", 1),
        ({"bn.py": BATCHNORM}, "warning", 1),
    ],
)
def test_fail_on(tmp_path, files, fail_on, status, check_here):
    write(tmp_path, files)
    result = check_here(tmp_path, *(["--fail-on", fail_on] if fail_on else []))
    assert result.returncode == status, result.stdout + result.stderr


def test_exit_zero_keeps_the_report(project, check_here):
    result = check_here(project, "--exit-zero", "--fail-on", "info")
    assert result.returncode == 0
    assert "Found 2 findings" in result.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--select", "RL1"], [("post.py", "RL101")]),
        (["--select", "rl201"], [("bn.py", "RL201")]),
        (["--select", "RL101,RL201"], [("bn.py", "RL201"), ("post.py", "RL101")]),
        (["--select", "RL101", "--select", "RL2"], [("bn.py", "RL201")] + [("post.py", "RL101")]),
        (["--ignore", "RL2"], [("post.py", "RL101")]),
        (["--ignore", "RL10"], [("bn.py", "RL201")]),
        (["--select", "RL1,RL2", "--ignore", "RL101"], [("bn.py", "RL201")]),
        (["--select", "ALL", "--ignore", "RL1,RL2"], []),
    ],
)
def test_select_and_ignore_with_prefixes(project, args, expected, check_here):
    result = check_here(project, "--output-format", "json", *args)
    assert [(path, code) for path, code, _ in codes(result.stdout)] == expected


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--select", "RL999"], "reslint: error: --select: unknown rule code or prefix: 'RL999'"),
        (["--ignore", "RL1,XX"], "reslint: error: --ignore: unknown rule code or prefix: 'XX'"),
        (["missing.py"], "reslint: error: path does not exist: missing.py"),
        (["--config", "nope.toml"], "reslint: error: config file not found: nope.toml"),
        (["--output-format", "xml"], "reslint: error: Invalid value for '--output-format'"),
        (["--fail-on", "fatal"], "reslint: error: Invalid value for '--fail-on'"),
        (["--jobs", "0"], "reslint: error: Invalid value for '--jobs'"),
        (["--no-such-flag"], "reslint: error: No such option"),
        (["--statistics", "--output-format", "sarif"], "reslint: error: --statistics works with --output-format text, concise or json"),
        (["--select", ""], "reslint: error: --select: no rule code given (expected codes or prefixes, e.g. RL1,RL201)"),
        (["--extend-select", " , "], "reslint: error: --extend-select: no rule code given"),
        (["--select", "RL601"], "reslint: error: --select: only probe rules selected (RL601): `reslint probe` reports them, check never does"),
        (["--extend-ignore", "RL77"], "reslint: error: --extend-ignore: unknown rule code or prefix: 'RL77'"),
        (["--model", "post.py:Block(d="], "reslint: error: --model 'post.py:Block(d=': EXPR is not a Python expression: '(' was never closed"),
        (["--inputs", "long[2,64"], "reslint: error: --inputs 'long[2,64': neither a shape spec such as long[2,64]<50257 nor a Python expression"),
        (["--stdin-filename", "m.py", "post.py"], "reslint: error: --stdin-filename names the file read from stdin: pass - as the PATH"),
        (["-", "post.py"], "reslint: error: - (stdin) cannot be combined with other PATHs"),
        (["--output-file", "no/such/dir/out.txt"], "reslint: error: --output-file: cannot write no/such/dir/out.txt: No such file or directory"),
    ],
)
def test_usage_errors_exit_2_with_one_line(project, args, message, check_here):
    result = check_here(project, *args)
    assert result.returncode == 2
    assert one_error_line(result.stderr).startswith(message)
    assert result.stdout == ""


def test_unknown_subcommand_and_bare_invocation_exit_2(tmp_path):
    result = run_reslint("lint", cwd=tmp_path)
    assert result.returncode == 2
    assert one_error_line(result.stderr) == "reslint: error: No such command 'lint'."
    bare = run_reslint(cwd=tmp_path)
    assert bare.returncode == 2
    assert bare.stdout.startswith("Usage: reslint")
    assert one_error_line(bare.stderr) == "reslint: error: missing command: one of check, clean, probe, rule, rules"


def test_syntax_error_is_rl901_and_other_files_are_still_checked(tmp_path):
    write(tmp_path, {"a_broken.py": SYNTAX_ERROR, "post.py": POST_LN})
    result = check(tmp_path, "--output-format", "json")
    assert result.returncode == 1
    document = json.loads(result.stdout)
    assert [(f["path"], f["code"]) for f in document["findings"]] == [("a_broken.py", "RL901"), ("post.py", "RL101")]
    assert document["findings"][0]["message"].startswith("syntax error")
    assert document["summary"]["files"] == 2


def test_undecodable_file_is_rl901(tmp_path, check_here):
    write(tmp_path, {"latin.py": b"# -*- coding: utf-8 -*-\nname = '\xff\xfe'\n", "clean.py": CLEAN})
    result = check_here(tmp_path)
    assert result.returncode == 1
    assert result.stdout.startswith("latin.py:1:1: RL901 [error] cannot decode file")


def test_no_python_files_is_a_warning_not_an_error(tmp_path, check_here):
    (tmp_path / "README.md").write_text("hi\n")
    result = check_here(tmp_path)
    assert result.returncode == 0
    assert result.stderr == "reslint: warning: no Python files to check\n"
    assert result.stdout == "All checks passed! (0 files)\n"


def test_statistics_replaces_the_finding_lines(project, check_here):
    result = check_here(project, "--statistics")
    assert result.returncode == 1
    assert result.stdout.splitlines()[:2] == ["1  RL101  post-ln", "1  RL201  batchnorm-in-sequence-model"]
    assert ": RL" not in result.stdout


def test_github_and_sarif_formats_run_end_to_end(project, check_here):
    github = check_here(project, "--output-format", "github")
    assert github.stdout.splitlines()[0].startswith(f"::warning file=bn.py,line={BATCHNORM_LINE},col=21,title=RL201::")
    sarif = json.loads(check_here(project, "--output-format", "sarif").stdout)
    assert [result["ruleId"] for result in sarif["runs"][0]["results"]] == ["RL201", "RL101"]


def test_python_dash_m_works(project):
    result = run_module("check", "--static", "--no-cache", "--select", "RL1", cwd=project)
    assert result.returncode == 0
    assert "RL101" in result.stdout


# parallelism and cache

def many_files(tmp_path: Path) -> Path:
    files = {}
    for index in range(6):
        files[f"pkg{index % 2}/post_{index}.py"] = POST_LN
        files[f"pkg{index % 2}/bn_{index}.py"] = BATCHNORM
    files["pkg0/broken.py"] = SYNTAX_ERROR
    return write(tmp_path, files)


def test_json_is_identical_across_jobs(tmp_path):
    many_files(tmp_path)
    serial = check(tmp_path, "--output-format", "json", "--jobs", "1")
    parallel = check(tmp_path, "--output-format", "json", "--jobs", "2")
    assert serial.returncode == parallel.returncode == 1
    assert serial.stdout == parallel.stdout
    assert len(json.loads(serial.stdout)["findings"]) == 13


def test_cache_hit_equals_cold_run(tmp_path):
    many_files(tmp_path)
    args = ("check", "--static", "--output-format", "json", "--fail-on", "error")
    cold = run_reslint(*args, cwd=tmp_path)
    cache_dir = tmp_path / ".reslint_cache"
    assert (cache_dir / ".gitignore").read_text().splitlines()[-1] == "*"
    assert (cache_dir / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    entries = sorted(cache_dir.glob("files/*/*.json"))
    assert len(entries) == 13
    warm = run_reslint(*args, cwd=tmp_path)
    assert (warm.returncode, warm.stdout) == (cold.returncode, cold.stdout)
    assert sorted(cache_dir.glob("files/*/*.json")) == entries
    uncached = check(tmp_path, "--output-format", "json", "--fail-on", "error")
    assert uncached.stdout == cold.stdout


def test_cache_follows_edits_and_is_not_written_with_no_cache(tmp_path):
    write(tmp_path, {"model.py": POST_LN})
    args = ("check", "--static", "--output-format", "json")
    assert codes(run_reslint(*args, cwd=tmp_path).stdout) == [("model.py", "RL101", POST_LN_LINE)]
    (tmp_path / "model.py").write_text(CLEAN)
    assert codes(run_reslint(*args, cwd=tmp_path).stdout) == []
    assert len(list((tmp_path / ".reslint_cache").glob("files/*/*.json"))) == 1

    fresh = tmp_path / "fresh"
    write(fresh, {"model.py": POST_LN})
    run_reslint(*args, "--no-cache", cwd=fresh)
    assert not (fresh / ".reslint_cache").exists()


def test_corrupt_cache_entries_are_ignored(tmp_path):
    write(tmp_path, {"model.py": POST_LN})
    args = ("check", "--static", "--output-format", "json")
    cold = run_reslint(*args, cwd=tmp_path).stdout
    for entry in (tmp_path / ".reslint_cache").glob("files/*/*.json"):
        entry.write_text("{not json")
    assert run_reslint(*args, cwd=tmp_path).stdout == cold


# torch requirement

def fake_torch(directory: Path, body: str) -> dict:
    (directory / "torch").mkdir()
    (directory / "torch" / "__init__.py").write_text(body)
    return {"PYTHONPATH": str(directory)}


def test_full_check_without_torch_is_a_usage_error(project, tmp_path_factory):
    # Shadow torch, in case the environment has it installed.
    hidden = fake_torch(tmp_path_factory.mktemp("no_torch"), "raise ImportError('No module named torch')\n")
    result = run_reslint("check", "--no-cache", cwd=project, env=hidden)
    assert result.returncode == 2
    assert result.stderr == f"reslint: error: {TORCH_MISSING}\n"
    assert TORCH_MISSING == (
        "the full check needs PyTorch: install it (pip install 'reslint[torch]') or run with --static"
    )


def test_full_check_with_torch_runs_the_static_engine(project, tmp_path_factory):
    present = fake_torch(tmp_path_factory.mktemp("fake_torch"), "")
    result = run_reslint("check", "--no-cache", "--output-format", "json", cwd=project, env=present)
    assert result.returncode == 1, result.stderr
    document = json.loads(result.stdout)
    assert {finding["code"] for finding in document["findings"]} == {"RL101", "RL201"}
    assert {model["engine"] for model in document["models"]} <= {"static"}


# internal errors (in process, with a failing analysis)

def test_internal_error_in_one_file_exits_2_with_one_line(project, monkeypatch, capsys):
    import reslint.analysis

    real = reslint.analysis.analyze_file

    def explode_on_bn(path, data, settings, source_path=None):
        if path == "bn.py":
            raise RuntimeError("engine bug")
        return real(path, data, settings, source_path)

    monkeypatch.setattr(reslint.analysis, "analyze_file", explode_on_bn)
    monkeypatch.chdir(project)
    status = cli.run(["check", "--static", "--no-cache", "--jobs", "1", "--output-format", "json"])
    captured = capsys.readouterr()
    assert status == 2
    assert one_error_line(captured.err) == (
        "reslint: error: internal error while checking bn.py: RuntimeError: engine bug; "
        "run with --verbose for the traceback"
    )
    assert codes(captured.out) == [("post.py", "RL101", POST_LN_LINE)]

    status = cli.run(["check", "--static", "--no-cache", "--jobs", "1", "--verbose"])
    captured = capsys.readouterr()
    assert status == 2
    assert "Traceback (most recent call last)" in captured.err
    assert captured.err.splitlines()[-1].startswith("reslint: error: internal error while checking bn.py")


def test_unexpected_exception_outside_files_is_one_line(project, monkeypatch, capsys):
    def broken(*args, **kwargs):
        raise KeyError("boom")

    monkeypatch.setattr(api, "check_sources", broken)  # `reslint check` runs reslint.api.check
    monkeypatch.chdir(project)
    assert cli.run(["check", "--static"]) == 2
    assert one_error_line(capsys.readouterr().err) == "reslint: error: internal error: KeyError: 'boom'"


# rules, rule, version

def test_rules_lists_every_code():
    result = run_reslint("rules", cwd=REPO_ROOT)
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["code", "name", "severity", "summary"]
    assert [line.split()[0] for line in lines[1:]] == list(RULES)
    assert lines[4].split()[:3] == ["RL101", "post-ln", "info"]


@pytest.mark.parametrize("name", ["RL101", "rl101", "post-ln"])
def test_rule_prints_the_doc_page(tmp_path, name):
    result = run_reslint("rule", name, cwd=tmp_path)
    assert result.returncode == 0
    page = REPO_ROOT / "rules" / "RL101.md"
    if page.is_file():
        assert result.stdout == page.read_text(encoding="utf-8").rstrip("\n") + "\n"
    else:
        assert result.stdout.startswith("# RL101 post-ln")


def test_rule_falls_back_to_the_catalog(monkeypatch, capsys):
    import reslint.docs

    monkeypatch.setattr(reslint.docs, "DOC_DIRS", ())
    assert cli.run(["rule", "RL603"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# RL603 non-finite-gradient\n")
    assert "Default severity: error" in out and RULES["RL603"].fix in out


def test_unknown_rule_exits_2(tmp_path):
    result = run_reslint("rule", "RL999", cwd=tmp_path)
    assert result.returncode == 2
    assert one_error_line(result.stderr) == "reslint: error: unknown rule code: 'RL999' (run 'reslint rules' for the list)"


def test_version(tmp_path):
    result = run_reslint("--version", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (0, "reslint 0.1.0\n")


# packaging

def test_every_package_is_listed_for_the_wheel():
    """pyproject lists packages explicitly (to map rules/ to reslint.ruledocs); catch forgotten ones."""
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    on_disk = {
        ".".join(path.parent.relative_to(REPO_ROOT).parts)
        for path in (REPO_ROOT / "reslint").rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert on_disk <= listed
    assert config["package-dir"]["reslint.ruledocs"] == "rules"
    assert "*.md" in config["package-data"]["reslint.ruledocs"]


# the repository's fixtures, end to end

def golden_findings() -> list[tuple[str, int, int, str, str]]:
    """Every fixture's golden findings (`LINE:COL CODE message`), deduplicated per (path, line, code) as check
    does; a finding in another file (`PATH:LINE:COL ...`, RL301 in a training script) is left out."""
    findings = []
    for expected_file in sorted((REPO_ROOT / "fixtures").rglob("*.expected")):
        path = expected_file.with_suffix(".py").relative_to(REPO_ROOT).as_posix()
        for line in expected_file.read_text(encoding="utf-8").splitlines():
            found = re.match(r"(\d+):(\d+) (RL\d+) (.*)$", line)
            if found:
                findings.append((path, int(found[1]), int(found[2]), found[3], found[4]))
    findings.sort()
    seen, unique = set(), []
    for path, row, column, code, message in findings:
        if (path, row, code) not in seen:
            seen.add((path, row, code))
            unique.append((path, row, column, code, message))
    return unique


# A hang guard, not a speed test: the run needs about 15 CPU-s, but at a load of 13 on 2 cores it took 128 s of
# wall time, past the 120 s every other CLI run gets.
FIXTURES_RUN_LIMIT = 900


def test_check_on_the_fixtures_reports_their_golden_findings(tmp_path):
    if not (REPO_ROOT / "fixtures").is_dir():
        pytest.skip("no fixtures in this checkout")
    isolated = tmp_path / "reslint.toml"  # keep the repository's own [tool.reslint], if any, out of it
    isolated.write_text("")
    result = run_reslint(
        "check", "--static", "--no-cache", "--jobs", "2", "--output-format", "json", "--config", str(isolated),
        "fixtures", cwd=REPO_ROOT, timeout=FIXTURES_RUN_LIMIT,
    )
    assert result.returncode == 1, result.stderr
    document = json.loads(result.stdout)
    # fixtures/trace/ pins the full (traced) check, not --static: compare the static fixtures only
    actual = [(f["path"], f["line"], f["column"], f["code"], f["message"]) for f in document["findings"]
              if not f["path"].startswith("fixtures/trace/")]
    assert sorted(actual) == [g for g in golden_findings() if not g[0].startswith("fixtures/trace/")]
    assert {"fixtures/errors/syntax_error.py", "fixtures/errors/not_utf8.py"} <= {
        path for path, _, _, code, _ in actual if code == "RL901"
    }
    assert document["summary"]["files"] == len(list((REPO_ROOT / "fixtures").rglob("*.py")))


# runner details (in process, with a stand-in analysis)

def test_unreadable_file_is_rl901_and_the_run_goes_on(tmp_path, check_here):
    write(tmp_path, {"post.py": POST_LN})
    (tmp_path / "dangling.py").symlink_to(tmp_path / "gone.py")
    result = check_here(tmp_path, "--output-format", "json")
    assert result.returncode == 1
    findings = json.loads(result.stdout)["findings"]
    assert [(f["path"], f["code"]) for f in findings] == [("dangling.py", "RL901"), ("post.py", "RL101")]
    assert findings[0]["message"] == "cannot read file: No such file or directory"


def test_one_finding_per_path_line_and_code_and_models_sorted(tmp_path, monkeypatch, check_here):
    import reslint.analysis
    from reslint.findings import FileResult, Finding, ModelSummary

    def stand_in(path, data, settings, source_path=None):
        return FileResult(path, [
            Finding("RL101", "from the trace engine", path, 3, 9, engine="trace"),
            Finding("RL101", "from the static engine", path, 3, 5),
            Finding("RL201", "other code, same line", path, 3, 5),
            Finding("RL101", "other line", path, 4, 1),
        ], [ModelSummary(path, "Zeta", 20, placement="post"), ModelSummary(path, "Alpha", 10, placement="pre")])

    monkeypatch.setattr(reslint.analysis, "analyze_file", stand_in)
    write(tmp_path, {"a.py": CLEAN, "b.py": CLEAN})
    document = json.loads(check_here(tmp_path, "--output-format", "json").stdout)
    assert [(f["path"], f["line"], f["column"], f["code"]) for f in document["findings"]] == [
        ("a.py", 3, 5, "RL101"), ("a.py", 3, 5, "RL201"), ("a.py", 4, 1, "RL101"),
        ("b.py", 3, 5, "RL101"), ("b.py", 3, 5, "RL201"), ("b.py", 4, 1, "RL101"),
    ]
    assert [(m["path"], m["name"]) for m in document["models"]] == [
        ("a.py", "Alpha"), ("a.py", "Zeta"), ("b.py", "Alpha"), ("b.py", "Zeta"),
    ]


def test_per_file_ignores_select_and_suppressions_compose(tmp_path, check_here):
    write(tmp_path, {
        "pyproject.toml": "[tool.reslint]\nignore = ['RL3']\n[tool.reslint.per-file-ignores]\n'legacy/*.py' = ['RL1']\n",
        "legacy/old.py": POST_LN + BATCHNORM.replace("import torch.nn as nn\n", ""),
        "new.py": POST_LN,
        "quiet.py": POST_LN.replace("self.ff(x))\n", "self.ff(x))  # noqa\n"),
    })
    result = check_here(tmp_path, "--output-format", "json", "--fail-on", "info")
    assert [(path, code) for path, code, _ in codes(result.stdout)] == [("legacy/old.py", "RL201"), ("new.py", "RL101")]


def test_cache_io_errors_are_ignored(tmp_path, monkeypatch, capsys):
    write(tmp_path, {"model.py": POST_LN, ".reslint_cache": "a file where the cache directory should be\n"})
    monkeypatch.chdir(tmp_path)
    args = ["check", "--static", "--jobs", "1", "--output-format", "json", "--fail-on", "error"]
    assert cli.run([*args, "--no-cache"]) == 0
    uncached = capsys.readouterr()
    assert cli.run(args) == 0
    cached = capsys.readouterr()
    assert (cached.out, cached.err) == (uncached.out, "")
    assert codes(cached.out) == [("model.py", "RL101", POST_LN_LINE)]


def test_file_results_round_trip_through_the_cache_format():
    from reslint.findings import FileResult, Finding, ModelSummary, StackSummary

    result = FileResult("m.py", [
        Finding("RL101", "post", "m.py", 3, 2, "Block", "static"),
        Finding("RL102", "policy", "m.py", 4, 1, severity="error"),
        Finding("RL201", "explicit default", "m.py", 5, 1, severity="warning"),
    ], [ModelSummary("m.py", "M", 1, (StackSummary("self.h", "Block", None, "pre", False, 2),), "post", "static", ("n",))])
    again = FileResult.from_dict(result.to_dict())
    assert again.findings[:2] == result.findings[:2]
    assert again.findings[2].effective_severity == "warning"
    assert again.models == result.models


def test_a_console_that_cannot_encode_the_output_does_not_crash(tmp_path):
    write(tmp_path, {"möd.py": POST_LN})
    text = run_reslint("check", "--static", "--no-cache", cwd=tmp_path, env={"PYTHONIOENCODING": "ascii"})
    assert (text.returncode, text.stderr) == (0, "")
    assert text.stdout.startswith("m\\xf6d.py:")
    machine = run_reslint("check", "--static", "--no-cache", "--output-format", "json", cwd=tmp_path, env={"PYTHONIOENCODING": "ascii"})
    assert codes(machine.stdout) == [("möd.py", "RL101", POST_LN_LINE)]


# ruff's flags and output (issue 15)

def run_with_terminal_stderr(*args: str, cwd: Path) -> tuple[int, str, str]:
    """A real `reslint` process whose stderr is a terminal (a pty) and whose stdout is a pipe."""
    import os
    import pty
    import subprocess
    import tempfile

    from cli_support import RESLINT

    master, terminal = pty.openpty()
    environment = {**os.environ, "NO_COLOR": "1", "TERM": "xterm"}
    # stdout to a file, not a pipe: nobody drains a pipe while the terminal is read (a SARIF fills one)
    out = tempfile.TemporaryFile()
    process = subprocess.Popen([str(RESLINT), *args], cwd=cwd, env=environment, stdout=out, stderr=terminal)
    os.close(terminal)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the process closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    status = process.wait(timeout=120)
    out.seek(0)
    return status, out.read().decode(), b"".join(chunks).decode()


def test_progress_on_a_terminal_only_for_human_output(project):
    status, stdout, stderr = run_with_terminal_stderr("check", "--static", "--no-cache", "--jobs", "1", ".", cwd=project)
    assert status == 1
    assert stderr.startswith("\r\x1b[K[0/3] parsing")
    assert "\r\x1b[K[3/3] parsing" in stderr and "\r\x1b[K[3/3] linking" in stderr
    assert stderr.endswith("\r\x1b[K")  # the line is wiped before the report
    assert "\r" not in stdout and stdout.startswith("bn.py:")
    for quiet in (["--output-format", "json"], ["--output-format", "sarif"], ["-q"]):
        status, stdout, stderr = run_with_terminal_stderr("check", "--static", "--no-cache", *quiet, ".", cwd=project)
        assert (status, stderr) == (1, ""), quiet


def test_models_summary_only_with_show_models_or_verbose(project, check_here):
    default = check_here(project)
    assert "Models:" not in default.stdout
    total, fixes = default.stdout.splitlines()[-2:]
    assert total.startswith("Found 2 findings")
    assert fixes == "[*] 0 fixable with --fix (1 more with --unsafe-fixes)."
    for flag in ("--show-models", "--verbose"):
        shown = check_here(project, flag).stdout.splitlines()
        assert shown[shown.index("Models:") + 1] == "  post.py:4: Block: Post-LN [static]", flag


def test_quiet_prints_the_findings_only(project, check_here):
    result = check_here(project, "-q", "--output-format", "concise", "--show-models")
    assert result.returncode == 1
    assert [line.split(" [")[0] for line in result.stdout.splitlines()] == [
        f"bn.py:{BATCHNORM_LINE}:21: RL201", f"post.py:{POST_LN_LINE}:26: RL101"]
    assert check_here(project, "--quiet", "--select", "RL3").stdout == ""


def test_concise_is_one_line_per_finding_then_the_total(project, check_here):
    lines = check_here(project, "--output-format", "concise").stdout.splitlines()
    assert [line.split(" ")[0] for line in lines[:2]] == [f"bn.py:{BATCHNORM_LINE}:21:", f"post.py:{POST_LN_LINE}:26:"]
    assert lines[2:] == ["", "Found 2 findings (0 errors, 1 warning, 1 info) in 3 files (1 skipped: no model or training code).",
                         "[*] 0 fixable with --fix (1 more with --unsafe-fixes)."]


def test_code_frame_escapes_control_characters_and_expands_tabs(tmp_path, check_here):
    source = POST_LN.replace("return self.norm(x + self.ff(x))", "return self.norm(x + self.ff(x))\t# \x1b[2J")
    write(tmp_path, {"post.py": source})
    lines = check_here(tmp_path, "--select", "RL101").stdout.splitlines()
    assert lines[1:4] == [
        "   |",
        f"{POST_LN_LINE} |         return self.norm(x + self.ff(x))    # \\x1b[2J",
        "   |                          ^ RL101",
    ]


def test_extend_select_and_extend_ignore_extend_the_config(project, check_here):
    (project / "pyproject.toml").write_text("[tool.reslint]\nselect = ['RL2']\n")
    assert codes(check_here(project, "--output-format", "json").stdout) == [("bn.py", "RL201", BATCHNORM_LINE)]
    extended = check_here(project, "--output-format", "json", "--extend-select", "RL101")
    assert codes(extended.stdout) == [("bn.py", "RL201", BATCHNORM_LINE), ("post.py", "RL101", POST_LN_LINE)]
    replaced = check_here(project, "--output-format", "json", "--select", "RL101")
    assert codes(replaced.stdout) == [("post.py", "RL101", POST_LN_LINE)]
    (project / "pyproject.toml").write_text("[tool.reslint]\nignore = ['RL101']\n")
    assert codes(check_here(project, "--output-format", "json", "--extend-ignore", "RL2").stdout) == []


def test_exclude_and_extend_exclude_on_the_command_line(project, check_here):
    (project / "pyproject.toml").write_text("[tool.reslint]\nexclude = ['post.py']\n")
    assert codes(check_here(project, "--output-format", "json").stdout) == [("bn.py", "RL201", BATCHNORM_LINE)]
    assert codes(check_here(project, "--output-format", "json", "--extend-exclude", "bn.py").stdout) == []
    replaced = check_here(project, "--output-format", "json", "--exclude", "bn.py,clean.py")
    assert codes(replaced.stdout) == [("post.py", "RL101", POST_LN_LINE)]


def test_output_file_gets_the_report_and_stdout_nothing(project):
    result = check(project, "--output-format", "json", "--output-file", "report.json")
    assert (result.returncode, result.stdout, result.stderr) == (1, "", "")
    assert codes((project / "report.json").read_text()) == [("bn.py", "RL201", BATCHNORM_LINE), ("post.py", "RL101", POST_LN_LINE)]


def test_stdin_is_checked_as_the_stdin_filename(project):
    import subprocess

    from cli_support import RESLINT

    def from_stdin(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(RESLINT), "check", "--static", *args], input=BATCHNORM, cwd=project,
                              capture_output=True, text=True, timeout=120, env={**__import__("os").environ, "NO_COLOR": "1"})

    named = from_stdin("-", "--stdin-filename", "pkg/tagger.py")
    assert named.returncode == 1, named.stderr
    lines = named.stdout.splitlines()
    assert lines[0].startswith(f"pkg/tagger.py:{BATCHNORM_LINE}:21: RL201 [warning] ")
    assert lines[2] == f"{BATCHNORM_LINE} |         self.norm = nn.BatchNorm1d(16)"  # the frame shows stdin's text
    assert lines[-1] == "Found 1 finding (0 errors, 1 warning, 0 infos) in 1 file."
    assert not (project / ".reslint_cache").exists()
    (project / "pyproject.toml").write_text("[tool.reslint.per-file-ignores]\n\"pkg/*\" = ['RL201']\n")
    assert from_stdin("-", "--stdin-filename", "pkg/tagger.py").returncode == 0
    bare = from_stdin("-", "--output-format", "json")
    assert codes(bare.stdout) == [("-", "RL201", BATCHNORM_LINE)]


def test_model_file_outside_the_paths_is_checked(tmp_path, check_here):
    write(tmp_path, {"src/bn.py": BATCHNORM, "other/post.py": POST_LN})
    only_model = check_here(tmp_path, "--output-format", "json", "--model", "other/post.py:Block(8)")
    assert codes(only_model.stdout) == [("other/post.py", "RL101", POST_LN_LINE)]  # not all of .
    both = check_here(tmp_path, "--output-format", "json", "--model", "other/post.py:Block(8)", "src")
    assert codes(both.stdout) == [("other/post.py", "RL101", POST_LN_LINE), ("src/bn.py", "RL201", BATCHNORM_LINE)]


def test_unknown_code_in_a_suppression_comment_is_rl905(tmp_path, check_here):
    source = POST_LN.replace("return self.norm(x + self.ff(x))", "return self.norm(x + self.ff(x))  # noqa: RL999")
    write(tmp_path, {"post.py": source, "other.py": "import torch  # noqa: E501, F401, RL1\n"})
    document = json.loads(check_here(tmp_path, "--output-format", "json").stdout)
    assert [(f["path"], f["code"], f["line"], f["column"], f["severity"]) for f in document["findings"]] == [
        ("post.py", "RL101", POST_LN_LINE, 26, "info"), ("post.py", "RL905", POST_LN_LINE, 43, "warning")]
    assert document["findings"][1]["message"] == (
        "`# noqa: RL999` names no reslint rule (RL999), so it suppresses nothing; `reslint rules` lists the codes")
    silenced = source.replace("# noqa: RL999", "# noqa: RL999, RL905")
    write(tmp_path, {"post.py": silenced})
    assert codes(check_here(tmp_path, "--output-format", "json").stdout) == [("post.py", "RL101", POST_LN_LINE)]


def test_rules_as_json():
    result = run_reslint("rules", "--output-format", "json", cwd=REPO_ROOT)
    assert result.returncode == 0
    rules = json.loads(result.stdout)
    assert [rule["code"] for rule in rules] == list(RULES)
    assert rules[0] == {"code": "RL001", "name": "residual-shape-mismatch", "severity": "error",
                        "summary": RULES["RL001"].summary, "fix": RULES["RL001"].fix, "engine": "any",
                        "url": RULES["RL001"].doc_url}


def test_help_does_not_truncate_and_verbose_says_what_it_lists():
    import os

    result = run_reslint("--help", cwd=REPO_ROOT, env={"COLUMNS": "80"})
    commands = result.stdout[result.stdout.index("Commands:"):]
    assert "..." not in commands and len(commands.splitlines()) == 1 + len(cli.cli.commands)
    check_help = " ".join(run_reslint("check", "--help", cwd=REPO_ROOT, env={"COLUMNS": "200"}).stdout.split())
    assert "--verbose Also list the skipped paths and the model summary" in check_help
    assert os.environ.get("COLUMNS") != "80" or True


def test_github_output_prepares_no_fixes(project, check_here, monkeypatch):
    """GitHub annotations show no offered fix: a check for them skips preparing fixes (a tenth of a static run),
    with the same annotations and exit status."""
    import reslint.fixes.worker

    prepared = []
    real = reslint.fixes.worker.worker_fixes
    monkeypatch.setattr(reslint.fixes.worker, "worker_fixes", lambda *args: prepared.append(args) or real(*args))
    github = check_here(project, "--output-format", "github")
    assert prepared == []
    text = check_here(project, "--output-format", "concise")
    assert prepared and "[*]" in text.stdout
    assert github.returncode == text.returncode == 1
    assert [line.split("title=")[1].split("::")[0] for line in github.stdout.splitlines()] == [
        line.split()[1] for line in text.stdout.splitlines() if ".py:" in line]
