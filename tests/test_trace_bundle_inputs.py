"""A forecaster whose forward takes one dataclass of tensors and whose window length reaches its base class through
`**kwargs` (darts' `PLForecastingModule`s: `forward(self, x_in: PLModuleInput)`, `input_chunk_length`).
fixtures/trace/bundle_inputs.py mirrors it."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from reslint.settings import Settings  # noqa: E402
from reslint.trace.engine import trace_file  # noqa: E402

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "trace" / "bundle_inputs.py"


@pytest.fixture(scope="module")
def traced():
    result = trace_file(str(FIXTURE), None, Settings(root=str(FIXTURE.parent), timeout=300))
    return result, {capture.model_name: capture for capture in result.captures}


def test_the_forecaster_is_traced(traced):
    result, captures = traced
    assert sorted(captures) == ["ChunkForecaster"] and result.static_only == {}
    assert captures["ChunkForecaster"].method == "export"


def test_the_full_check_reports_its_post_ln_from_the_trace():
    from reslint.analysis import analyze_file

    result = analyze_file("fixtures/trace/bundle_inputs.py", FIXTURE.read_bytes(), Settings(static=False), None)
    assert [(finding.code, finding.line, finding.column) for finding in result.findings] == [("RL101", 38, 23)]
    forecaster = next(model for model in result.models if model.name == "ChunkForecaster")
    assert forecaster.engine == "traced (export)"
    # input_chunk_length, asked for by the base class through **kwargs, is a context length: the head flattens 32 steps
    assert forecaster.built_from == ("inferred arguments (input_size=32, d_model=32, nhead=4, input_chunk_length=32, "
                                     "output_chunk_length=8)")


def test_the_bundle_holds_the_required_tensor_sized_from_the_first_layer(traced):
    forecaster = traced[1]["ChunkForecaster"]
    assert forecaster.inputs == ("x_in=WindowBatch(past_target=float[2,32,32]) (inferred from the required tensors of "
                                 "`WindowBatch`, sized from the first layer)")
