"""The fast capture path (reslint.trace.fast_capture) gives export's facts: every fixture and example the
fast path serves, traced with it and without it, gives the same trace findings (code, place, message,
severity), the same model summaries and trace outcomes; only the capture method in the engine label
names fx where it served."""

from __future__ import annotations

import pytest

from golden import ROOT
from reslint.settings import Settings

pytest.importorskip("torch")

from reslint.analysis import traced_document  # noqa: E402 - needs torch
from reslint.isolation import ChildFailure, run_isolated  # noqa: E402
from reslint.trace import fast_capture  # noqa: E402


def checked_files() -> list[str]:
    """Every fixture and example the full check may import (the hostile fixtures hang or crash on purpose)."""
    files = sorted((ROOT / "fixtures").rglob("*.py")) + sorted((ROOT / "examples").glob("*.py"))
    return [path.relative_to(ROOT).as_posix() for path in files if "hostile" not in path.relative_to(ROOT).parts]


def trace_all(files: list[str], fast: bool) -> dict:
    """Each file's trace result, as the full check's isolated child makes it; all files in one child (one
    torch import) so that the comparison stays affordable."""
    fast_capture.ENABLED = fast
    settings = Settings(static=False, cache=False, root=str(ROOT))
    return {relative: traced_document(relative, (ROOT / relative).read_bytes(), settings, str(ROOT / relative))
            for relative in files}


@pytest.fixture(scope="module")
def both_ways():
    """Every file traced with the fast path; the files it served traced again without it (elsewhere
    the path declined before anything was recorded, and export ran as it does without the path)."""
    fast = run_isolated(trace_all, checked_files(), True, timeout=None)
    assert not isinstance(fast, ChildFailure), fast
    served = [path for path, document in fast.items() if any(map(fast_path_served, document["summaries"]))]
    exported = run_isolated(trace_all, served, False, timeout=None)
    assert not isinstance(exported, ChildFailure), exported
    return fast, exported


def fast_path_served(summary: dict) -> bool:
    return summary["engine"].startswith("traced (fx") and not any("export failed" in note for note in summary["notes"])


def as_exported(summary: dict) -> dict:
    if not fast_path_served(summary):
        return summary
    return {**summary, "engine": summary["engine"].replace("traced (fx", "traced (export", 1)}


def comparable(document: dict, fast: bool) -> dict:
    summaries = [as_exported(summary) if fast else summary for summary in document["summaries"]]
    traces = sorted(document["traces"], key=repr)
    return {"findings": sorted(document["findings"], key=repr), "summaries": summaries, "traces": traces,
            "static_only": document["static_only"], "notes": document["notes"], "imported": document["imported"]}


def test_fast_path_gives_exports_findings_and_summaries_on_every_fixture_and_example(both_ways):
    fast, exported = both_ways
    different = [path for path in exported if comparable(fast[path], True) != comparable(exported[path], False)]
    assert different == []
    assert len(exported) >= 50  # the comparison is about something: the fast path served these files


def test_the_fast_path_serves_the_examples(both_ways):
    """Its point: the bundled examples' models are captured without torch.export."""
    fast, _ = both_ways
    engines = {summary["name"]: summary["engine"] for path in ("examples/tiny_gpt.py", "examples/pre_ln_gpt.py",
                                                              "examples/bert_style.py")
               for summary in fast[path]["summaries"]}
    assert engines == {"TinyGPT": "traced (fx)", "GPT": "traced (fx)", "Encoder": "traced (fx)"}
    assert not fast["examples/tiny_gpt.py"]["exported"]


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
