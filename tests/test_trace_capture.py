"""Capturing graphs: export on torch's encoder and real transformers classes (tiny configs, meta
device, no downloads), draft_export on data-dependent control flow, RL902/RL903 on failures."""

from __future__ import annotations

import textwrap

import pytest

torch = pytest.importorskip("torch")

from reslint.settings import ModelFactory, Settings
from reslint.trace import capture as capture_module
from reslint.trace.engine import trace_file

TINY = "hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, vocab_size=100"

HF_FILE = textwrap.dedent(f'''\
    import transformers
    from transformers import BertConfig, BertModel, GPT2Config, GPT2Model, GPTNeoXConfig, GPTNeoXModel
    from transformers import LlamaConfig, LlamaModel

    def bert():
        return BertModel(BertConfig({TINY}))

    def gpt2():
        return GPT2Model(GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=100))

    def llama():
        return LlamaModel(LlamaConfig({TINY}))

    def neox():
        return GPTNeoXModel(GPTNeoXConfig({TINY}))
''')

ENCODERS = textwrap.dedent('''\
    import torch.nn as nn


    class PostEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            layer = nn.TransformerEncoderLayer(32, 2, 64, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

        def forward(self, x):
            return self.encoder(x)


    class PreEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            layer = nn.TransformerEncoderLayer(32, 2, 64, batch_first=True, norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(32), enable_nested_tensor=False)

        def forward(self, x):
            return self.encoder(x)
''')

FAILING = textwrap.dedent('''\
    import torch
    import torch.nn as nn


    class Branchy(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)
            self.norm = nn.LayerNorm(8)

        def forward(self, x):
            h = self.fc(x)
            if h.sum() > 0:
                return self.norm(x + h)
            return x + h


    class Raises(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x):
            raise ValueError("unsupported width")


    class BadInit(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)
            raise RuntimeError("cannot build\\nmore")

        def forward(self, x):
            return self.fc(x)
''')


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def by_name(result):
    return {capture.model_name: capture for capture in result.captures}


def test_torch_encoders_are_exported(tmp_path):
    path = write(tmp_path, "encoders.py", ENCODERS)
    result = trace_file(path, None, Settings(root=str(tmp_path)))
    assert result.findings == []
    captures = by_name(result)
    assert {name: c.method for name, c in captures.items()} == {"PostEncoder": "export", "PreEncoder": "export"}
    graph = captures["PreEncoder"].graph_module.graph
    targets = {str(node.target) for node in graph.nodes if node.op == "call_function"}
    assert "aten.layer_norm.default" in targets  # never decomposed
    placeholders = [node for node in graph.nodes if node.op == "placeholder"]
    assert all(node.meta["val"].device.type == "meta" for node in placeholders if "val" in node.meta)


def test_transformers_models_are_exported_on_meta(tmp_path):
    pytest.importorskip("transformers")
    path = write(tmp_path, "hf.py", HF_FILE)
    factories = tuple(ModelFactory(f"{path}:{name}()") for name in ("bert", "gpt2", "llama", "neox"))
    result = trace_file(path, None, Settings(root=str(tmp_path), models=factories))
    assert result.findings == []
    methods = {name: c.method for name, c in by_name(result).items()}
    assert methods == {"BertModel": "export", "GPT2Model": "export", "LlamaModel": "export", "GPTNeoXModel": "export"}
    for capture in result.captures:
        assert any("input_ids" in note for note in capture.notes)
        assert all(p.is_meta for p in capture.model.parameters())


def test_data_dependent_control_flow_uses_draft_export(tmp_path):
    path = write(tmp_path, "failing.py", FAILING)
    result = trace_file(path, None, Settings(root=str(tmp_path)))
    branchy = by_name(result)["Branchy"]
    assert branchy.method == "draft_export"
    assert any("branch the example input took" in note and "failing.py:13" in note for note in branchy.notes), branchy.notes
    # Discovered models and inferred inputs: reslint's guesses, so info
    findings = {(f.code, f.line, f.effective_severity): f.message for f in result.findings}
    assert findings == {
        ("RL903", 24, "info"): "the forward of Raises raised ValueError: unsupported width; reslint inferred the "
                               "inputs float[2,16,8] (inferred from Linear (fc)); pass --inputs; static findings are "
                               "still reported",
        ("RL902", 31, "info"): "cannot build BadInit: RuntimeError: cannot build (reslint built it from its defaults; "
                               "pass --model FILE:EXPR to build it yourself); static findings are still reported",
    }
    assert set(result.static_only) >= {"Raises", "BadInit"}


def test_rl903_only_when_every_tracer_fails(tmp_path, monkeypatch):
    monkeypatch.setattr(capture_module, "DRAFT_EXPORT_MAX_PARAMETERS", 0)  # as for a model too large for CPU
    path = write(tmp_path, "failing.py", FAILING)
    result = trace_file(path, None, Settings(root=str(tmp_path), models=(ModelFactory(f"{path}:Branchy()"),)))
    assert result.captures == []
    [finding] = result.findings
    assert (finding.code, finding.line, finding.engine) == ("RL903", 5, "trace")  # the model class
    assert finding.message.startswith("tracing Branchy failed (export, draft_export, fx, concrete_fx) at failing.py:13: ")
    assert "data-dependent" in finding.message and "\n" not in finding.message


def test_fx_fallback_propagates_meta_shapes_and_reports_where_they_break():
    class Mismatch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(16, 17)

        def forward(self, x):
            return x + self.fc(x)

    from reslint.trace.inputs import from_text

    with torch.device("meta"):
        model = Mismatch()
    capture, failures = capture_module.capture_model(model, from_text("float[2,16,16]", {}, "meta"),
                                                     name="Mismatch", line=1, path=__file__)
    assert [failure.method for failure in failures] == ["export"]
    assert capture.method == "fx"
    node, message = capture.shape_error
    assert node == "add" and "16" in message and "17" in message
    linear = next(n for n in capture.graph_module.graph.nodes if n.op == "call_module")
    assert tuple(linear.meta["val"].shape) == (2, 16, 17)
    assert linear.meta["tensor_meta"].shape == (2, 16, 17)
    assert any(n.stack_trace for n in capture.graph_module.graph.nodes if n.op == "call_module")


def test_hf_style_config_class_is_discovered_and_built_on_meta(tmp_path):
    pytest.importorskip("transformers")
    path = write(tmp_path, "tiny_gpt.py", textwrap.dedent('''\
        from transformers import GPT2Config, GPT2Model


        class TinyConfig(GPT2Config):
            def __init__(self, **kwargs):
                super().__init__(n_embd=32, n_layer=2, n_head=2, vocab_size=100, n_positions=32, **kwargs)


        class TinyGPT(GPT2Model):
            config_class = TinyConfig
    '''))
    result = trace_file(path, None, Settings(root=str(tmp_path)))
    assert result.findings == []
    [capture] = result.captures
    assert (capture.model_name, capture.class_line, capture.method) == ("TinyGPT", 9, "export")
    assert capture.model.config.n_layer == 2 and all(p.is_meta for p in capture.model.parameters())


MASKED = textwrap.dedent('''\
    import torch.nn as nn


    class Masked(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x, mask):
            return x + self.fc(x) * mask.unsqueeze(-1)


    class Sized(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x, mode: str):
            return x + self.fc(x)
''')


def test_a_mask_is_inferred_a_missing_input_asks_for_inputs_and_inputs_fix_it(tmp_path, monkeypatch):
    from reslint.trace import fast_capture

    monkeypatch.setattr(fast_capture, "ENABLED", False)  # export's own inference of the mask is what is tested
    path = write(tmp_path, "masked.py", MASKED)
    result = trace_file(path, None, Settings(root=str(tmp_path)))
    [masked] = result.captures
    assert (masked.model_name, masked.method) == ("Masked", "export")
    assert masked.inputs == "float[2,16,8]; mask=bool[2,16] (inferred from Linear (fc))"
    [finding] = result.findings
    assert (finding.code, finding.line, finding.effective_severity) == ("RL903", 13, "info")
    assert finding.message == ("tracing Sized failed (export, fx): TypeError: missing a required argument: 'mode'; "
                               "reslint inferred the inputs float[2,16,8] (inferred from Linear (fc)); pass --inputs; "
                               "static facts were used")
    result = trace_file(path, None, Settings(root=str(tmp_path), inputs="float[2,4,8]; float[2,4]"))
    assert by_name(result)["Masked"].method == "export"
