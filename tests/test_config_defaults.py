"""Defaults read through `kwargs.get` / config dicts, and optimizer/scheduler factories of the project
(fixtures/project/kwargs_defaults_*: joeynmt's patterns, in our own code).

The fixtures' golden files pin the findings; these tests pin the mechanisms behind them: which branch a
config default takes, what a scheduler factory returns with the defaults, and that a cached result
follows an edit of the factory's file.
"""

from __future__ import annotations

import json
import shutil
import textwrap

import pytest

from cli_support import codes, run_reslint, write
from golden import FIXTURES
from reslint.project_facts import WARMUP_NO, WARMUP_UNKNOWN, WARMUP_YES
from reslint.static.training import extract_training

TRAINING = textwrap.dedent('''\
    from builders import build_optimizer, build_scheduler


    def train(model, cfg):
        optimizer = build_optimizer(cfg, model.parameters())
        scheduler = build_scheduler(cfg, optimizer)
        return optimizer, scheduler
''')
OPTIMIZER_FACTORY = textwrap.dedent('''\
    import torch


    def build_optimizer(cfg, parameters):
        return torch.optim.AdamW(parameters, lr=cfg.get("learning_rate", 3e-4))

''')


def factory_verdicts(tmp_path, scheduler_factory: str):
    write(tmp_path, {"train.py": TRAINING, "builders.py": OPTIMIZER_FACTORY + textwrap.dedent(scheduler_factory)})
    path = tmp_path / "train.py"
    reads: list[str] = []
    _, optimizers, schedules = extract_training(path.read_text(), str(path), str(tmp_path), reads)
    assert reads == [str(tmp_path / "builders.py")]  # a cached result of train.py depends on the factories' file
    assert [(site.line, site.api, site.target) for site in optimizers] == [
        (5, "build_optimizer() (torch.optim.AdamW)", "optimizer")]
    return [(schedule.line, schedule.api, schedule.warmup, schedule.detail, schedule.optimizer)
            for schedule in schedules]


def test_a_scheduler_factory_returning_none_by_default_means_no_warmup(tmp_path):
    verdicts = factory_verdicts(tmp_path, '''\
        def build_scheduler(cfg, optimizer):
            scheduler, step_at = None, None
            name = cfg.get("scheduling", None)
            if name == "noam":
                scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=100)
            elif name == "decaying":
                scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
            return scheduler, step_at
    ''')
    assert verdicts == [(6, "build_scheduler()", WARMUP_NO, "`build_scheduler()` (builders.py:7) returns no "
                         "scheduler with the configuration's defaults: the learning rate stays constant", "optimizer")]


def test_the_default_branch_decides_and_its_schedule_is_read(tmp_path):
    verdicts = factory_verdicts(tmp_path, '''\
        def build_scheduler(cfg, optimizer):
            name = cfg.get("scheduling", "warmup").lower()
            if name == "warmup":
                return torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=100)
            return torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    ''')
    assert verdicts == [(6, "build_scheduler()", WARMUP_YES,
                         "`build_scheduler()` (builders.py:7) by default: LinearLR ramps from 0.1 to 1", "optimizer")]
    verdicts = factory_verdicts(tmp_path, '''\
        def build_scheduler(cfg, optimizer):
            if cfg.get("scheduling", "step") in ("warmup", "noam"):
                return torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=100)
            return torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    ''')
    assert verdicts == [(6, "build_scheduler()", WARMUP_NO,
                         "`build_scheduler()` (builders.py:7) by default: StepLR only decays the learning rate",
                         "optimizer")]


def test_a_factory_that_raises_without_a_configured_schedule_leaves_it_to_the_config(tmp_path):
    # joeynmt 2.3.0's build_scheduler: `else: raise ConfigurationError(...)` when `scheduling` is unset
    factory = '''\
        def build_scheduler(cfg, optimizer):
            name = cfg.get("scheduling", None)
            if name == "plateau":
                scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer)
            elif name == "warmup":
                scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=100)
            else:
                raise ValueError(name)
            return scheduler
    '''
    assert factory_verdicts(tmp_path, factory) == [(6, "build_scheduler()", WARMUP_UNKNOWN, "`build_scheduler()` "
                                                    "(builders.py:7) needs the configuration to choose a schedule",
                                                    "optimizer")]
    # every schedule it can build decays only: no warmup whatever the config chooses
    no_warmup = factory.replace("torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=100)",
                                "torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)")
    assert factory_verdicts(tmp_path, no_warmup)[0][2:4] == (
        WARMUP_NO, "`build_scheduler()` (builders.py:7) builds no schedule with warmup: ReduceLROnPlateau only decays "
        "the learning rate")


@pytest.fixture
def project(tmp_path):
    shutil.copytree(FIXTURES / "project" / "kwargs_defaults_post", tmp_path / "project")
    return tmp_path / "project"


def test_the_scheduler_factorys_file_is_part_of_the_cached_result(project):
    args = ("check", "--static", "--select", "RL103,RL301", "--output-format", "json", ".")
    assert codes(run_reslint(*args, cwd=project).stdout) == [("encoder.py", "RL103", 17), ("training.py", "RL301", 11)]
    builders = project / "builders.py"
    builders.write_text(builders.read_text(encoding="utf-8").replace(
        'name = cfg.get("scheduling", None)', 'name = cfg.get("scheduling", "warmup")').replace(
        'if name == "plateau":', 'if name == "warmup":\n        scheduler = torch.optim.lr_scheduler.LinearLR('
                                 'optimizer, start_factor=0.01, total_iters=100)\n    elif name == "plateau":'),
        encoding="utf-8")
    result = run_reslint(*args, cwd=project)
    assert codes(result.stdout) == [("encoder.py", "RL103", 17)]
    warmups = {model["name"]: model["warmup"] for model in json.loads(result.stdout)["models"]}
    assert warmups["Decoder"] == (
        "yes (training.py:12: build_scheduler(), `build_scheduler()` (builders.py:10) by default: LinearLR ramps "
        "from 0.01 to 1)")


def test_the_layers_file_is_part_of_the_cached_result_of_the_stack_that_builds_them(project):
    args = ("check", "--static", "--select", "RL103", "--output-format", "json", ".")
    assert codes(run_reslint(*args, cwd=project).stdout) == [("encoder.py", "RL103", 17)]
    layers = project / "layers.py"
    # the layers ignore their flag and are always Post-LN: the encoder's stack is no Pre-LN stack any more
    layers.write_text(layers.read_text(encoding="utf-8").replace(
        'if self.layer_norm_position == "pre":\n            x = self.norm(x)\n        x = self.ff(x) + residual\n'
        '        if self.layer_norm_position == "post":',
        'x = self.ff(x) + residual\n        if True:'), encoding="utf-8")
    assert codes(run_reslint(*args, cwd=project).stdout) == []
