"""Captures that need real values or a consistent reduced config (wave 7, transformers full check): a model over
the CPU size limit rebuilt narrower (FSMT), concrete_fx through an expert loop behind a decorator fx refuses
(Switch Transformers) and through a torch.distributions output (Autoformer), a backbone cut to fewer layers
that still returns every stage its neck reads (RF-DETR), and an image size from the model's own image
processor (PP-OCR rec). fixtures/trace/cpu_rebuild.py mirrors each cause in our own code."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from reslint.settings import Settings  # noqa: E402
from reslint.trace.engine import trace_file  # noqa: E402

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "trace" / "cpu_rebuild.py"


@pytest.fixture(scope="module")
def traced():
    result = trace_file(str(FIXTURE), None, Settings(root=str(FIXTURE.parent), timeout=300))
    return result, {capture.model_name: capture for capture in result.captures}


def called_modules(capture) -> list[str]:
    return [node.target for node in capture.graph_module.graph.nodes if node.op == "call_module"]


def innermost_modules(capture) -> list[str]:
    """An exported graph's layers in order: the innermost module of each op's stack, blocks and the root left out."""
    stacks = [list(node.meta["nn_module_stack"].values()) for node in capture.graph_module.graph.nodes
              if node.meta.get("nn_module_stack")]
    paths = dict.fromkeys(stack[-1][0] for stack in stacks)
    return [path for path in paths if path and not any(other.startswith(path + ".") for other in paths)]


def test_every_model_of_the_fixture_traces(traced):
    result, captures = traced
    assert result.findings == []
    assert sorted(captures) == ["DecodingModel", "ExpertModel", "ForecastModel", "StagedModel", "WideMaskedModel"]


def test_a_model_over_the_cpu_limit_is_rebuilt_narrower_for_draft_export(traced):
    """FSMT: `padding_mask.any()` stops export on meta; draft_export needs real values and 51 M parameters
    exceed the CPU rebuild limit, so the same class is built from its config with the widths divided."""
    _, captures = traced
    capture = captures["WideMaskedModel"]
    assert capture.method == "draft_export"
    assert capture.notes[-1] == ("rebuilt on CPU with narrower widths (hidden_size 256 -> 64, vocab_size 200000 -> "
                                 "50000): widths do not change placement")
    assert sum(parameter.numel() for parameter in capture.model.parameters()) < 50_000_000
    guard = FIXTURE.read_text().splitlines().index("        if not padding_mask.any():") + 1
    assert any(f"cpu_rebuild.py:{guard}" in note for note in capture.notes), capture.notes


def test_experts_named_by_a_traced_index_behind_a_decorator_fx_refuses_are_captured_by_concrete_fx(traced):
    """Switch Transformers: fx cannot patch the decorated forward's signature ("co_varnames is too small"),
    `self[f"expert_{index[0]}"]` formats a traced value, and the outputs hold a cache object."""
    _, captures = traced
    capture = captures["ExpertModel"]
    assert capture.method == "concrete_fx"
    experts = [name for name in called_modules(capture) if ".experts." in name]
    assert experts == [f"layers.{layer}.experts.expert_{index}" for layer in range(2) for index in range(4)]


def test_a_forecasters_output_distribution_is_captured_by_export_without_validation(traced):
    """Autoformer: torch.distributions validates its values (`support.check(value).all()`), a data-dependent
    test export stops at and draft_export answered from whatever the process had done before (the fast-path
    comparison failed now and then). Off during export, as torch.compile turns it off for good: plain export."""
    _, captures = traced
    capture = captures["ForecastModel"]
    assert capture.method == "export"
    assert innermost_modules(capture) == ["layers.0.norm", "layers.0.ff", "layers.1.norm", "layers.1.ff", "norm", "head"]


def test_a_backbone_cut_to_fewer_layers_returns_as_many_stages_as_its_neck_reads(traced):
    """RF-DETR: the projector takes 4 x 384 channels, one slice per stage in `out_features`."""
    from reslint.trace.config_reduction import tracing_config

    config, changes = tracing_config(traced[1]["StagedModel"].model.config_class)
    assert changes == [("num_hidden_layers", 6, 3),
                       ("out_features", ["stage2", "stage4", "stage6"], ["stage1", "stage2", "stage3"])]
    assert config.stage_names == ["stem", "stage1", "stage2", "stage3"]
    capture = traced[1]["StagedModel"]
    assert capture.shape_error is None
    assert called_modules(capture).count("norm") == 3


def test_a_decoding_loop_runs_a_few_steps_of_its_cell(traced):
    """SLANeXt: 501 steps of one attention cell, each traced anew, ran past 180 s; five show the same cell."""
    capture = traced[1]["DecodingModel"]
    assert ("max_text_length", 500, 4) in capture.reduction
    assert called_modules(capture).count("cell") <= 5


def test_the_blocks_of_a_stack_run_in_cycles_are_reduced():
    """HRM: `num_hidden_layers` counts H x (L + 1) runs of each stack's `num_layers_per_stack` blocks (128 = 16 x 8):
    the blocks themselves are what a reduced config must cut (430 s of export with 16, about 80 s with 3)."""
    transformers = pytest.importorskip("transformers")
    from reslint.trace.config_reduction import tracing_config

    config, changes = tracing_config(transformers.HrmTextConfig)
    assert changes == [("num_hidden_layers", 128, 2), ("num_layers_per_stack", 16, 3)]


def test_a_config_alias_is_narrowed_once():
    transformers = pytest.importorskip("transformers")
    from reslint.trace.narrow_config import narrowed_config

    config = transformers.SwitchTransformersConfig()
    narrowed, changes = narrowed_config(config, 4)
    assert changes == [("d_model", 768, 192), ("d_ff", 2048, 512), ("d_kv", 64, 16), ("vocab_size", 32128, 8032)]
    assert narrowed.hidden_size == 192 and config.d_model == 768  # `hidden_size` reads `d_model`; the original stays


LINE_MODEL = textwrap.dedent('''\
    import torch
    import torch.nn as nn


    class LineConfig:
        model_type = "line"

        def __init__(self):
            self.hidden_size = 8
            self.num_channels = 3

        def to_dict(self):
            return dict(vars(self))


    class LineRecognizer(nn.Module):
        """A text-line recogniser: the backbone folds the image height to one row, which the head assumes."""
        config_class = LineConfig
        main_input_name = "pixel_values"

        def __init__(self, config):
            super().__init__()
            self.config = config
            self.conv = nn.Conv2d(3, 8, kernel_size=(12, 4), stride=(12, 4))
            self.norm = nn.LayerNorm(8)
            self.head = nn.Linear(8, 8)

        def forward(self, pixel_values):
            rows = self.conv(pixel_values).flatten(3).squeeze(2)  # (batch, 8, width / 4) when 12 rows fold to one
            rows = rows.transpose(1, 2)
            return self.head(self.norm(rows))
''')

LINE_PROCESSOR = textwrap.dedent('''\
    class LineImageProcessor:
        size = {"height": 12, "width": 64}
''')


def test_an_image_size_comes_from_the_models_own_image_processor_where_the_config_has_none(tmp_path):
    (tmp_path / "modeling_line.py").write_text(LINE_MODEL)
    (tmp_path / "image_processing_line.py").write_text(LINE_PROCESSOR)
    result = trace_file(str(tmp_path / "modeling_line.py"), None, Settings(root=str(tmp_path), timeout=120))
    assert result.findings == []
    [capture] = result.captures
    assert capture.shape_error is None
    assert capture.inputs.startswith("pixel_values=float[2,3,12,64] ")
