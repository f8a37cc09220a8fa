"""The shared placement classifier (reslint.placement) through both engines: dropout ownership, the
parallel Pre-LN label, which operand of a Post-LN add is named the skip, configurable versus mixed, and
the places where the engines used to disagree."""

from __future__ import annotations

from pathlib import Path

import pytest

from reslint.analysis import analyze_file
from reslint.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
CASES = "fixtures/placement/classifier_cases.py"
ENGINES = ["static", "full"]


def check(relative: str, engine: str):
    if engine == "full":
        pytest.importorskip("torch")
    return analyze_file(relative, (ROOT / relative).read_bytes(), Settings(static=engine == "static"),
                        str(ROOT / relative))


@pytest.fixture(scope="module", params=ENGINES)
def cases(request):
    return request.param, check(CASES, request.param)


def findings(result, code: str) -> list[tuple[int, str]]:
    return [(f.line, f.message) for f in result.findings if f.code == code]


def stack_placements(result) -> dict[str, str]:
    return {model.name: stack.placement for model in result.models for stack in model.stacks}


def test_full_check_traces_every_model(cases):
    engine, result = cases
    if engine == "full":
        assert {model.name: model.engine for model in result.models} == dict.fromkeys(
            ["SkipDropout", "NoisyInput", "ParallelStack", "PostSkipFirst", "PostBranchFirst", "FlagStack"],
            "traced (fx)")  # fast_capture: export's facts (tests/test_fast_capture.py)


def test_dropout_on_the_skip_is_the_adding_blocks_own(cases):
    _, result = cases
    # line 21: the block's own dropout on `x`; line 45: a dropout inside the Noise module it calls
    assert findings(result, "RL003") == [
        (21, "dropout is applied to the skip `self.dropout(x)` of the residual in `SkipDropout`: the identity "
             "path should carry x unchanged; drop the branch instead, x + dropout(sublayer(x))")]


def test_parallel_blocks_keep_their_label(cases):
    _, result = cases
    assert stack_placements(result)["ParallelStack"] == "parallel-pre"


def test_post_ln_message_names_the_skip_then_the_branch(cases):
    _, result = cases
    messages = {line: message.split(";")[0] for line, message in findings(result, "RL101")}
    assert messages[81] == "`PostSkipFirst` uses Post-LN: the norm follows `x + self.ff(x)`"
    # written branch first: still named skip first
    assert messages[91] == "`PostBranchFirst` uses Post-LN: the norm follows `hidden + self.ff(hidden)`"


def test_placement_chosen_by_a_flag_is_configurable_not_mixed(cases):
    engine, result = cases
    assert findings(result, "RL102") == []
    # the static engine sees both branches of the flag; the trace engine the one that was built
    assert stack_placements(result)["FlagStack"] == ("configurable" if engine == "static" else "pre")


@pytest.mark.parametrize("engine", ENGINES)
def test_norm_after_a_loop_of_residual_adds_is_a_final_norm(engine):
    """The trace engine unrolls `for layer in layers: x = x + layer(x)`; the norm after the loop runs once,
    on the last sum: not Post-LN (it called the last add Post-LN before)."""
    result = check("fixtures/placement/residual_loops.py", engine)
    assert [line for line, _ in findings(result, "RL101")] == [31]
    assert {model.name: model.placement for model in result.models} == {"PostNormLoop": "post"}


def test_division_in_a_symbolically_traced_graph_is_a_division():
    """fx Tracer graphs record `a / b` as operator.truediv: hand-written norms that divide (`(x - mean) /
    sqrt(var + eps)`) were not norms there, and the Pre-LN residuals around them had no placement."""
    pytest.importorskip("torch")
    from reslint.trace.engine import trace_file
    from reslint.trace.graph_facts import facts_from_capture

    relative = "fixtures/norms/hand_written.py"
    traced = trace_file(relative, (ROOT / relative).read_bytes(), Settings(static=False),
                        source_path=str(ROOT / relative))
    assert [capture.method for capture in traced.captures] == ["fx"]
    facts = facts_from_capture(traced.captures[0], relative)
    assert [(add.span.line, add.placement) for add in facts.residuals] == [
        (61, "pre"), (62, "pre"), (63, "pre"), (64, "pre")]


def trace_facts(model, *args):
    """The trace engine's facts of a model defined here, captured as the fx Tracer fallback captures."""
    torch = pytest.importorskip("torch")
    from reslint.trace.capture import Capture, fx_capture
    from reslint.trace.graph_facts import facts_from_capture
    from reslint.trace.inputs import Inputs

    with torch.no_grad():
        module, _ = fx_capture(model, Inputs(args=args))
    return facts_from_capture(Capture(module, "fx", model, type(model).__name__, 1), __file__)


def test_every_dropout_module_is_dropout_in_fx_tracer_graphs():
    """`nn.AlphaDropout` on the skip: in an fx Tracer graph the module call was no known op, so the add
    was not a residual at all; its name now comes from the static engine's table."""
    nn = pytest.importorskip("torch").nn

    class AlphaDroppedSkip(nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = nn.AlphaDropout(0.1)
            self.norm = nn.LayerNorm(16)
            self.ff = nn.Linear(16, 16)

        def forward(self, x):
            return self.drop(x) + self.ff(self.norm(x))

    facts = trace_facts(AlphaDroppedSkip(), pytest.importorskip("torch").zeros(2, 8, 16))
    assert [(add.placement, add.dropout_on_skip) for add in facts.residuals] == [("pre", True)]


def test_transformed_skip_may_pass_any_activation():
    """`shortcut(elu(x))`: the static engine follows any activation on a transformed skip path; the trace
    engine knew six, and read this add the wrong way round."""
    torch = pytest.importorskip("torch")
    nn = torch.nn

    class EluShortcut(nn.Module):
        def __init__(self):
            super().__init__()
            self.shortcut = nn.Linear(16, 16)
            self.ff = nn.Linear(16, 16)
            self.norm = nn.LayerNorm(16)

        def forward(self, x):
            return self.norm(self.shortcut(torch.nn.functional.elu(x)) + self.ff(x))

    facts = trace_facts(EluShortcut(), torch.zeros(2, 8, 16))
    # it took `self.ff(x)` for the transformed skip and the shortcut for the branch
    assert [(add.placement, add.skip_projection, add.skip) for add in facts.residuals] == [
        ("post", True, "self.shortcut(torch.nn.functional.elu(x))")]
