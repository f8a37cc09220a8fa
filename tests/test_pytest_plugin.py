"""The pytest plugin, as a user's test suite loads it (the installed `pytest11` entry point), run with pytester.

Each scenario is one `pytest` subprocess: the plugin is found through the entry point as in a
user's environment, and torch and libcst are imported there, not into this test session.
"""

from __future__ import annotations

import importlib.util

import pytest
from golden import ROOT

pytest_plugins = ["pytester"]

PRE_LN_WITHOUT_FINAL_NORM = (ROOT / "fixtures" / "placement" / "pre_ln_without_final_norm.py").read_text()
WARMUP_MODELS = (ROOT / "fixtures" / "warmup" / "models.py").read_text()
RL103_LINE = "bad_model.py:37:17: RL103 [warning] the Pre-LN stack `self.blocks` of `TinyLM` feeds the head/output without a final norm"
# A Post-LN model trained without warmup: RL301 at the optimizer (line 6, column 13).
TRAIN_WITHOUT_WARMUP = """\
import torch

from models import PostLNEncoder

model = PostLNEncoder()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(1000):
    optimizer.step()
"""
RL301_LINE = "train.py:6:13: RL301 [warning] `torch.optim.AdamW` trains a Post-LN model (`PostLNBlock` at models.py:13) without learning-rate warmup"

FIXTURE_TESTS = """\
import pytest
import torch

from bad_model import TinyLM
from models import PreLNEncoder


def test_clean_model(reslint):
    report = reslint.assert_clean(PreLNEncoder(), "float[2,8,64]")
    assert report.findings == [] and report.models[0].name == "PreLNEncoder"


def test_model_without_final_norm(reslint):
    reslint.assert_clean(TinyLM())


@pytest.mark.reslint(ignore=["RL103"])
def test_marker_options_are_the_defaults(reslint):
    reslint.assert_clean(TinyLM())


def test_healthy_gradients(reslint):
    report = reslint.assert_gradients_healthy(PreLNEncoder(), torch.randn(2, 8, 64))
    assert report.codes == []


class SigmoidStack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(16, 16) for _ in range(12)])

    def forward(self, x):
        for layer in self.layers:
            x = torch.sigmoid(layer(x))
        return x


def test_vanishing_gradients(reslint):
    reslint.assert_gradients_healthy(SigmoidStack(), torch.randn(4, 16))
"""


def literal(text: str) -> str:
    """`text` as an fnmatch pattern that matches only itself (`[warning]` is a character class there)."""
    return "".join(f"[{char}]" if char in "[]*?" else char for char in text)


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=300)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_fixture_passes_clean_models_and_fails_with_the_findings(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(bad_model=PRE_LN_WITHOUT_FINAL_NORM, models=WARMUP_MODELS, test_models=FIXTURE_TESTS)
    result = run(pytester, "-rA")
    result.assert_outcomes(passed=3, failed=2)
    passed = {line.split()[1] for line in result.outlines if line.startswith("PASSED ")}
    assert passed == {"test_models.py::test_clean_model", "test_models.py::test_marker_options_are_the_defaults",
                      "test_models.py::test_healthy_gradients"}
    # The assertion message is the rendered report: headline, finding lines, model summary.
    result.stdout.fnmatch_lines([
        "*def test_model_without_final_norm(reslint):",
        ">       reslint.assert_clean(TinyLM())",
        "E       AssertionError: reslint: TinyLM has 1 finding at or above warning",
        "E       ",
        literal(f"E       {RL103_LINE}") + "*",
        "E       ",
        "E       Models:",
        literal("E         bad_model.py:27: TinyLM: 6 blocks (self.blocks: Block), Pre-LN, final norm no [traced (fx)]"),
        "*",
        "E       Found 1 finding (0 errors, 1 warning, 0 infos) in 1 file.",
        "",
        "test_models.py:14: AssertionError",
    ])
    result.stdout.fnmatch_lines([
        "E       AssertionError: reslint probe: SigmoidStack has 1 gradient-flow finding at or above warning",
        "*",
        "E       stack self.layers of SigmoidStack: 12 blocks, input side to output side",
        "*",
        "E       test_models.py:30:23: RL601 " + literal("[warning]") + " gradient norm falls *x from layers.11 * to layers.0 *",
    ])
    assert "Traceback" not in result.stdout.str() and "torch.__trace" not in result.stdout.str()


def test_reslint_option_checks_each_collected_file(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(bad_model=PRE_LN_WITHOUT_FINAL_NORM, models=WARMUP_MODELS, train=TRAIN_WITHOUT_WARMUP,
                        test_trivial="def test_nothing():\n    pass\n")
    result = run(pytester, "--reslint", "-rA")
    result.assert_outcomes(passed=3, failed=2)
    summary = sorted(" ".join(line.split()[:2]) for line in result.outlines if line.startswith(("PASSED ", "FAILED ")))
    assert summary == ["FAILED bad_model.py::RESLINT", "FAILED train.py::RESLINT", "PASSED models.py::RESLINT",
                       "PASSED test_trivial.py::RESLINT", "PASSED test_trivial.py::test_nothing"]
    result.stdout.fnmatch_lines([
        "*_ bad_model.py::RESLINT _*",
        "reslint: 1 finding at or above warning (fail-on)",
        "",
        literal(RL103_LINE.replace("[warning] ", "[warning] [unsafe fix] ")) + "*",
        "",
        "Models:",
        literal("  bad_model.py:27: TinyLM: 6 blocks (self.blocks: Block), Pre-LN, final norm no [static]"),
        "",
        "Found 1 finding (0 errors, 1 warning, 0 infos) in 1 file.",
        "*_ train.py::RESLINT _*",
        "reslint: 1 finding at or above warning (fail-on)",
        "",
        literal(RL301_LINE) + "*",
    ])
    # models.py's Post-LN (RL101) is info, below the fail-on: it passes. Without --reslint there are no items.
    assert run(pytester, "-q").parseoutcomes() == {"passed": 1}


def test_reslint_option_follows_the_project_config(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(bad_model=PRE_LN_WITHOUT_FINAL_NORM, models=WARMUP_MODELS, train=TRAIN_WITHOUT_WARMUP)
    pytester.makepyprojecttoml('[tool.reslint]\nfail-on = "error"\nexclude = ["train.py"]\n')
    result = run(pytester, "--reslint", "-rA")
    result.assert_outcomes(passed=2)
    assert sorted(line.split()[1] for line in result.outlines if line.startswith("PASSED ")) == [
        "bad_model.py::RESLINT", "models.py::RESLINT"]

    pytester.makepyprojecttoml("[tool.reslint]\nselct = ['RL1']\n")
    broken = run(pytester, "--reslint")
    assert broken.ret == pytest.ExitCode.USAGE_ERROR
    broken.stderr.fnmatch_lines([literal("ERROR: reslint: pyproject.toml: tool.reslint.selct: unknown key (did you mean 'select'?)")])
