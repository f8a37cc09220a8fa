"""Forwards no tensor guess can run, as neuralforecast writes them: a forecaster that reads its series and
covariates from one mapping (`windows_batch["insample_y"]`) and a reversible scaling that needs its mode string
(`forward(x, mode: str)`, `if mode == "norm"`). fixtures/trace/mapping_inputs.py mirrors them."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from reslint.settings import Settings  # noqa: E402
from reslint.trace.engine import trace_file  # noqa: E402
from reslint.trace.forward_body import compared_strings  # noqa: E402
from reslint.trace.mapping_inputs import read_keys  # noqa: E402

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "trace" / "mapping_inputs.py"


@pytest.fixture(scope="module")
def traced():
    result = trace_file(str(FIXTURE), None, Settings(root=str(FIXTURE.parent), timeout=300))
    return result, {capture.model_name: capture for capture in result.captures}


def test_every_model_traces(traced):
    result, captures = traced
    assert sorted(captures) == ["ReversibleScaling", "WindowForecaster"]  # the layer is part of the forecaster
    assert result.findings == [] and result.static_only == {}


def test_the_full_check_reports_the_post_ln_layer_once_from_the_trace():
    from reslint.analysis import analyze_file

    relative = "fixtures/trace/mapping_inputs.py"
    result = analyze_file(relative, FIXTURE.read_bytes(), Settings(static=False), None)
    assert [(finding.code, finding.line, finding.column) for finding in result.findings] == [("RL101", 18, 26)]
    assert result.findings[0].message.startswith("`PostNormLayer` uses Post-LN: the norm follows `x + self.attention(")
    forecaster = next(model for model in result.models if model.name == "WindowForecaster")
    assert forecaster.engine == "traced (export)"


def test_the_forecaster_gets_the_keys_it_reads_its_window_and_no_covariate(traced):
    forecaster = traced[1]["WindowForecaster"]
    assert forecaster.method == "export"
    assert forecaster.inputs.startswith("windows_batch=dict(insample_y=float[2,24,1], futr_exog=None) (inferred from "
                                        "the keys its forward reads from `windows_batch`, the covariates None)")


def test_the_scaling_is_traced_in_the_mode_its_forward_compares_first(traced):
    scaling = traced[1]["ReversibleScaling"]
    nodes = [node for node in scaling.graph_module.graph.nodes if node.op == "call_function"]
    assert any("sqrt" in str(node.target) for node in nodes)  # the "norm" branch, not "denorm"


def test_what_the_forward_body_reads():
    import importlib.util

    spec = importlib.util.spec_from_file_location("mapping_inputs_fixture", FIXTURE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert read_keys(module.WindowForecaster()) == {"windows_batch": ["insample_y", "futr_exog"]}
    assert read_keys(module.PostNormLayer(8)) == {}
    assert compared_strings(module.ReversibleScaling()) == {"mode": "norm"}
