"""Both engines classify residual placement with one classifier (reslint.placement): on every fixture
and example both can handle, the static engine and the trace engine give each residual add the same label.

"Both can handle": the trace engine builds and traces the file's models itself, and the static engine
reports a residual add at the same line. Labels are compared per add and per stack.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import libcst as cst  # noqa: E402

from reslint.placement import combined_placement, residual_placement  # noqa: E402
from reslint.settings import Settings  # noqa: E402
from reslint.static.engine import extract_facts  # noqa: E402
from reslint.trace.engine import trace_file  # noqa: E402
from reslint.trace.graph_facts import facts_from_capture  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# They hang, crash or raise when imported (fixtures/hostile/), do not parse (fixtures/errors/), or are
# training scripts and fix inputs, not models.
SKIPPED = ("fixtures/hostile/", "fixtures/errors/", "fixtures/warmup/", "fixtures/fixes/")


# Known divergences, each with its cause; the test fails when one disappears, so that the entry goes too.
# The static engine does not read the submodules a class inherits from a base class in another file
# (`AltUpDecoderLayer(DecoderLayerBase)` builds its norms in base_layer.py), so it sees no pre-norm there.
KNOWN_DIVERGENCES = {
    "fixtures/placement/altup/layer.py:37": "inherited norms from another file",
    "fixtures/placement/altup/layer.py:39": "inherited norms from another file",
    # `text + prompts(text, video)` whose branch is a whole Pre-LN stack reading a second input: the static
    # engine labels the add parallel-pre, the trace engine pre (neither gives a finding)
    "fixtures/final_norm/stream_end_added_back_normed.py:46": "a residual whose branch is a whole stack",
    # Norms passed to the block's constructor as modules (torchtune's `sa_norm: nn.Module`): the static engine
    # cannot know the argument is a norm (no placement), the trace engine builds the site's LayerNorm (pre).
    "fixtures/module_arguments/layer_modules/model.py:16": "a norm passed to the constructor as a module",
    "fixtures/module_arguments/layer_modules/model.py:17": "a norm passed to the constructor as a module",
    # A layer Post-LN by its own default that the project's stacks build Pre-LN: the trace engine builds it as
    # they do (pre); the static engine's label of the class keeps its default (post), while RL101 and the
    # model summaries follow the stacks (no finding differs; static/built_elsewhere.py).
    **{f"fixtures/project/kwargs_defaults_{variant}/layers.py:19": "a layer's own default vs how the stacks build it"
       for variant in ("post", "raises", "warmup")},
    # The same for the FeedForward the encoder's layers hold: since a layer several blocks share is traced
    # inside each block (no longer replayed alone as a backbone), it is labelled as EncoderLayer builds it.
    "fixtures/project/rl101_built_pre/layers.py:22": "a layer's own default vs how the stacks build it",
}


def model_files() -> list[Path]:
    files = sorted((ROOT / "fixtures").rglob("*.py")) + sorted((ROOT / "examples").glob("*.py"))
    return [path for path in files if not path.relative_to(ROOT).as_posix().startswith(SKIPPED)]


def labels(facts) -> tuple[dict, dict]:
    """{line: labels of the adds there} and {stack key: label}. A stack chosen by a flag the static engine
    cannot evaluate is "configurable" there; the trace engine sees the one that was built."""
    adds: dict[int, set] = {}
    for add in facts.residuals:
        if not add.builtin:
            adds.setdefault(add.span.line, set()).add(residual_placement(add))
    stacks = {key: combined_placement(facts.residuals_of_stack(key)) for key, stack in facts.stacks.items()
              if not stack.builtin_placement}
    return adds, {key: label for key, label in stacks.items() if label != "configurable"}


def disagreements(path: Path) -> tuple[list[str], int]:
    """What the engines label differently, and how many adds and stacks both labelled."""
    relative = path.relative_to(ROOT).as_posix()
    static_adds, static_stacks = labels(extract_facts(relative, cst.parse_module(path.read_text()), str(path)))
    traced = trace_file(relative, path.read_bytes(), Settings(static=False), source_path=str(path))
    found, compared = [], 0
    for capture in traced.captures:
        trace_adds, trace_stacks = labels(facts_from_capture(capture, relative))
        for where, ours, theirs in ((f"{relative}:", static_adds, trace_adds), (f"{relative} ", static_stacks,
                                                                                  trace_stacks)):
            both = sorted(set(ours) & set(theirs))
            compared += len(both)
            found += [f"{where}{key} ({capture.model_name}): static {ours[key]}, trace {theirs[key]}"
                      for key in both if ours[key] != theirs[key]]
    return found, compared


@pytest.mark.agreement
@pytest.mark.parametrize("path", model_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_both_engines_give_the_same_placement(path):
    found, compared = disagreements(path)
    if not compared:
        pytest.skip("no residual add or stack that both engines label (models not built, or none)")
    relative = path.relative_to(ROOT).as_posix()
    unexplained = [line for line in found if line.split(" (")[0] not in KNOWN_DIVERGENCES]
    assert unexplained == []
    seen = {line.split(" (")[0] for line in found}
    stale = [where for where in KNOWN_DIVERGENCES if where.startswith(relative + ":") and where not in seen]
    assert stale == [], "the engines agree there now: remove these from KNOWN_DIVERGENCES"


if __name__ == "__main__":  # what each file compares: python tests/test_placement_agreement.py
    for path in model_files():
        print(path.relative_to(ROOT).as_posix(), *disagreements(path), flush=True)
