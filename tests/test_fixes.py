"""`reslint check --fix`: every fix applied through the CLI and compared byte for byte with its
fixture (`fixtures/fixes/<rule>/before.py` → `after.py`), idempotence, composition, safe vs
unsafe, --diff, --fix-only, noqa, the fixable/unfixable config keys, refusal of forms the fixes
do not recognise, fix availability in text/JSON/SARIF, and the models still building and
tracing after the unsafe fixes."""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cli_support import REPO_ROOT, RESLINT, run_reslint

FIXES = REPO_ROOT / "fixtures" / "fixes"
SAFE_RULES = ("RL003", "RL401", "RL403")
UNSAFE_RULES = ("RL101", "RL103", "RL201", "RL301", "RL501")
STATIC = ("check", "--static", "--no-cache", "--jobs", "1")
FULL = ("check", "--no-cache", "--jobs", "1")


def run_full(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The full check: it traces the file, and traces it again with the fixes: slower than run_reslint allows."""
    environment = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run([str(RESLINT), *FULL, *args], cwd=cwd, env=environment, capture_output=True, text=True,
                          timeout=600)


def before(name: str) -> str:
    return (FIXES / name / "before.py").read_text(encoding="utf-8")


def after(name: str) -> str:
    return (FIXES / name / "after.py").read_text(encoding="utf-8")


def project(tmp_path: Path, name: str, text: str | None = None) -> Path:
    (tmp_path / "model.py").write_text(before(name) if text is None else text, encoding="utf-8")
    return tmp_path / "model.py"


def golden_count(name: str, which: str) -> int:
    lines = (FIXES / name / f"{which}.expected").read_text().splitlines()
    return sum(1 for line in lines if " RL" in line and not line.startswith(("#", "summary:")))


def fixed_count(name: str) -> int:
    return golden_count(name, "before") - golden_count(name, "after")


@pytest.mark.parametrize("name", [*SAFE_RULES, *UNSAFE_RULES, "composed"])
def test_fix_turns_before_into_after_byte_for_byte(tmp_path, name):
    model = project(tmp_path, name)
    flags = ("--fix",) if name in SAFE_RULES else ("--fix", "--unsafe-fixes")
    result = run_reslint(*STATIC, *flags, "model.py", cwd=tmp_path)
    assert model.read_bytes() == (FIXES / name / "after.py").read_bytes()
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == f"{fixed_count(name)} fixed, {golden_count(name, 'after')} remaining."


@pytest.mark.parametrize("name", [*SAFE_RULES, *UNSAFE_RULES, "composed"])
def test_fixing_twice_changes_nothing_the_second_time(tmp_path, name):
    model = project(tmp_path, name, after(name))
    result = run_reslint(*STATIC, "--fix", "--unsafe-fixes", "model.py", cwd=tmp_path)
    assert model.read_text(encoding="utf-8") == after(name)
    assert result.returncode == 0
    assert result.stdout.splitlines()[-1] == f"0 fixed, {golden_count(name, 'after')} remaining."
    diff = run_reslint(*STATIC, "--diff", "--unsafe-fixes", "model.py", cwd=tmp_path)
    assert (diff.returncode, diff.stdout) == (0, "")


def test_fix_without_unsafe_fixes_applies_only_the_safe_ones(tmp_path):
    model = project(tmp_path, "composed")
    result = run_reslint(*STATIC, "--fix", "model.py", cwd=tmp_path)
    text = model.read_text(encoding="utf-8")
    assert "unbiased=False" in text and "var + self.eps" in text and "x = x + self.drop(self.attn(" in text
    assert "ln_f" not in text and "gelu" not in text
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert [line.split(" [warning] ")[1][:13] for line in lines if "[warning]" in line] == ["[unsafe fix] ", "[unsafe fix] "]
    assert lines[-2:] == ["3 fixed, 2 remaining.", "[*] 0 fixable with --fix (2 more with --unsafe-fixes)."]


def test_text_output_marks_each_finding_safe_or_unsafe_fix_without_changing_the_file(tmp_path):
    model = project(tmp_path, "composed")
    result = run_reslint(*STATIC, "model.py", cwd=tmp_path)
    marks = [(line.split(":")[1], line.split(" [warning] ")[1].split(" ")[0]) for line in result.stdout.splitlines() if "[warning]" in line]
    assert marks == [("14", "[*]"), ("15", "[*]"), ("25", "[unsafe"), ("39", "[*]"), ("52", "[unsafe")]
    assert result.stdout.splitlines()[-1] == "[*] 3 fixable with --fix (2 more with --unsafe-fixes)."
    assert model.read_text(encoding="utf-8") == before("composed")


def test_diff_prints_the_unified_diff_and_exits_1_without_writing(tmp_path):
    model = project(tmp_path, "composed")
    result = run_reslint(*STATIC, "--diff", "--unsafe-fixes", "model.py", cwd=tmp_path)
    expected = "".join(difflib.unified_diff(before("composed").splitlines(True), after("composed").splitlines(True),
                                            fromfile="model.py", tofile="model.py"))
    assert result.stdout == expected
    assert result.stderr == "Would fix 5 findings.\n"
    assert result.returncode == 1
    assert model.read_text(encoding="utf-8") == before("composed")


def test_fix_only_writes_the_fixes_and_reports_nothing_else(tmp_path):
    model = project(tmp_path, "composed")
    result = run_reslint(*STATIC, "--fix-only", "model.py", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (0, "Fixed 3 findings.\n")
    assert "unbiased=False" in model.read_text(encoding="utf-8")


def test_noqa_finding_is_not_fixed_and_the_others_are(tmp_path):
    source = before("composed").replace("var = x.var(-1, keepdim=True)\n", "var = x.var(-1, keepdim=True)  # noqa: RL401\n")
    model = project(tmp_path, "composed", source)
    result = run_reslint(*STATIC, "--fix", "--unsafe-fixes", "model.py", cwd=tmp_path)
    expected = after("composed").replace("var = x.var(-1, keepdim=True, unbiased=False)\n",
                                         "var = x.var(-1, keepdim=True)  # noqa: RL401\n")
    assert model.read_text(encoding="utf-8") == expected
    assert result.stdout.splitlines()[-1] == "4 fixed, 0 remaining."


def test_unrecognised_forms_are_reported_without_a_fix_and_left_alone(tmp_path):
    model = project(tmp_path, "refused")
    result = run_reslint(*STATIC, "--fix", "--unsafe-fixes", "--output-format", "json", "model.py", cwd=tmp_path)
    assert model.read_text(encoding="utf-8") == before("refused")
    findings = json.loads(result.stdout)["findings"]
    assert [(finding["code"], finding["fix"]) for finding in findings] == [
        ("RL401", None), ("RL003", None), ("RL501", None), ("RL103", None)]
    assert result.returncode == 1


def test_json_gives_each_finding_its_fix_with_applicability_and_edits(tmp_path):
    project(tmp_path, "composed")
    result = run_reslint(*STATIC, "--output-format", "json", "model.py", cwd=tmp_path)
    fixes = {finding["code"]: finding["fix"] for finding in json.loads(result.stdout)["findings"]}
    assert {code: fix["applicability"] for code, fix in fixes.items()} == {
        "RL401": "safe", "RL403": "safe", "RL003": "safe", "RL501": "unsafe", "RL103": "unsafe"}
    assert fixes["RL401"]["edits"] == [{
        "content": "        var = x.var(-1, keepdim=True, unbiased=False)\n",
        "location": {"row": 14, "column": 1}, "end_location": {"row": 15, "column": 1}}]
    assert fixes["RL401"]["message"] == "use the biased variance (unbiased=False / correction=0)"


def test_a_warm_run_offers_the_fixes_without_analysing_the_file_again(tmp_path, monkeypatch):
    """A static worker stores its own analysis under the settings the fix's re-check runs with
    (`fixes.apply.static_recheck`): a warm run takes the file's result and its fix check from the cache."""
    import reslint
    import reslint.analysis as analysis

    model = project(tmp_path, "composed")
    cold = reslint.check([str(model)], static=True, cache=True, jobs=1, cwd=tmp_path)
    analysed = []
    real_analyze = analysis.analyze_file

    def counted(display, *args, **kwargs):
        analysed.append(display)
        return real_analyze(display, *args, **kwargs)

    monkeypatch.setattr(analysis, "analyze_file", counted)
    warm = reslint.check([str(model)], static=True, cache=True, jobs=1, cwd=tmp_path)
    assert sum(finding.fix is not None for finding in cold.findings) == 5
    assert [finding.to_dict() for finding in warm.findings] == [finding.to_dict() for finding in cold.findings]
    assert analysed == []


def test_sarif_results_carry_fixes(tmp_path):
    project(tmp_path, "RL003")
    result = run_reslint(*STATIC, "--output-format", "sarif", "model.py", cwd=tmp_path)
    first = json.loads(result.stdout)["runs"][0]["results"][0]
    change = first["fixes"][0]["artifactChanges"][0]
    assert change["artifactLocation"]["uri"].endswith("model.py")
    assert change["replacements"] == [{
        "deletedRegion": {"startLine": 15, "startColumn": 1, "endLine": 16, "endColumn": 1},
        "insertedContent": {"text": "        return x + self.dropout(self.attn(h, h, h)[0])\n"}}]
    assert first["properties"]["fixApplicability"] == "safe"


def test_unfixable_config_key_keeps_a_rule_from_being_fixed(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.reslint]\nunfixable = ["RL401"]\n', encoding="utf-8")
    model = project(tmp_path, "composed")
    result = run_reslint(*STATIC, "--fix", "model.py", cwd=tmp_path)
    text = model.read_text(encoding="utf-8")
    assert "unbiased=False" not in text and "var + self.eps" in text
    assert result.stdout.splitlines()[-2] == "2 fixed, 3 remaining."


def test_fixable_config_key_limits_fixes_to_the_codes_it_names(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.reslint]\nfixable = ["RL40"]\n', encoding="utf-8")
    model = project(tmp_path, "composed")
    run_reslint(*STATIC, "--fix", "--unsafe-fixes", "model.py", cwd=tmp_path)
    text = model.read_text(encoding="utf-8")
    assert "unbiased=False" in text and "var + self.eps" in text
    assert "x = self.drop(x) + self.attn(" in text and "ln_f" not in text


def test_unknown_code_in_unfixable_is_a_one_line_config_error(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.reslint]\nunfixable = ["RL999"]\n', encoding="utf-8")
    project(tmp_path, "RL401")
    result = run_reslint(*STATIC, "--fix", "model.py", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "tool.reslint.unfixable" in result.stderr


@pytest.mark.parametrize("name", ["RL101", "RL103", "RL201", "RL501", "composed"])
def test_models_still_build_and_trace_after_the_unsafe_fixes(tmp_path, name):
    """The full check fixes (its traced re-check passes) and the fixed file's models are traced."""
    model = project(tmp_path, name)
    result = run_full("--fix", "--unsafe-fixes", "--output-format", "json", "model.py", cwd=tmp_path)
    assert model.read_text(encoding="utf-8") == after(name)
    document = json.loads(result.stdout)
    assert document["findings"] == []
    assert document["models"] and all(entry["engine"] in ("traced (export)", "traced (fx)") for entry in document["models"])


NORM_OVER_HIDDEN_WIDTH = '''\
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.ffn_norm = nn.LayerNorm(d_ff)  # NormFormer's norm inside the FFN, over its hidden width
        self.ln = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)

    def forward(self, x):
        return x + self.fc2(self.ffn_norm(F.gelu(self.fc1(self.ln(x)))))


class LM(nn.Module):
    def __init__(self, vocab_size=100, d_model=32, n_layer=2):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList([Block(d_model, 4 * d_model) for _ in range(n_layer)])
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, idx):
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(x)
'''


def test_fix_whose_model_no_longer_traces_is_not_offered_by_the_full_check(tmp_path):
    """The blocks' first norm is over the FFN's hidden width: statically the final norm looks right,
    but the edited model fails to trace, so the full check neither writes nor offers the fix."""
    model = project(tmp_path, "RL103", NORM_OVER_HIDDEN_WIDTH)
    static = run_reslint(*STATIC, "--diff", "--unsafe-fixes", "model.py", cwd=tmp_path)
    assert "+        self.ln_f = nn.LayerNorm(4 * d_model)\n" in static.stdout
    full = run_full("--fix", "--unsafe-fixes", "model.py", cwd=tmp_path)
    assert model.read_text(encoding="utf-8") == NORM_OVER_HIDDEN_WIDTH
    assert full.stderr.startswith("reslint: warning: not fixing model.py: `LM` no longer traces as before once fixed "
                                  "(export failed: RuntimeError: Given normalized_shape=[128]")
    assert "[unsafe fix]" not in full.stdout and full.stdout.splitlines()[-1] == "0 fixed, 1 remaining."


def test_fixes_touch_only_the_files_that_need_them(tmp_path):
    shutil.copy(FIXES / "RL401" / "before.py", tmp_path / "a.py")
    shutil.copy(FIXES / "refused" / "before.py", tmp_path / "b.py")
    result = run_reslint(*STATIC, "--fix", ".", cwd=tmp_path)
    assert (tmp_path / "a.py").read_text(encoding="utf-8") == after("RL401")
    assert (tmp_path / "b.py").read_text(encoding="utf-8") == before("refused")
    assert result.stdout.splitlines()[-1] == "3 fixed, 4 remaining."


@pytest.mark.parametrize("code", [*SAFE_RULES, *UNSAFE_RULES, "RL104"])
def test_rule_page_fix_section_shows_what_diff_prints_for_its_bad_example(tmp_path, code):
    page = (REPO_ROOT / "rules" / f"{code}.md").read_text(encoding="utf-8")
    bad = re.search(r"^## Bad\n.*?```python\n(.*?)```", page, flags=re.S | re.M).group(1)
    fix_section = page[page.index("## Fix\n"):page.index("## How to suppress")]
    diff = re.search(r"```diff\n(.*?)```", fix_section, flags=re.S)
    shown = diff.group(1) if diff else ""  # a page whose Bad example the fix does not recognise says so
    (tmp_path / "example.py").write_text(bad, encoding="utf-8")
    result = run_reslint(*STATIC, "--diff", "--unsafe-fixes", "example.py", cwd=tmp_path)
    assert result.stdout == shown
    assert ("**safe**" in page) == (code in SAFE_RULES) and ("**unsafe**" in page) == (code not in SAFE_RULES)


def test_fix_after_which_the_recheck_reports_a_new_finding_is_not_offered(tmp_path):
    """bert_style's BatchNorm follows a residual add: as a LayerNorm it would make that residual
    Post-LN, a new RL101, so the RL201 fix fails its re-check and is neither offered nor applied
    (the RL101/RL104 fix, which makes the other residual Pre-LN, is)."""
    source = (REPO_ROOT / "examples" / "bert_style.py").read_text(encoding="utf-8")
    model = project(tmp_path, "RL201", source)
    result = run_reslint(*STATIC, "--fix", "--unsafe-fixes", "--output-format", "json", "model.py", cwd=tmp_path)
    fixed = model.read_text(encoding="utf-8")
    assert "self.norm2 = nn.BatchNorm1d(d_model)" in fixed and "x = x + self.dropout(self.attn(h, h, h" in fixed
    findings = json.loads(result.stdout)["findings"]
    assert [(finding["code"], finding["fix"]) for finding in findings] == [("RL201", None)]