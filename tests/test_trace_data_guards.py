"""Guards on a tensor's truth (`.any()`, `.all()`, `bool(t)`) in models too large to rebuild on CPU, as fair-esm's
ESM-2 writes them: the model stays on meta and concrete_fx runs it with the inputs on CPU, so the values the
inputs alone give are real and the guard follows the example input. fixtures/trace/data_guards.py mirrors it."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from reslint.settings import Settings  # noqa: E402
from reslint.trace.concrete_fx import concrete_trace  # noqa: E402
from reslint.trace.engine import trace_file  # noqa: E402

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "trace" / "data_guards.py"


@pytest.fixture(scope="module")
def traced():
    result = trace_file(str(FIXTURE), None, Settings(root=str(FIXTURE.parent), timeout=300))
    return result, {capture.model_name: capture for capture in result.captures}


def test_guards_on_input_values_trace_on_meta(traced):
    result, captures = traced
    assert result.findings == [] and result.static_only == {}
    assert sorted(captures) == ["AllGuardModel", "AnyGuardModel"]
    for capture in captures.values():
        assert capture.method == "concrete_fx"
        assert any("the weights stayed on meta" in note for note in capture.notes)
        assert all(parameter.is_meta for parameter in capture.model.parameters())
    assert "data_guards.py:40" in " ".join(captures["AnyGuardModel"].notes)  # the guard's line


def masked_fills(module) -> int:
    return sum(node.target == "masked_fill" for node in module.graph.nodes)


def test_the_guard_follows_the_example_input():
    """With a pad token the mask is kept and each block masks; without one `padding_mask.any()` drops it."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("data_guards_fixture", FIXTURE)
    fixture = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fixture)
    with torch.device("meta"):
        model = fixture.AnyGuardModel().eval()
    padded = torch.tensor([[5, 6, 1, 1], [7, 8, 9, 1]])
    graph = concrete_trace(model, {"tokens": padded})
    assert masked_fills(graph) == 2
    assert masked_fills(concrete_trace(model, {"tokens": torch.tensor([[5, 6, 7, 8]])})) == 0
    output = next(node for node in graph.graph.nodes if node.op == "output")
    assert output.args[0].meta["val"].is_meta and tuple(output.args[0].meta["val"].shape) == (2, 4, 256)


def test_a_guard_on_a_value_the_weights_give_still_fails_on_meta():
    class WeightGuard(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(4, 4)

        def forward(self, x):
            y = self.proj(x)
            return y if (y > 0).any() else -y

    with torch.device("meta"):
        model = WeightGuard()
    with pytest.raises(Exception, match="meta"):
        concrete_trace(model, {"x": torch.randn(2, 4)})
