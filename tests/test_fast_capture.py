"""The fast capture path (reslint.trace.fast_capture) gives export's facts: every fixture and example the
fast path serves, traced with it and without it, gives the same trace findings (code, place, message,
severity), the same model summaries and trace outcomes; only the capture method in the engine label
names fx where it served."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from golden import ROOT
from reslint.settings import Settings

pytest.importorskip("torch")

from reslint.analysis import traced_document  # noqa: E402 - needs torch
from reslint.isolation import ChildFailure, run_isolated  # noqa: E402
from reslint.trace import fast_capture  # noqa: E402

GROUPS = max(1, min(2, os.cpu_count() or 1))


def checked_files() -> list[str]:
    """Every fixture and example the full check may import (the hostile fixtures hang or crash on purpose)."""
    files = sorted((ROOT / "fixtures").rglob("*.py")) + sorted((ROOT / "examples").glob("*.py"))
    return [path.relative_to(ROOT).as_posix() for path in files if "hostile" not in path.relative_to(ROOT).parts]


def trace_both_ways(files: list[str]) -> list[dict]:
    """Every file traced with the fast path; the files it served traced again without it (elsewhere the path
    declined before anything was recorded, and export ran as it does without the path). Both ways in one
    child: one torch import and dynamo warm-up, and what the project index reads about a file read once."""
    settings = Settings(static=False, cache=False, root=str(ROOT))
    fast, exported = {}, {}
    for relative in files:
        data = (ROOT / relative).read_bytes()
        fast[relative] = traced(relative, data, settings, fast=True)
        if any(map(fast_path_served, fast[relative]["summaries"])):
            exported[relative] = traced(relative, data, settings, fast=False)
    return [fast, exported]


def traced(relative: str, data: bytes, settings: Settings, fast: bool) -> dict:
    """The file's trace result as the full check's isolated child makes it."""
    fast_capture.ENABLED = fast
    return traced_document(relative, data, settings, str(ROOT / relative))


@pytest.fixture(scope="module")
def both_ways():
    """The files in groups, each traced both ways in its own child, the children at once: CI has 2 CPUs and runs
    the tests one at a time (BENCHMARKS.md, wave 6: the wall time nearly halved)."""
    files = checked_files()
    groups = [files[start::GROUPS] for start in range(GROUPS)]
    with ThreadPoolExecutor(GROUPS) as pool:
        results = list(pool.map(lambda group: run_isolated(trace_both_ways, group, timeout=None), groups))
    fast, exported = {}, {}
    for result in results:
        assert not isinstance(result, ChildFailure), result
        fast.update(result[0])
        exported.update(result[1])
    return fast, exported


def fast_path_served(summary: dict) -> bool:
    return summary["engine"].startswith("traced (fx") and not any("export failed" in note for note in summary["notes"])


def as_exported(summary: dict) -> dict:
    if not fast_path_served(summary):
        return summary
    return {**summary, "engine": summary["engine"].replace("traced (fx", "traced (export", 1)}


def differences(fast: dict, exported: dict) -> dict:
    """What a failure shows: each part that differs, as the fast path and export gave it."""
    return {key: {"fast": fast[key], "export": exported[key]} for key in fast if fast[key] != exported[key]}


def comparable(document: dict, fast: bool) -> dict:
    summaries = [as_exported(summary) if fast else summary for summary in document["summaries"]]
    traces = sorted(document["traces"], key=repr)
    return {"findings": sorted(document["findings"], key=repr), "summaries": summaries, "traces": traces,
            "static_only": document["static_only"], "notes": document["notes"], "imported": document["imported"]}


def test_fast_path_gives_exports_findings_and_summaries_on_every_fixture_and_example(both_ways):
    fast, exported = both_ways
    different = {path: parts for path in exported
                 if (parts := differences(comparable(fast[path], True), comparable(exported[path], False)))}
    assert different == {}
    assert len(exported) >= 50  # the comparison is about something: the fast path served these files


def test_the_fast_path_serves_the_examples(both_ways):
    """Its point: the bundled examples' models are captured without torch.export."""
    fast, _ = both_ways
    engines = {summary["name"]: summary["engine"] for path in ("examples/tiny_gpt.py", "examples/pre_ln_gpt.py",
                                                              "examples/bert_style.py")
               for summary in fast[path]["summaries"]}
    assert engines == {"TinyGPT": "traced (fx)", "GPT": "traced (fx)", "Encoder": "traced (fx)"}
    assert not fast["examples/tiny_gpt.py"]["exported"]


def test_the_fast_path_serves_sizes_splits_statistics_and_timestep_tables(both_ways):
    """nanoGPT's `C // self.n_head` and `split`, a hand-written norm's `var`/`std`, a diffusion model's sinusoidal
    timestep table (`exp`, `sin`, `cos`) with stacked and summed conditions: fx's graph reads as export's (the
    comparison above covers these files), so export's seconds are not spent on them."""
    fast, _ = both_ways
    engines = {summary["name"]: summary["engine"] for path in ("fixtures/models/nanogpt.py", "fixtures/norms/correct.py",
                                                              "fixtures/trace/sinusoidal_steps.py")
               for summary in fast[path]["summaries"]}
    assert engines == {"GPT": "traced (fx)", "Encoder": "traced (fx)", "StepTransformer": "traced (fx)",
                       "PooledStepEncoder": "traced (fx)"}
    assert [finding["code"] for finding in fast["fixtures/trace/sinusoidal_steps.py"]["findings"]] == ["RL103"]


def test_a_forward_that_needs_its_optional_argument_is_traced_by_fx_after_export(both_ways):
    """The fast path holds `temb=None` None as the call does, and declines when the forward needs it; export fails
    the same way; fx after export takes every parameter as given and traces the model (diffusers' blocks)."""
    [summary] = both_ways[0]["fixtures/trace/optional_needed.py"]["summaries"]
    assert summary["engine"] == "traced (fx)" and not fast_path_served(summary)
    assert summary["notes"][0].startswith("export failed: TypeError: expected Tensor")


def test_a_layer_with_residuals_inside_is_left_to_export(both_ways):
    """nn.TransformerEncoderLayer would be one fx leaf hiding its Post-LN residuals: export captures it."""
    document = both_ways[0]["fixtures/builtin/torch_transformer.py"]
    assert {summary["engine"] for summary in document["summaries"]} == {"traced (export)"}
    assert any(finding["code"] == "RL101" for finding in document["findings"])


def test_a_function_export_decomposes_is_left_to_export(both_ways):
    """F.normalize is one fx node but several aten ops in export's graph, where the L2-normalised stream's
    final norm is seen: fx's graph would call the stack unnormalised (a false RL103)."""
    document = both_ways[0]["fixtures/final_norm/l2_normalize.py"]
    engines = {summary["name"]: summary["engine"] for summary in document["summaries"]}
    assert engines["QuantizingEncoder"] == "traced (export)"
    assert not any(finding["code"] == "RL103" for finding in document["findings"])


def test_a_floor_division_of_tensors_is_left_to_export():
    """`C // n` on sizes is a number in export's graph; `x // 2` on a tensor is an op (`floor_divide`) the fast
    path does not spell as export does: it declines, and export captures the model."""
    import torch

    from reslint.trace.inputs import Inputs

    class Sizes(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(8, 8)

        def forward(self, x):
            batch, tokens, width = x.size()
            return self.proj(x).view(batch, tokens, 2, width // 2)

    class Halved(Sizes):
        def forward(self, x):
            return self.proj(x) // 2

    inputs = Inputs((torch.zeros(2, 4, 8, device="meta"),))
    assert fast_capture.fast_capture(Sizes().to("meta"), inputs, "Sizes", 1) is not None
    assert fast_capture.fast_capture(Halved().to("meta"), inputs, "Halved", 1) is None
