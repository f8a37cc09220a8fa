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
    assert models["Net"]["engine"] == "traced (export)"
    assert "inputs: float[2,5,16]" in models["Net"]["notes"]
    # --timeout is one budget per file: a model that takes it all is reported where it was built
    document = check("--model", "net.py:Slow()", "--timeout", "4", cwd=tmp_path)
    found = {(f["code"], f["line"]): f["message"] for f in document["findings"]}
    assert found[("RL903", 18)] == "building Slow timed out after 4 s; static facts were used"


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
    assert [(m["name"], m["line"], m["engine"]) for m in traced["models"]] == [("Tagger", 9, "traced (export)")]
    [static_rl201] = [f for f in static["findings"] if f["code"] == "RL201"]
    [traced_rl201] = [f for f in traced["findings"] if f["code"] == "RL201"]
    assert traced_rl201["engine"] == "trace"
    assert traced_rl201["message"] == static_rl201["message"]
    assert static_rl201["message"].startswith(
        "BatchNorm1d in `Tagger`, part of a sequence model (attention (nn.MultiheadAttention), token embeddings (nn.Embedding)):")
