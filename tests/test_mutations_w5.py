"""Tests added by the wave-5 mutation audit of wave-4 code: each pins a behaviour a deliberately injected
bug changed while every earlier test still passed (the audit's table is in BENCHMARKS.md)."""

from __future__ import annotations

import textwrap

from cli_support import codes, run_reslint, write
from reslint.analysis import analyze_file
from reslint.settings import Settings

UNBIASED = ("hand-written LayerNorm in `{}` uses the unbiased variance (divides by n - 1), unlike nn.LayerNorm: "
            "pass unbiased=False (or correction=0)")


def static_findings(tmp_path, source: str) -> list[tuple[int, str, str]]:
    path = tmp_path / "model.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    result = analyze_file("model.py", path.read_bytes(), Settings(static=True), str(path))
    return [(finding.line, finding.code, finding.message) for finding in sorted(result.findings, key=lambda f: f.sort_key)]


def test_a_norm_layer_checked_alone_is_a_layer_not_input_scaling(tmp_path):
    """A hand-written norm class nothing in its file builds normalises its forward's raw input, but it returns
    the normalised value: it is a norm layer, judged by RL401 (the input-scaling exemption needs a model that
    goes on computing with the scaled input)."""
    assert static_findings(tmp_path, '''\
        import torch
        import torch.nn as nn


        class PlainNorm(nn.Module):
            def __init__(self, eps=1e-5):
                super().__init__()
                self.eps = eps

            def forward(self, x):
                mean = x.mean(dim=-1, keepdim=True)
                var = x.var(dim=-1, keepdim=True)
                return (x - mean) / torch.sqrt(var + self.eps)
        ''') == [(12, "RL401", UNBIASED.format("PlainNorm"))]


def test_an_input_norm_with_a_learned_scale_is_a_layer_not_input_scaling(tmp_path):
    """The model's first op normalises its raw input and multiplies it by a learned gamma before the
    projection: a norm layer (RL401), not a one-off input scaling."""
    assert static_findings(tmp_path, '''\
        import torch
        import torch.nn as nn


        class NormThenProject(nn.Module):
            def __init__(self, dim=16):
                super().__init__()
                self.gamma = nn.Parameter(torch.ones(dim))
                self.beta = nn.Parameter(torch.zeros(dim))
                self.proj = nn.Linear(dim, dim)

            def forward(self, x):
                mean = x.mean(dim=-1, keepdim=True)
                var = x.var(dim=-1, keepdim=True)
                h = (x - mean) / torch.sqrt(var + 1e-5) * self.gamma + self.beta
                return self.proj(h)
        ''') == [(14, "RL401", UNBIASED.format("NormThenProject"))]


POST_LN_ADVICE = ("train it with learning-rate warmup (Xiong et al. 2020); Post-LN stacks deeper than about 20 "
                  "layers diverge without DeepNorm-style scaling; Pre-LN needs neither")


def test_a_flag_default_read_by_kwargs_pop_decides_the_placement(tmp_path):
    """`self.position = kwargs.pop("layer_norm", "post")`: the default popped is the placement, as with
    `kwargs.get` (the Post-LN block is reported, the Pre-LN one is not)."""
    assert static_findings(tmp_path, '''\
        import torch.nn as nn


        class PoppedPost(nn.Module):
            def __init__(self, size=16, **kwargs):
                super().__init__()
                self.norm = nn.LayerNorm(size)
                self.ff = nn.Linear(size, size)
                self.position = kwargs.pop("layer_norm", "post")

            def forward(self, x):
                if self.position == "pre":
                    return x + self.ff(self.norm(x))
                return self.norm(x + self.ff(x))


        class PoppedPre(nn.Module):
            def __init__(self, size=16, **kwargs):
                super().__init__()
                self.norm = nn.LayerNorm(size)
                self.ff = nn.Linear(size, size)
                self.position = kwargs.pop("layer_norm", "pre")

            def forward(self, x):
                if self.position == "pre":
                    return x + self.ff(self.norm(x))
                return self.norm(x + self.ff(x))
        ''') == [(14, "RL101", f"`PoppedPost` uses Post-LN: the norm follows `x + self.ff(x)`; {POST_LN_ADVICE}")]


CONV_MODULE = '''\
import torch.nn as nn


class ConvModule(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.depthwise = nn.Conv1d(dim, dim, 3, padding=1, groups=dim)
        self.norm = nn.BatchNorm1d(dim)

    def forward(self, x):
        return self.norm(self.depthwise(x.transpose(1, 2))).transpose(1, 2)
'''
# A copy of a Conformer block that an interrupted `--fix` left beside the module: it builds ConvModule next to
# attention, but it is reslint's own temporary file, not the project's code.
LEFT_BY_FIX = '''\
import torch.nn as nn

from conv import ConvModule


class ConformerBlock(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, 2, batch_first=True)
        self.conv = ConvModule(dim)

    def forward(self, x):
        x = x + self.attn(x, x, x, need_weights=False)[0]
        return x + self.conv(x)
'''


def test_the_project_index_does_not_read_a_file_left_by_an_interrupted_fix(tmp_path):
    """Cross-file sequence evidence (RL201) comes from the project's files only: the attention in
    `.reslint-fix-*.py` does not make conv.py's BatchNorm part of a sequence model."""
    write(tmp_path, {"pyproject.toml": "", "conv.py": CONV_MODULE, ".reslint-fix-abc123.py": LEFT_BY_FIX})
    result = run_reslint("check", "--static", "--no-cache", "--output-format", "json", "conv.py", cwd=tmp_path)
    assert codes(result.stdout) == []
    # The same block under its own name is the project's code: the evidence counts.
    (tmp_path / "conformer.py").write_text(LEFT_BY_FIX, encoding="utf-8")
    result = run_reslint("check", "--static", "--no-cache", "--output-format", "json", "conv.py", cwd=tmp_path)
    assert codes(result.stdout) == [("conv.py", "RL201", 8)]


POST_LN_MODEL = '''\
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.ff = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(x + self.ff(x))
'''
TRAINING = '''\
import torch

from model import Block

model = Block()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
'''


def test_the_train_globs_skip_a_file_left_by_an_interrupted_fix(tmp_path):
    """`train = ["scripts/*.py"]` reads training scripts RL301 links to the model; reslint's own temporary file
    in that folder is no training script (its RL301 would point at a file the user never wrote)."""
    write(tmp_path, {"pyproject.toml": '[tool.reslint]\ntrain = ["scripts/*.py"]\n', "model.py": POST_LN_MODEL,
                     "scripts/.reslint-fix-abc123.py": TRAINING})
    result = run_reslint("check", "--static", "--no-cache", "--output-format", "json", "model.py", cwd=tmp_path)
    assert codes(result.stdout) == [("model.py", "RL101", 11)]
    (tmp_path / "scripts" / "train.py").write_text(TRAINING, encoding="utf-8")
    result = run_reslint("check", "--static", "--no-cache", "--output-format", "json", "model.py", cwd=tmp_path)
    assert codes(result.stdout) == [("model.py", "RL101", 11), ("scripts/train.py", "RL301", 6)]
