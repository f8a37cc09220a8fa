"""Static precision on transformers (issue 12, wave 3): each fixture mirrors a pattern of the installed
transformers that drew a false warning or lost a true RL103, and both engines must give the same exact
findings on it (the full check runs the fixtures with real torch tracing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reslint.api import check

ROOT = Path(__file__).resolve().parent.parent


def rl103(owner: str) -> str:
    return (f"the Pre-LN stack `self.layers` of `{owner}` feeds the head/output without a final norm: in Pre-LN the "
            "residual stream is never normalised and grows with depth; add a final LayerNorm/RMSNorm after the "
            "last block (as GPT-2's ln_f)")


RL201_CONV_MIXER = ("BatchNorm1d in `ConvTokenMixer`, part of a sequence model (attention (nn.MultiheadAttention), "
                    "token embeddings (nn.Embedding)): its statistics mix samples and positions of the batch and "
                    "padding, and differ between training and inference; use nn.LayerNorm or nn.RMSNorm over the "
                    "feature dimension")

# fixture -> the exact warnings both engines report (code, line, message); nothing else at warning level.
CASES = {
    # TimesFM, TimesFM 2.5, PatchTSMixer, Donut-Swin: the true RL103 the stream-end logic had lost.
    "fixtures/final_norm/forecaster.py": [("RL103", 32, rl103("PatchDecoder"))],
    # Step3p7, unlimited_ocr: the consumer keeps the projected features in a dict.
    "fixtures/final_norm/vision_language.py": [("RL103", 30, rl103("VisionTower"))],
    # Gemma 4: the encoder's model is loaded through AutoModel by a consumer that normalises (was a false RL103).
    "fixtures/final_norm/auto_tower.py": [],
    # GroupViT: BatchNorm1d after a Linear in the projection heads (was a false RL201 twice).
    "fixtures/batchnorm/projection_head.py": [("RL201", 46, RL201_CONV_MIXER)],
    # Gemma 3n's modular file: the AltUp router norm read as Post-LN, the stack as mixed (was a false RL102).
    "fixtures/placement/altup/layer.py": [],
}


def warnings(path: str, static: bool) -> list[tuple[str, int, str]]:
    report = check(path, static=static, jobs=1, cache=False, cwd=ROOT)
    if not static:
        assert report.models and all(model.engine.startswith("traced") for model in report.models if model.path == path)
    return sorted((f.code, f.line, f.message) for f in report.findings
                  if f.path == path and f.severity in ("warning", "error"))


@pytest.mark.parametrize("path", sorted(CASES))
def test_static_engine_reports_exactly_the_true_findings(path):
    assert warnings(path, static=True) == CASES[path]


@pytest.mark.parametrize("path", sorted(CASES))
def test_trace_engine_agrees(path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    assert warnings(path, static=False) == CASES[path]


def test_the_altup_layer_is_not_post_ln_in_either_engine():
    """The info-level RL101 that came with the false RL102 is gone too; the base layer stays Sandwich-LN."""
    report = check("fixtures/placement/altup/layer.py", static=True, jobs=1, cache=False, cwd=ROOT)
    assert [f.code for f in report.findings] == []
    assert [(model.name, [stack.placement for stack in model.stacks]) for model in report.models] == [
        ("AltUpModel", ["pre"])]
