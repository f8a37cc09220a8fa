"""What only a model's own code states, as neuralforecast writes it: queries already split into heads with a
required mask that None turns off, and an activation name its constructor checks against a list.
fixtures/trace/split_heads.py mirrors them."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from reslint.settings import Settings  # noqa: E402
from reslint.trace.engine import trace_file  # noqa: E402

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "trace" / "split_heads.py"


@pytest.fixture(scope="module")
def traced():
    result = trace_file(str(FIXTURE), None, Settings(root=str(FIXTURE.parent), timeout=300))
    return result, {capture.model_name: capture for capture in result.captures}


def test_both_models_trace(traced):
    result, captures = traced
    assert sorted(captures) == ["NamedActivationMLP", "SplitHeadsAttention"]
    assert result.findings == [] and result.static_only == {}


def test_heads_take_the_rank_the_body_unpacks_and_the_required_mask_is_none(traced):
    attention = traced[1]["SplitHeadsAttention"]
    assert attention.inputs.startswith("float[2,2,16,32]; keys=float[2,2,16,32]; values=float[2,2,16,32] (inferred")
    assert "attn_mask" not in attention.inputs  # passed as None, not a tensor


def test_a_guessed_activation_takes_the_spelling_the_constructor_checks(traced):
    result, _ = traced
    assert "activation='GELU'" in result.built_from["NamedActivationMLP"]
