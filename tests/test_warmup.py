"""RL301 across files: a project directory, parallel and cached runs, suppression, --verbose.

The per-API cases are golden fixtures in fixtures/warmup/ (see test_fixtures.py); these tests run
the real CLI over whole projects.
"""

from __future__ import annotations

import json
import re
import shutil

import pytest

from cli_support import codes, run_reslint, write
from golden import FIXTURES

PROJECT = FIXTURES / "warmup" / "project"

MODEL = '''\
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ff = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(x + self.ff(x))


class Net(nn.Module):
    def __init__(self, d=32, n=4):
        super().__init__()
        self.blocks = nn.ModuleList([Block(d) for _ in range(n)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x
'''

UNRESOLVED_WARMUP = '''\
import torch
from transformers import get_scheduler

from model import Net


def main(args):
    optimizer = torch.optim.AdamW(Net().parameters(), lr=1e-3)
    return get_scheduler("cosine", optimizer, num_warmup_steps=args.warmup_steps, num_training_steps=1000)
'''

NO_WARMUP = '''\
import torch

from model import Net

optimizer = torch.optim.Adam(Net().parameters(), lr=1e-3)
'''


@pytest.fixture()
def project(tmp_path):
    copy = tmp_path / "project"
    shutil.copytree(PROJECT, copy, ignore=shutil.ignore_patterns("*.expected"))
    return copy


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_project_reports_once_per_optimizer_not_per_file_or_block(project, jobs):
    result = run_reslint("check", "--static", "--no-cache", "--jobs", jobs, "--output-format", "json", ".",
                         cwd=project)
    assert result.returncode == 1, result.stderr
    rl301 = [entry for entry in codes(result.stdout) if entry[1] == "RL301"]
    # two Post-LN block classes in two files, the model in a third, four training scripts: one optimizer without warmup
    assert rl301 == [("scripts/train.py", "RL301", 12)]
    report = json.loads(result.stdout)
    message = next(f["message"] for f in report["findings"] if f["code"] == "RL301")
    assert "`EncoderLayer` at mypkg/layers.py:13 (and 1 more Post-LN block)" in message
    assert "CosineAnnealingLR only decays the learning rate" in message
    warmups = {model["name"]: model["warmup"] for model in report["models"]}
    # the model of mypkg/model.py stacks the imported layers: its summary has the stacks and the warmup too
    assert warmups == {"EncoderLayer": "none (scripts/train.py:12: torch.optim.Adam; RL301)",
                       "DecoderLayer": "none (scripts/train.py:12: torch.optim.Adam; RL301)",
                       "Translator": "none (scripts/train.py:12: torch.optim.Adam; RL301)"}


def test_the_training_script_alone_still_finds_its_model_through_the_package(project):
    result = run_reslint("check", "--static", "--no-cache", "--output-format", "json", "scripts/train.py",
                         cwd=project)
    assert codes(result.stdout) == [("scripts/train.py", "RL301", 12)]


def test_the_model_alone_reaches_the_configured_training_scripts(project):
    result = run_reslint("check", "--static", "--no-cache", "--output-format", "json", "mypkg/layers.py",
                         cwd=project)
    assert ("scripts/train.py", "RL301", 12) in codes(result.stdout)
    (project / "pyproject.toml").write_text('[tool.reslint]\nselect = ["RL3"]\n', encoding="utf-8")
    result = run_reslint("check", "--static", "--no-cache", "--output-format", "json", "mypkg/layers.py",
                         cwd=project)
    assert codes(result.stdout) == []
    warmups = {model["name"]: model["warmup"] for model in json.loads(result.stdout)["models"]}
    assert warmups["EncoderLayer"] == "not checked (no training code found)"


def test_cached_runs_link_the_same_way(project):
    first = run_reslint("check", "--static", "--output-format", "json", ".", cwd=project)
    second = run_reslint("check", "--static", "--output-format", "json", ".", cwd=project)
    assert (project / ".reslint_cache").is_dir()
    assert json.loads(first.stdout)["findings"] == json.loads(second.stdout)["findings"]
    assert json.loads(first.stdout)["models"] == json.loads(second.stdout)["models"]


def test_adding_warmup_to_the_training_script_clears_the_finding_on_a_cached_rerun(project):
    assert run_reslint("check", "--static", ".", cwd=project).returncode == 1
    train = project / "scripts" / "train.py"
    train.write_text(train.read_text(encoding="utf-8").replace(
        "scheduler = CosineAnnealingLR(optimizer, T_max=steps)",
        "scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=7e-4, total_steps=steps)"),
        encoding="utf-8")
    result = run_reslint("check", "--static", "--select", "RL301", ".", cwd=project)
    assert result.returncode == 0, result.stdout


def test_noqa_and_ignore_silence_it(tmp_path):
    write(tmp_path, {"model.py": MODEL, "train.py": NO_WARMUP.replace("lr=1e-3)", "lr=1e-3)  # noqa: RL301")})
    assert codes(run_reslint("check", "--static", "--select", "RL3", "--output-format", "json", ".",
                             cwd=tmp_path).stdout) == []
    write(tmp_path, {"train.py": NO_WARMUP})
    assert codes(run_reslint("check", "--static", "--select", "RL3", "--output-format", "json", ".",
                             cwd=tmp_path).stdout) == [("train.py", "RL301", 5)]
    assert codes(run_reslint("check", "--static", "--ignore", "RL3", "--output-format", "json", ".",
                             cwd=tmp_path).stdout) == [("model.py", "RL101", 11)]


def test_an_unresolved_warmup_counts_as_present_and_verbose_says_so(tmp_path):
    write(tmp_path, {"model.py": MODEL, "train.py": UNRESOLVED_WARMUP})
    quiet = run_reslint("check", "--static", "--select", "RL3", "--show-models", ".", cwd=tmp_path)
    assert quiet.returncode == 0
    assert "warmup: yes (train.py:9: get_scheduler)" in quiet.stdout
    verbose = run_reslint("check", "--static", "--select", "RL3", "--verbose", ".", cwd=tmp_path)
    assert verbose.returncode == 0
    assert "warmup: assumed (train.py:9: get_scheduler: num_warmup_steps=args.warmup_steps not resolved " \
           "statically)" in verbose.stdout


def test_a_configured_training_script_trains_the_run_models_it_cannot_resolve(tmp_path):
    registry_script = '''\
import torch
from registry import build_model

model = build_model("net")
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
'''
    write(tmp_path, {"model.py": MODEL, "run.py": registry_script})
    args = ("check", "--static", "--select", "RL3", "--output-format", "json")
    assert codes(run_reslint(*args, ".", cwd=tmp_path).stdout) == []
    write(tmp_path, {"pyproject.toml": '[tool.reslint]\ntrain = ["run.py"]\n'})
    assert codes(run_reslint(*args, "model.py", cwd=tmp_path).stdout) == [("run.py", "RL301", 5)]


@pytest.mark.parametrize("path", sorted((FIXTURES / "warmup").glob("*.py")), ids=lambda path: path.name)
def test_the_golden_rl301_lines_are_the_ones_the_fixture_marks(path):
    """Each fixture marks the optimizer that must draw RL301 with a `# RL301` comment: the golden
    file agrees with the source, so a regenerated golden file cannot drift silently."""
    marked = [number for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
              if "# RL301" in line]
    golden = [int(found[1]) for line in path.with_suffix(".expected").read_text().splitlines()
              if (found := re.match(r"(\d+):\d+ RL301 ", line))]
    assert golden == marked


def test_the_summaries_warmup_line_is_made_when_the_summaries_are_first_read(tmp_path, monkeypatch):
    """Text output without --show-models never reads the summaries: the project stage's part of them (the
    closure of each model across files) waits until something does, and is then the same."""
    import reslint
    import reslint.project

    write(tmp_path, {"model.py": MODEL})
    made = []
    real = reslint.project.model_warmup
    monkeypatch.setattr(reslint.project, "model_warmup", lambda *args: made.append(args[2].name) or real(*args))
    report = reslint.check([tmp_path / "model.py"], static=True, cache=False)
    assert made == []
    assert [(model.name, model.warmup) for model in report.models] == [
        ("Net", "not checked (no training code found)")]
    assert made == ["Net"]
    report.models  # noqa: B018 - read again: made once
    assert made == ["Net"]
