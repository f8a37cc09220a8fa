"""The Python API: `reslint.check` (the CLI's own code path), `reslint.check_model`, and `Report`."""

from __future__ import annotations

import importlib.util
import inspect
import json
import subprocess
import sys

import pytest
from cli_support import BATCHNORM, POST_LN, POST_LN_LINE, import_file, write
from golden import ROOT

import reslint
from reslint import cli
from reslint.errors import ReslintError

PRE_LN_WITHOUT_FINAL_NORM = ROOT / "fixtures" / "placement" / "pre_ln_without_final_norm.py"
WARMUP_MODELS = ROOT / "fixtures" / "warmup" / "models.py"
RL103_MESSAGE_START = "the Pre-LN stack `self.blocks` of `TinyLM` feeds the head/output without a final norm"


load = import_file


# ----- reslint.check -------------------------------------------------------------------------------


def test_check_is_what_the_cli_prints(tmp_path, monkeypatch, capsys):
    write(tmp_path, {"post_ln.py": POST_LN, "tagger.py": BATCHNORM})
    monkeypatch.chdir(tmp_path)
    status = cli.run(["check", "--static", "--no-cache", "--jobs", "1", "--output-format", "json"])
    printed = capsys.readouterr().out
    report = reslint.check(static=True, cache=False, jobs=1)
    assert report.render("json") == printed
    assert status == report.exit_code() == 1
    assert [(f.path, f.code, f.line) for f in report.findings] == [("post_ln.py", "RL101", POST_LN_LINE),
                                                                    ("tagger.py", "RL201", 8)]
    assert report.findings[0].to_dict() == json.loads(printed)["findings"][0]
    assert report.files_checked == 2 and [model.name for model in report.models] == ["Block"]


def test_check_options_and_exit_codes(tmp_path):
    write(tmp_path, {"post_ln.py": POST_LN, "tagger.py": BATCHNORM})
    report = reslint.check(tmp_path / "post_ln.py", static=True, cache=False)
    assert [f.code for f in report.findings] == ["RL101"]  # info: below the default fail-on
    assert (report.fails(), report.exit_code(), report.exit_code("info"), report.fails("INFO")) == (False, 0, 1, True)
    only = reslint.check([tmp_path], static=True, select="RL2", cache=False, fail_on="error")
    assert [f.code for f in only.findings] == ["RL201"] and only.exit_code() == 0 and only.exit_code("warning") == 1
    ignored = reslint.check(tmp_path, static=True, ignore=["RL101", "RL201"], cache=False)
    assert ignored.findings == [] and ignored.render().endswith("\nAll checks passed! (2 files)\n")


def test_check_paths_are_relative_to_cwd(tmp_path):
    write(tmp_path, {"pkg/post_ln.py": POST_LN, "pyproject.toml": '[tool.reslint]\nfail-on = "info"\n'})
    report = reslint.check("pkg", static=True, cache=False, cwd=tmp_path)
    assert [(f.path, f.line) for f in report.findings] == [("pkg/post_ln.py", POST_LN_LINE)]
    assert report.settings.fail_on == "info" and report.exit_code() == 1  # the config found from cwd


@pytest.mark.parametrize(("arguments", "message"), [
    ({"paths": "missing.py"}, "path does not exist: missing.py"),
    ({"select": "RL9999"}, "select: unknown rule code or prefix: 'RL9999'"),
    ({"fail_on": "fatal"}, "fail_on: expected one of info, warning, error, got 'fatal'"),
    ({"jobs": 0}, "jobs: expected an integer >= 1, got 0"),
    ({"config": "nowhere.toml"}, "config file not found: nowhere.toml"),
    ({"models": "no_colon"}, "models 'no_colon': expected FILE_OR_MODULE:EXPR, e.g. model.py:GPT()"),
    ({"models": "pkg.m:GPT(n_layer=", "static": True}, "models 'pkg.m:GPT(n_layer=': EXPR is not a Python expression: '(' was never closed"),
    ({"inputs": "long[2,64", "static": True}, "inputs 'long[2,64': neither a shape spec such as long[2,64]<50257 nor a Python expression: '[' was never closed"),
    ({"select": "", "static": True}, "select: no rule code given (expected codes or prefixes, e.g. RL1,RL201)"),
    ({"select": "RL6", "static": True}, "select: only probe rules selected (RL601, RL602, RL603, RL604): `reslint probe` reports them, check never does"),
])
def test_bad_arguments_raise_one_error_type_with_one_line(tmp_path, arguments, message):
    with pytest.raises(ReslintError) as caught:
        reslint.check(**{"paths": ".", "static": True, "cwd": tmp_path, **arguments})
    assert str(caught.value) == message


def test_a_bad_config_is_a_reslint_error(tmp_path):
    write(tmp_path, {"pyproject.toml": "[tool.reslint]\nselct = ['RL1']\n"})
    with pytest.raises(ReslintError, match=r"^pyproject.toml: tool.reslint.selct: unknown key \(did you mean 'select'\?\)$"):
        reslint.check(static=True, cwd=tmp_path)


def test_report_renders_every_output_format(tmp_path):
    write(tmp_path, {"tagger.py": BATCHNORM})
    report = reslint.check(tmp_path, static=True, cache=False)
    sarif = json.loads(report.render("sarif"))
    assert [result["ruleId"] for result in sarif["runs"][0]["results"]] == ["RL201"]
    assert report.render("github").startswith("::warning file=")
    assert report.render(statistics=True).splitlines()[0] == "1  RL201  batchnorm-in-sequence-model"
    assert report.to_dict() == json.loads(report.render("json"))
    with pytest.raises(ReslintError, match="unknown output format 'xml'"):
        report.render("xml")


def test_importing_the_api_stays_cheap():
    script = ("import sys, reslint; assert callable(reslint.check) and callable(reslint.check_model); "
              "assert reslint.Report.__name__ == 'Report' and reslint.Finding.__name__ == 'Finding'; "
              "import reslint.pytest_plugin; "
              "assert not {'torch', 'libcst'} & set(sys.modules), sorted(sys.modules); print('ok')")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "ok", result.stderr


# ----- reslint.check_model -------------------------------------------------------------------------


torch_needed = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")


@torch_needed
def test_check_model_traces_an_in_memory_model():
    model = load(PRE_LN_WITHOUT_FINAL_NORM, "api_fixture_pre_ln").TinyLM()
    model.train()
    report = reslint.check_model(model, cwd=ROOT)
    [finding] = report.findings
    assert (finding.code, finding.path, finding.line, finding.column, finding.engine, finding.symbol) == (
        "RL103", "fixtures/placement/pre_ln_without_final_norm.py", 37, 17, "trace", "TinyLM.blocks")
    assert finding.message.startswith(RL103_MESSAGE_START)
    [summary] = report.models
    assert (summary.name, summary.line, summary.engine) == ("TinyLM", 27, "traced (fx)")
    assert [(stack.depth, stack.placement, stack.final_norm) for stack in summary.stacks] == [(6, "pre", False)]
    assert report.exit_code() == 1 and report.files_checked == 1
    assert all(module.training for module in model.modules())  # traced in eval mode, put back
    text = report.render()
    assert text.startswith(f"fixtures/placement/pre_ln_without_final_norm.py:37:17: RL103 [warning] {RL103_MESSAGE_START}")
    assert "TinyLM: 6 blocks (self.blocks: Block), Pre-LN, final norm no [traced (fx)]" in text


@torch_needed
def test_check_model_inputs_options_and_failures():
    import torch

    models = load(WARMUP_MODELS, "api_fixture_warmup_models")
    clean = reslint.check_model(models.PreLNEncoder(), "float[2,8,64]", name="Encoder", cwd=ROOT)
    assert clean.findings == [] and clean.exit_code() == 0
    assert [(m.name, m.notes) for m in clean.models] == [("Encoder", ("inputs: float[2,8,64]",))]
    post_ln = reslint.check_model(models.PostLNEncoder(), (torch.randn(2, 4, 64),), cwd=ROOT)
    assert [(f.code, f.line) for f in post_ln.findings] == [("RL101", 13)] and not post_ln.fails()
    assert post_ln.models[0].notes == ("inputs: float[2,4,64]",)
    assert reslint.check_model(models.PostLNEncoder(), {"x": torch.randn(2, 4, 64)}, ignore="RL1").findings == []

    class TwoInputs(torch.nn.Module):
        def forward(self, x, mode: str):
            return x

    [untraced] = reslint.check_model(TwoInputs(), cwd=ROOT).findings
    class_line = inspect.getsourcelines(TwoInputs)[1]
    assert (untraced.code, untraced.path, untraced.line) == ("RL903", "tests/test_api.py", class_line)
    assert untraced.message == ("tracing TwoInputs failed (export, fx): TypeError: missing a required argument: 'mode'; "
                                "reslint inferred the inputs float[2,16,32] (inferred from default features: the model "
                                "has no parameters); pass inputs=; static facts were used")
    namespace = {"nn": torch.nn}
    exec("class Sourceless(nn.Module):\n    def forward(self, x, mode: str):\n        return x\n", namespace)
    [sourceless] = reslint.check_model(namespace["Sourceless"]()).findings
    assert (sourceless.path, sourceless.line) == ("<Sourceless>", 1) and sourceless.message.endswith("; pass inputs=")
    with pytest.raises(ReslintError, match="check_model\\(\\) needs a torch.nn.Module, got str"):
        reslint.check_model("model.py")


FFN_WITH_DROPOUT_ONLY = '''\
import torch.nn as nn


class FeedForward(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.w1 = nn.Linear(d, 4 * d)
        self.w2 = nn.Linear(4 * d, d)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        return self.w2(self.drop(self.w1(x)))


class PostLN(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.ff = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(x + self.ff(x))


class Model(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.ffn = FeedForward(d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return self.ffn(self.norm(x))
'''


@torch_needed
def test_check_model_merges_the_static_findings_of_the_models_classes(tmp_path):
    write(tmp_path, {"ffn_model.py": FFN_WITH_DROPOUT_ONLY})
    model = load(tmp_path / "ffn_model.py", "api_fixture_ffn_model").Model()
    report = reslint.check_model(model, "float[2,4,16]", cwd=tmp_path)
    # RL501 comes from the static engine, as in `reslint check`; PostLN's RL101 is another model's.
    assert [(f.code, f.path, f.line, f.engine) for f in report.findings] == [("RL501", "ffn_model.py", 12, "static")]
    assert report.render("json") == reslint.Report(report.findings, report.models, 1, settings=report.settings).render("json")


def test_finding_severity_is_the_reported_severity(tmp_path):
    write(tmp_path, {"tagger.py": BATCHNORM, "post.py": POST_LN})
    report = reslint.check(tmp_path, static=True, cache=False)
    assert [(f.code, f.severity) for f in report.findings] == [("RL101", "info"), ("RL201", "warning")]
    assert [f.severity for f in report.findings] == [f.to_dict()["severity"] for f in report.findings]
    assert [f.code for f in report.findings if f.severity == "warning"] == ["RL201"]
    # A policy's severity (norm-placement) wins over the rule's default, and survives the JSON round trip.
    (tmp_path / "pyproject.toml").write_text("[tool.reslint]\nnorm-placement = 'pre'\n")
    [post_ln] = [f for f in reslint.check(".", cwd=tmp_path, static=True, cache=False).findings if f.path == "post.py"]
    assert post_ln.severity == "error"
    assert reslint.Finding.from_dict(post_ln.to_dict()) == post_ln


def test_errors_name_the_api_options_the_cli_its_flags(tmp_path):
    with pytest.raises(reslint.ReslintError) as caught:
        reslint.check(tmp_path, static=True, extend_ignore="RL77")
    assert str(caught.value) == "extend_ignore: unknown rule code or prefix: 'RL77'"
    assert caught.value.cli_message() == "--extend-ignore: unknown rule code or prefix: 'RL77'"
    with pytest.raises(reslint.ReslintError) as caught:
        reslint.check(tmp_path, static=True, models="pkg.m:GPT(")
    assert caught.value.cli_message() == "--model 'pkg.m:GPT(': EXPR is not a Python expression: '(' was never closed"
    assert "--" not in str(caught.value)
