"""Settings that change what the rules report: norm-placement policy and the deep Post-LN threshold."""

from __future__ import annotations

from golden import ROOT

from reslint.analysis import analyze_file
from reslint.settings import Settings


def check(relative: str, **settings) -> list[tuple[int, str, str]]:
    path = ROOT / relative
    result = analyze_file(relative, path.read_bytes(), Settings(**settings))
    return sorted((f.line, f.code, f.effective_severity) for f in result.findings)


def test_pre_policy_turns_post_ln_into_errors():
    assert check("fixtures/lessons/sublayer_connection.py", norm_placement="pre") == [(14, "RL101", "error")]


def test_post_policy_reports_pre_ln_blocks_as_errors():
    assert check("fixtures/lessons/sublayer_connection.py", norm_placement="post") == [
        (14, "RL101", "info"),
        (25, "RL102", "error"),
    ]


def test_any_policy_keeps_post_ln_informational():
    assert check("fixtures/lessons/sublayer_connection.py") == [(14, "RL101", "info")]


def test_deep_post_ln_threshold_is_configurable():
    deep = "fixtures/placement/deep_post_ln.py"
    assert (18, "RL104", "warning") in check(deep)
    assert [f for f in check(deep, deep_post_ln_layers=24) if f[1] == "RL104"] == []
    assert [f[0] for f in check(deep, deep_post_ln_layers=8) if f[1] == "RL104"] == [18]


def test_select_and_ignore_filter_rules():
    nanogpt_like = "fixtures/placement/deep_post_ln.py"
    assert {f[1] for f in check(nanogpt_like, select=frozenset({"RL104"}))} == {"RL104"}
    assert "RL101" not in {f[1] for f in check(nanogpt_like, ignore=frozenset({"RL101"}))}
