"""Regressions that were injected into the code once and that the rest of the suite let pass.

Each test's name says what the bug broke; each failed with its bug in place. They run the real
pipeline, `reslint.check()` (static, in process) or the CLI, except RL601's, which feeds the probe's
verdicts a report with exact gradient norms (a real probe cannot hit a threshold exactly).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import run_reslint, write

import reslint
from reslint.probing.report import BlockStats, ProbeReport, StackStats
from reslint.probing.verdicts import Thresholds, gradient_flow

POST_LN_STACK = '''\
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.ff = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(x + self.ff(x))


class Net(nn.Module):
    def __init__(self, n=4):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(n)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x
'''


def found(tmp_path: Path, *paths: str, **options) -> list[tuple[str, str, int]]:
    report = reslint.check(list(paths) or ".", static=True, cwd=tmp_path, fixes=False, **options)
    return [(finding.path, finding.code, finding.line) for finding in report.findings]


# ----- the result cache ------------------------------------------------------------------------------


def test_changing_deep_post_ln_layers_does_not_serve_a_stale_rl104(tmp_path):
    write(tmp_path, {"net.py": POST_LN_STACK, "pyproject.toml": "[tool.reslint]\ndeep-post-ln-layers = 8\n"})
    assert "RL104" not in [code for _, code, _ in found(tmp_path, select="RL104")]
    write(tmp_path, {"pyproject.toml": "[tool.reslint]\ndeep-post-ln-layers = 3\n"})  # the 4 blocks are now too deep
    assert [code for _, code, _ in found(tmp_path, select="RL104")] == ["RL104"]
    write(tmp_path, {"pyproject.toml": "[tool.reslint]\ndeep-post-ln-layers = 8\n"})
    assert found(tmp_path, select="RL104") == []
    assert (tmp_path / ".reslint_cache").is_dir()  # the three runs went through the cache


def test_changing_the_train_globs_does_not_serve_a_stale_skip(tmp_path):
    # run.py has no torch or training vocabulary: the pre-filter skips it unless a `train` glob names it.
    write(tmp_path, {"net.py": POST_LN_STACK, "run.py": "from net import Net\n\nnet = Net()\n", "pyproject.toml": "[tool.reslint]\n"})
    assert reslint.check(".", static=True, cwd=tmp_path, fixes=False).files_skipped == 1
    write(tmp_path, {"pyproject.toml": '[tool.reslint]\ntrain = ["run.py"]\n'})
    assert reslint.check(".", static=True, cwd=tmp_path, fixes=False).files_skipped == 0
    assert (tmp_path / ".reslint_cache").is_dir()


# ----- the filter stage ------------------------------------------------------------------------------

BATCHNORM_SEQUENCE = '''\
import torch
import torch.nn as nn


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(100, 16)
        self.norm = nn.BatchNorm1d(16)

    def forward(self, ids):
        return self.norm(self.embed(ids).transpose(1, 2))
'''


def test_per_file_ignores_match_the_root_relative_path_from_a_subdirectory(tmp_path):
    write(tmp_path, {"pyproject.toml": '[tool.reslint.per-file-ignores]\n"pkg/*" = ["RL201"]\n',
                     "pkg/tagger.py": BATCHNORM_SEQUENCE, "other/tagger.py": BATCHNORM_SEQUENCE})
    args = ("check", "--static", "--no-cache", "--output-format", "json", ".")
    from_root = json.loads(run_reslint(*args, cwd=tmp_path).stdout)["findings"]
    assert [(finding["path"], finding["code"]) for finding in from_root] == [("other/tagger.py", "RL201")]
    # From pkg/ the file is shown as tagger.py; "pkg/*" still names it, and does not name other/tagger.py.
    for directory, paths, expected in (("pkg", ["."], []), ("other", ["."], ["tagger.py"]),
                                       ("pkg", ["../other", "."], [str(tmp_path / "other" / "tagger.py")])):
        result = run_reslint(*args[:-1], *paths, cwd=tmp_path / directory)
        shown = [finding["path"] for finding in json.loads(result.stdout)["findings"] if finding["code"] == "RL201"]
        assert shown == expected, (directory, paths)


def test_per_file_ignores_apply_to_rl301_of_stdin_named_from_a_subdirectory(tmp_path):
    source = BATCHNORM_SEQUENCE.replace("import torch.nn as nn\n", "import torch.nn as nn\n\n\nclass Block(nn.Module):\n"
                                        "    def __init__(self):\n        super().__init__()\n        self.ff = nn.Linear(16, 16)\n"
                                        "        self.norm = nn.LayerNorm(16)\n\n    def forward(self, x):\n"
                                        "        return self.norm(x + self.ff(x))\n", 1)
    source += "\n\nmodel = Block()\noptimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)\n"
    write(tmp_path, {"pyproject.toml": '[tool.reslint.per-file-ignores]\n"pkg/*" = ["RL101", "RL201", "RL301"]\n',
                     "pkg/train.py": source})
    for cwd, name in ((tmp_path, "pkg/train.py"), (tmp_path / "pkg", "train.py")):
        report = reslint.check(cwd=cwd, static=True, fixes=False, stdin=source, stdin_filename=name)
        assert report.findings == [], (name, [finding.code for finding in report.findings])
    unignored = reslint.check(cwd=tmp_path, static=True, fixes=False, stdin=source, stdin_filename="train.py")
    assert sorted(finding.code for finding in unignored.findings) == ["RL101", "RL201", "RL301"]


@pytest.mark.parametrize("prefix", ["RL", "RL1", "RL10", "RL101", "rl1"])
def test_an_ignore_comment_reads_a_prefix_as_the_ignore_option_does(tmp_path, prefix):
    commented = POST_LN_STACK.replace("return self.norm(x + self.ff(x))",
                                      f"return self.norm(x + self.ff(x))  # reslint: ignore[{prefix}]")
    write(tmp_path, {"commented.py": commented, "plain.py": POST_LN_STACK, "pyproject.toml": "[tool.reslint]\n"})
    assert found(tmp_path, "commented.py", cache=False) == []
    assert found(tmp_path, "plain.py", cache=False, ignore=prefix) == []
    assert found(tmp_path, "plain.py", cache=False) == [("plain.py", "RL101", 11)]


# ----- rules -----------------------------------------------------------------------------------------


def static_findings(tmp_path: Path, source: str) -> list[tuple[str, int]]:
    write(tmp_path, {"model.py": source, "pyproject.toml": "[tool.reslint]\n"})
    return [(code, line) for _, code, line in found(tmp_path, "model.py", cache=False)]


def test_rl201_stays_silent_on_batchnorm1d_outside_sequence_models(tmp_path):
    tabular = '''\
import torch
import torch.nn as nn


class TabularNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 32)
        self.bn = nn.BatchNorm1d(32)
        self.out = nn.Linear(32, 1)

    def forward(self, x):
        return self.out(torch.relu(self.bn(self.fc(x))))
'''
    assert static_findings(tmp_path, tabular) == []
    assert static_findings(tmp_path, BATCHNORM_SEQUENCE) == [("RL201", 9)]


GLOBAL_NORM = '''\
import torch
import torch.nn as nn


class GlobalNorm(nn.Module):
    def __init__(self, eps=1e-5):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        mean = x.mean(DIMS)
        var = ((x - mean) ** 2).mean(DIMS)
        return (x - mean) / torch.sqrt(var + self.eps)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(100, 16)
        self.attn = nn.MultiheadAttention(16, 2, batch_first=True)
        self.norm = GlobalNorm()

    def forward(self, ids):
        x = self.embed(ids)
        x = x + self.attn(x, x, x)[0]
        return self.norm(x)
'''


def test_rl402_fires_on_a_mean_over_every_axis_and_not_over_the_features(tmp_path):
    assert ("RL402", 12) in static_findings(tmp_path, GLOBAL_NORM.replace("DIMS", ""))
    assert "RL402" not in [code for code, _ in static_findings(tmp_path, GLOBAL_NORM.replace("DIMS", "-1, keepdim=True"))]


CLAMPED_NORM = '''\
import torch
import torch.nn as nn


class ClampedLayerNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        std = x.std(-1, keepdim=True, unbiased=False)
        return self.weight * (x - mean) / DENOMINATOR
'''


@pytest.mark.parametrize("denominator", ["std.clamp(min=self.eps)", "torch.clamp(std, min=self.eps)",
                                         "std.clamp_min(self.eps)"])
def test_rl403_accepts_an_epsilon_given_by_clamp(tmp_path, denominator):
    assert static_findings(tmp_path, CLAMPED_NORM.replace("DENOMINATOR", denominator)) == []


def test_rl403_fires_without_the_clamp(tmp_path):
    assert static_findings(tmp_path, CLAMPED_NORM.replace("DENOMINATOR", "std")) == [("RL403", 14)]


# ----- training code (RL301) -------------------------------------------------------------------------

DEEPSPEED_SCRIPT = '''\
import deepspeed

from net import Net


def train(args):
    model = Net()
    engine, *_ = deepspeed.initialize(args=args, model=model, model_parameters=model.parameters(),
                                      config="ds_config.json")
    return engine
'''


@pytest.mark.parametrize(("steps", "expected"), [(0, [("train.py", "RL301", 8)]), (500, [])])
def test_a_deepspeed_config_with_zero_warmup_steps_has_no_warmup(tmp_path, steps, expected):
    config = {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
              "scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 1e-3, "warmup_num_steps": steps}}}
    write(tmp_path, {"net.py": POST_LN_STACK, "train.py": DEEPSPEED_SCRIPT, "ds_config.json": json.dumps(config),
                     "pyproject.toml": "[tool.reslint]\n"})
    assert found(tmp_path, select="RL301", cache=False) == expected


def test_a_schedule_drives_only_the_optimizer_it_is_given(tmp_path):
    gan = '''\
import torch
from transformers import get_linear_schedule_with_warmup

from net import Net


def train():
    generator, critic = Net(), Net()
    generator_optimizer = torch.optim.AdamW(generator.parameters(), lr=1e-3)
    critic_optimizer = torch.optim.AdamW(critic.parameters(), lr=1e-3)
    scheduler = get_linear_schedule_with_warmup(generator_optimizer, num_warmup_steps=100, num_training_steps=1000)
    return scheduler
'''
    write(tmp_path, {"net.py": POST_LN_STACK, "train.py": gan, "pyproject.toml": "[tool.reslint]\n"})
    assert found(tmp_path, select="RL301", cache=False) == [("train.py", "RL301", 10)]


def test_a_schedule_of_an_unnamed_optimizer_drives_only_the_optimizers_of_its_function(tmp_path):
    two_stages = '''\
import torch
from transformers import get_linear_schedule_with_warmup

from net import Net


def pretrain():
    optimizers = [torch.optim.AdamW(Net().parameters(), lr=1e-3)]
    scheduler = get_linear_schedule_with_warmup(optimizers[0], num_warmup_steps=100, num_training_steps=1000)
    scheduler.step()


def finetune():
    optimizer = torch.optim.AdamW(Net().parameters(), lr=1e-4)
    optimizer.step()
'''
    write(tmp_path, {"net.py": POST_LN_STACK, "train.py": two_stages, "pyproject.toml": "[tool.reslint]\n"})
    assert found(tmp_path, select="RL301", cache=False) == [("train.py", "RL301", 14)]


# ----- probe verdicts --------------------------------------------------------------------------------


def probe_report(first_grad: float, last_grad: float) -> ProbeReport:
    blocks = [BlockStats("blocks.0", "blocks", 0, grad_norm=first_grad), BlockStats("blocks.1", "blocks", 1, grad_norm=last_grad)]
    stack = StackStats("blocks", ["blocks.0", "blocks.1"], "repeated", path="model.py", line=3, label="self.blocks of Net")
    return ProbeReport("Net", "cpu", "float32", "sum", [1.0], 1, 0, blocks=blocks, stacks=[stack])


def test_rl601_fires_at_exactly_the_vanishing_gradient_factor():
    # "at least 100 times": 1.0 -> 100.0 is a finding, 1.0 -> 99.5 is not (both exact in binary floating point)
    assert [finding.code for finding in gradient_flow(probe_report(1.0, 100.0), Thresholds())] == ["RL601"]
    assert gradient_flow(probe_report(1.0, 99.5), Thresholds()) == []
    assert [finding.code for finding in gradient_flow(probe_report(1.0, 8.0), Thresholds(vanishing_gradient_factor=8))] == ["RL601"]


LITERAL_WIDTHS = '''\
import torch.nn as nn


class LiteralWidths(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(512)
        self.proj = nn.Linear(512, WIDTH)

    def forward(self, x):
        h = self.proj(self.norm(x))
        return x + h
'''


@pytest.mark.parametrize(("width", "expected"), [("256 + 256", []), ("768 - 256", []), ("512 + 1", [("RL001", 12)]),
                                                 ("512 - 1", [("RL001", 12)])])
def test_rl001_adds_and_subtracts_literal_widths_with_their_sign(tmp_path, width, expected):
    assert static_findings(tmp_path, LITERAL_WIDTHS.replace("WIDTH", width)) == expected
