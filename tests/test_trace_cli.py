"""`reslint check` with the trace engine, end to end in subprocesses (real torch and transformers)."""

from __future__ import annotations

import json
import textwrap

import pytest
from cli_support import POST_LN, POST_LN_LINE, run_module, write

pytest.importorskip("torch")

BROKEN_IMPORT = textwrap.dedent('''\
    import torch.nn as nn

    WIDTH = int("not a number")


    class Model(nn.Module):
        def forward(self, x):
            return x
''')

HF_STYLE = textwrap.dedent('''\
    from transformers import GPT2Config, GPT2Model


    class TinyConfig(GPT2Config):
        def __init__(self, **kwargs):
            super().__init__(n_embd=32, n_layer=2, n_head=2, vocab_size=100, n_positions=32, **kwargs)


    class TinyGPT(GPT2Model):
        config_class = TinyConfig
''')

FACTORY = textwrap.dedent('''\
    import time

    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self, width, depth=2):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])
            self.norm = nn.LayerNorm(width)

        def forward(self, x):
            for layer in self.layers:
                x = self.norm(x + layer(x))
            return x


    class Slow(nn.Module):
        def __init__(self):
            super().__init__()
            time.sleep(30)
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            return self.fc(x)
''')


def check(*args, cwd):
    result = run_module("check", "--no-cache", "--output-format", "json", *args, cwd=cwd)
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


def test_import_failure_is_rl902_and_other_files_are_still_checked(tmp_path):
    transformers = pytest.importorskip("transformers")  # noqa: F841
    write(tmp_path, {"broken.py": BROKEN_IMPORT, "post.py": POST_LN, "hf.py": HF_STYLE})
    document = check("--jobs", "2", cwd=tmp_path)
    found = {(f["path"], f["code"], f["line"]): f for f in document["findings"]}
    rl902 = found[("broken.py", "RL902", 3)]
    assert rl902["message"] == ("importing the file failed: ValueError: invalid literal for int() with base 10: "
                                "'not a number'; static findings are still reported")
    assert rl902["engine"] == "trace"
    assert ("post.py", "RL101", POST_LN_LINE) in found
    assert not [f for f in document["findings"] if f["path"] == "hf.py"]


def test_model_factory_inputs_and_timeout(tmp_path):
    write(tmp_path, {"net.py": FACTORY})
    document = check("--model", "net.py:Net(16, depth=3)", "--inputs", "float[2,5,16]", cwd=tmp_path)
    models = {model["name"]: model for model in document["models"]}
    assert models["Net"]["engine"] == "traced (fx)"  # fast_capture: export's facts
    assert "inputs: float[2,5,16]" in models["Net"]["notes"]
    # --timeout is one budget per file: a model that takes it all is reported where it was built
    document = check("--model", "net.py:Slow()", "--timeout", "4", cwd=tmp_path)
    found = {(f["code"], f["line"]): f["message"] for f in document["findings"]}
    assert found[("RL903", 18)] == "building Slow timed out after 4 s; static facts were used"


def test_inputs_the_model_cannot_take_are_a_warning_not_a_pass(tmp_path):
    # width 16 built, width 999 given: the user's own inputs do not run, so nothing was checked by tracing
    write(tmp_path, {"net.py": FACTORY})
    result = run_module("check", "--no-cache", "--model", "net.py:Net(16)", "--inputs", "float[2,5,999]", cwd=tmp_path)
    assert result.returncode == 1, result.stdout
    first = result.stdout.splitlines()[0]
    assert first.startswith("net.py:14:1: RL902 [warning] the forward of Net raised RuntimeError: ")
    assert first.endswith("at layers_0 on the inputs given (float[2,5,999]); fix --inputs; static findings are still reported")
    assert "Traced 0 of 1 model" in result.stdout


def test_bad_model_spec_is_a_usage_error(tmp_path):
    write(tmp_path, {"net.py": FACTORY})
    result = run_module("check", "--model", "no-colon", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("reslint: error: --model 'no-colon': expected FILE_OR_MODULE:EXPR")
    missing = run_module("check", "--model", "gone.py:Net(4)", cwd=tmp_path)
    assert (missing.returncode, missing.stderr) == (2, "reslint: error: --model 'gone.py:Net(4)': file not found: gone.py\n")


DECORATED_TAGGER = textwrap.dedent('''\
    import torch.nn as nn


    def registered(cls):
        return cls


    @registered
    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(100, 16)
            self.attn = nn.MultiheadAttention(16, 2, batch_first=True)
            self.ln = nn.LayerNorm(16)
            self.norm = nn.BatchNorm1d(16)

        def forward(self, tokens):
            x = self.embed(tokens)
            x = self.ln(x + self.attn(x, x, x)[0])
            return self.norm(x.transpose(1, 2))
''')


def test_both_engines_name_the_class_line_and_word_rl201_alike(tmp_path):
    """A decorated model: its summary line is the `class` statement's in both modes, not the decorator's,
    and RL201 reads the same whichever engine found it."""
    write(tmp_path, {"tagger.py": DECORATED_TAGGER})
    static = json.loads(run_module("check", "--static", "--no-cache", "--output-format", "json", cwd=tmp_path).stdout)
    traced = check(cwd=tmp_path)
    assert [(m["name"], m["line"]) for m in static["models"]] == [("Tagger", 9)]
    assert [(m["name"], m["line"], m["engine"]) for m in traced["models"]] == [("Tagger", 9, "traced (fx)")]
    [static_rl201] = [f for f in static["findings"] if f["code"] == "RL201"]
    [traced_rl201] = [f for f in traced["findings"] if f["code"] == "RL201"]
    assert traced_rl201["engine"] == "trace"
    assert traced_rl201["message"] == static_rl201["message"]
    assert static_rl201["message"].startswith(
        "BatchNorm1d in `Tagger`, part of a sequence model (attention (nn.MultiheadAttention), token embeddings (nn.Embedding)):")
# ----- the gate: reslint's own limits are info, correct upstream models pass ----------------------

ZOO = textwrap.dedent('''\
    """Correct upstream models, shrunk: each is discovered through its config_class and traced."""
    import torch  # noqa: F401 - the user code around these models
    from transformers import (BertConfig, BertForMaskedLM, GPT2Config, GPT2ForSequenceClassification, LlamaConfig,
                              LlamaForCausalLM, T5Config, T5ForConditionalGeneration, ViTConfig,
                              ViTForImageClassification)

    SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, vocab_size=100)


    class TinyGPT2Config(GPT2Config):
        def __init__(self, **kwargs):
            super().__init__(**{"n_embd": 32, "n_layer": 2, "n_head": 2, "vocab_size": 100, **kwargs})


    class TinyGPT2(GPT2ForSequenceClassification):
        config_class = TinyGPT2Config


    class TinyLlamaConfig(LlamaConfig):
        def __init__(self, **kwargs):
            super().__init__(**{**SMALL, "num_key_value_heads": 2, **kwargs})


    class TinyLlama(LlamaForCausalLM):
        config_class = TinyLlamaConfig


    class TinyBertConfig(BertConfig):
        def __init__(self, **kwargs):
            super().__init__(**{**SMALL, **kwargs})


    class TinyBert(BertForMaskedLM):
        config_class = TinyBertConfig


    class TinyViTConfig(ViTConfig):
        def __init__(self, **kwargs):
            super().__init__(**{**SMALL, "image_size": 48, "patch_size": 16, **kwargs})


    class TinyViT(ViTForImageClassification):
        config_class = TinyViTConfig


    class TinyT5Config(T5Config):
        def __init__(self, **kwargs):
            super().__init__(**{"d_model": 32, "d_kv": 16, "d_ff": 64, "num_layers": 2, "num_heads": 2,
                                "vocab_size": 100, **kwargs})


    class TinyT5(T5ForConditionalGeneration):
        config_class = TinyT5Config
''')


def test_correct_upstream_models_pass_the_full_check(tmp_path):
    """GPT-2 (a sequence-classification head without a pad token), LLaMA, BERT, ViT (48x48 images) and
    T5 (an encoder-decoder) are traced with the inputs they declare, and the gate passes."""
    pytest.importorskip("transformers")
    write(tmp_path, {"zoo.py": ZOO})
    # Five models in one file: a generous per-file budget, so that a loaded machine cannot turn them into RL903s.
    result = run_module("check", "--no-cache", "--jobs", "1", "--timeout", "110", "--output-format", "json", "zoo.py",
                        cwd=tmp_path)
    assert result.returncode == 0, result.stdout
    document = json.loads(result.stdout)
    assert [f for f in document["findings"] if f["severity"] != "info"] == []
    assert {trace["name"]: trace["traced"] for trace in document["traces"]} == {
        "TinyGPT2": True, "TinyLlama": True, "TinyBert": True, "TinyViT": True, "TinyT5": True}
    summary = document["summary"]
    assert (summary["models_traced"], summary["models_total"], summary["not_traced"]) == (5, 5, {})
    notes = {model["name"]: model["notes"] for model in document["models"]}
    assert "inputs: input_ids=long[1,16]<100 (inferred from TinyGPT2 input_ids, sized from its config)" in notes["TinyGPT2"]
    assert "inputs: pixel_values=float[2,3,48,48] (inferred from TinyViT pixel_values, sized from its config)" in notes["TinyViT"]
    assert any(note.startswith("inputs: decoder_input_ids=long[3,5]") and note.endswith("(inferred from TinyT5.dummy_inputs)")
               for note in notes["TinyT5"])


SITUATIONS = {
    "optional.py": textwrap.dedent('''\
        import torch.nn as nn
        import reslint_missing_optional_package  # noqa: F401


        class Net(nn.Module):
            def forward(self, x):
                return x
    '''),
    "guesses.py": textwrap.dedent('''\
        import torch.nn as nn


        class NeedsWidth(nn.Module):
            def __init__(self, width=None):
                super().__init__()
                if width is None:
                    raise ValueError("pass a width")
                self.fc = nn.Linear(width, width)

            def forward(self, x):
                return self.fc(x)


        class Picky(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 8)

            def forward(self, x):
                if x.shape[1] != 3:
                    raise ValueError("expects 3 positions")
                return self.fc(x)


        class Buggy(nn.Module):
            def __init__(self, sizes=(8, 16)):
                super().__init__()
                self.sizes = sizes + [32]

            def forward(self, x):
                return x
    '''),
    "factory.py": textwrap.dedent('''\
        import torch.nn as nn


        class Wide(nn.Module):
            def __init__(self, width):
                super().__init__()
                if width > 4:
                    raise ValueError("too wide")
                self.fc = nn.Linear(width, width)

            def forward(self, x):
                return self.fc(x)
    '''),
}


def test_reslints_own_guesses_are_info_and_the_users_factory_a_warning(tmp_path):
    write(tmp_path, SITUATIONS)
    result = run_module("check", "--no-cache", "--jobs", "1", "--output-format", "json",
                        "--model", "factory.py:Wide(8)", ".", cwd=tmp_path)
    document = json.loads(result.stdout)
    found = {(f["path"], f["line"], f["code"], f["severity"]): f["message"] for f in document["findings"]}
    assert set(found) == {
        ("optional.py", 2, "RL902", "info"),  # a missing optional package
        ("guesses.py", 8, "RL902", "info"),  # the defaults reslint built it from are rejected by a raise
        ("guesses.py", 22, "RL903", "info"),  # the forward rejects the inputs reslint inferred
        ("guesses.py", 29, "RL902", "warning"),  # the defaults crash in the file's own code: a bug
        ("factory.py", 8, "RL902", "warning"),  # the factory the user named raises
    }
    assert found[("optional.py", 2, "RL902", "info")] == (
        "importing the file failed: ModuleNotFoundError: No module named 'reslint_missing_optional_package' "
        "(an optional package is not installed); static findings are still reported")
    assert found[("guesses.py", 8, "RL902", "info")] == (
        "cannot build NeedsWidth: ValueError: pass a width (reslint built it from its defaults; pass --model "
        "FILE:EXPR to build it yourself); static findings are still reported")
    assert found[("guesses.py", 22, "RL903", "info")] == (
        "the forward of Picky raised ValueError: expects 3 positions; reslint inferred the inputs float[2,16,8] "
        "(inferred from Linear (fc)); pass --inputs; static findings are still reported")
    assert found[("guesses.py", 29, "RL902", "warning")] == (
        "cannot build Buggy: TypeError: can only concatenate tuple (not \"list\") to tuple: building it from its "
        "defaults crashes in this file's own code, a bug unless those defaults are not meant to build; "
        "static findings are still reported")
    assert found[("factory.py", 8, "RL902", "warning")] == (
        "cannot build Wide: ValueError: too wide; static findings are still reported")
    assert result.returncode == 1  # the two warnings; without them the gate passes
    summary = document["summary"]
    assert (summary["models_traced"], summary["models_total"], summary["files_not_imported"]) == (0, 4, 1)
    assert summary["not_traced"] == {"build failed": 3, "trace failed": 1}
    quiet = run_module("check", "--no-cache", "--jobs", "1", "optional.py", "guesses.py", cwd=tmp_path)
    assert "Traced 0 of 3 models; static facts for 3 (2 build failed, 1 trace failed; see RL902/RL903); " \
           "1 file not imported." in quiet.stdout
    gate = run_module("check", "--no-cache", "--jobs", "1", "--ignore", "RL902", "optional.py", "guesses.py",
                      cwd=tmp_path)
    assert gate.returncode == 0, gate.stdout


KWARGS_ONLY = textwrap.dedent('''\
    import torch.nn as nn


    class AttentionLayers(nn.Module):
        def __init__(self, dim, depth=2, causal=False):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(dim, dim) for _ in range(depth)])

        def forward(self, x):
            for layer in self.layers:
                x = x + layer(x)
            return x


    class Encoder(AttentionLayers):
        def __init__(self, **kwargs):
            super().__init__(causal=False, **kwargs)
''')


def test_a_class_taking_only_kwargs_for_a_base_that_needs_arguments_is_built_from_the_bases_arguments(tmp_path):
    # x-transformers' Encoder(**kwargs) -> AttentionLayers(dim, ...): the base's `dim` is inferred (not a crash)
    write(tmp_path, {"layers.py": KWARGS_ONLY})
    document = check("--jobs", "1", "layers.py", cwd=tmp_path)
    assert document["findings"] == []
    assert [(t["name"], t["traced"]) for t in document["traces"]] == [("AttentionLayers", True), ("Encoder", True)]


def test_a_factory_that_does_not_parse_is_a_usage_error(tmp_path):
    write(tmp_path, SITUATIONS)
    result = run_module("check", "--model", "factory.py:Wide(8", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == "reslint: error: --model 'factory.py:Wide(8': EXPR is not a Python expression: '(' was never closed\n"
    write(tmp_path, {"pyproject.toml": '[[tool.reslint.models]]\nfactory = "factory.py:Wide(8))"\n'})
    configured = run_module("check", "factory.py", cwd=tmp_path)
    assert configured.returncode == 2 and configured.stderr.count("\n") == 1, configured.stderr
    assert "tool.reslint.models[0].factory: 'factory.py:Wide(8))': EXPR is not a Python expression: unmatched ')'" in configured.stderr


PLACEHOLDER_SIZE = textwrap.dedent('''\
    import math

    import torch
    import torch.nn as nn


    class PositionalEncoding(nn.Module):
        def __init__(self, size: int = 0, max_len: int = 64):
            super().__init__()
            div_term = torch.exp(torch.arange(0, size, 2).float() * -(math.log(10000.0) / size))
            self.register_buffer("pe", torch.sin(torch.arange(max_len).unsqueeze(1) * div_term))

        def forward(self, emb):
            return emb + self.pe[: emb.size(1)]
''')


def test_a_placeholder_size_default_that_crashes_is_reslints_guess_but_a_named_model_is_a_warning(tmp_path):
    # joeynmt's PositionalEncoding(size=0): every caller passes the hidden size; 0 is a placeholder
    write(tmp_path, {"layers.py": PLACEHOLDER_SIZE})
    document = check("--jobs", "1", "layers.py", cwd=tmp_path)
    # discovered: reslint builds it with an inferred width instead of the placeholder; its guessed inputs then
    # do not fit the half-width table, and every step of that was reslint's guess (info, the gate passes)
    assert [(f["line"], f["code"], f["severity"]) for f in document["findings"]] == [(7, "RL903", "info")]
    assert "reslint inferred the inputs" in document["findings"][0]["message"]
    named = check("--jobs", "1", "--model", "layers.py:PositionalEncoding()", "layers.py", cwd=tmp_path)
    assert [(f["line"], f["code"], f["severity"]) for f in named["findings"]] == [(10, "RL902", "warning")]
