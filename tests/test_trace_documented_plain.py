"""A plain-torch forward that documents the shapes its layers leave open, as diffusers' PriorTransformer and
StableAudioDiTModel do: the inputs come from the docstring, sized by the model's attributes or config, after
every guess the layers suggest. fixtures/trace/documented_shapes.py mirrors them."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from reslint.settings import Settings  # noqa: E402
from reslint.trace.engine import trace_file  # noqa: E402

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "trace" / "documented_shapes.py"


@pytest.fixture(scope="module")
def traced():
    result = trace_file(str(FIXTURE), None, Settings(root=str(FIXTURE.parent), timeout=300))
    return result, {capture.model_name: capture for capture in result.captures}


def test_every_model_traces_without_a_finding(traced):
    result, captures = traced
    assert result.findings == []
    assert sorted(captures) == ["AudioDiT", "GuessedEncoder", "VectorPrior"]


def test_a_prior_gets_vectors_and_a_stream_as_long_as_its_position_table(traced):
    prior = traced[1]["VectorPrior"]
    assert prior.inputs.startswith("hidden_states=float[2,24]; timestep=long[2]")
    assert "proj_embedding=float[2,24]; encoder_hidden_states=float[2,7,24]" in prior.inputs
    assert "the shapes VectorPrior.forward documents" in prior.inputs


def test_streams_that_default_to_none_are_given_as_documented_by_the_config(traced):
    audio = traced[1]["AudioDiT"]
    assert audio.inputs.startswith("hidden_states=float[2,6,16]; timestep=long[2]")
    assert "encoder_hidden_states=float[2,16,20]; global_hidden_states=float[2,16,12]" in audio.inputs
    assert "pooled_projections=float[2,10] (inferred" in audio.inputs  # `projection_dim`: the config's pooled_projection_dim
    assert "attention_mask" not in audio.inputs  # optional: none means no masking


def test_a_guess_that_runs_comes_before_the_documented_shapes(traced):
    assert traced[1]["GuessedEncoder"].inputs.startswith("float[2,16,16]")

