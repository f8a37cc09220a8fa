"""Model discovery from construction sites: which call of a model class the full check builds the
model from, the arguments read without running the project's code, and the report saying so.

The site readers run on small projects written to tmp_path (nothing runs, torch is not imported);
the fixture projects in fixtures/discovery/ go through the real CLI, full check.
"""

from __future__ import annotations

import json

import pytest

from cli_support import REPO_ROOT, run_reslint, write
from reslint.static.config_files import parse_yaml
from reslint.static.construction_sites import Finder, construction_sites

MODEL = '''\
import torch.nn as nn
from dataclasses import dataclass


@dataclass
class NetConfig:
    width: int = 8
    depth: int = 2


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.ff = nn.Linear(width, width)


class Net(nn.Module):
    def __init__(self, width, depth=2, act=None):
        super().__init__()
        self.blocks = nn.ModuleList([Block(width) for _ in range(depth)])
'''
MODEL_NAMES = {"NetConfig", "Block", "Net"}
MODULE_CLASSES = {"Block", "Net"}


def sites(tmp_path, files: dict[str, str], name: str = "Net") -> list:
    write(tmp_path, {"pyproject.toml": "[project]\nname = 'x'\n", "model.py": MODEL, **files})
    finder = Finder(str(tmp_path / "model.py"), str(tmp_path), MODEL_NAMES, MODULE_CLASSES)
    return [(site.path.rsplit("/", 1)[-1], site.line, site.expr, site.reason)
            for site in construction_sites(name, finder)]


def test_argparse_defaults_converted_by_their_type(tmp_path):
    train = '''\
import argparse
from model import Net

WIDTH = 16
parser = argparse.ArgumentParser()
parser.add_argument("--model-width", type=int, default=str(WIDTH * 2))
parser.add_argument("--depth", type=int, default=6)
parser.add_argument("--gelu", action="store_true")
args = parser.parse_args()
model = Net(args.model_width, depth=args.depth, act=nn.GELU() if args.gelu else None)
'''
    train = train.replace("import argparse", "import argparse\nimport torch.nn as nn")
    assert sites(tmp_path, {"train.py": train}) == [
        ("train.py", 11, "Net(32, depth=2, act=None)", ""),
    ]


def test_yaml_config_spread_into_the_constructor(tmp_path):
    train = '''\
import yaml
from model import Net

with open("configs/base.yaml") as f:
    cfg = yaml.safe_load(f)
model = Net(**cfg["model"])
'''
    config = "model:\n  width: 24  # hidden size\n  depth: 12\ntrain:\n  lr: 1.0e-3\n"
    found = sites(tmp_path, {"train.py": train, "configs/base.yaml": config})
    assert found == [("train.py", 6, "Net(width=24, depth=2)", "")]
    finder = Finder(str(tmp_path / "model.py"), str(tmp_path), MODEL_NAMES, MODULE_CLASSES)
    site = construction_sites("Net", finder)[0]
    assert (site.shrunk, site.depth) == ("depth 12 -> 2", 12)
    assert str(tmp_path / "configs" / "base.yaml") in site.reads


def test_config_class_of_the_model_module_is_built_for_real(tmp_path):
    train = '''\
from model import Net, NetConfig

config = NetConfig(width=48)
model = Net(config.width, depth=config.depth)
other = Net(NetConfig(width=4))
'''
    assert sites(tmp_path, {"train.py": train}) == [
        ("train.py", 4, "Net(NetConfig(width=48).width, depth=NetConfig(width=48).depth)", ""),
        ("train.py", 5, "Net(NetConfig(width=4))", ""),
    ]


def test_a_script_dataclass_is_read_not_run(tmp_path):
    train = '''\
from dataclasses import dataclass
from model import Net


@dataclass
class Args:
    width: int = 40
    layers: int = 3


def main():
    args = Args()
    return Net(args.width, args.layers)
'''
    assert sites(tmp_path, {"train.py": train}) == [("train.py", 13, "Net(40, 2)", "")]
    site = construction_sites("Net", Finder(str(tmp_path / "model.py"), str(tmp_path), MODEL_NAMES, MODULE_CLASSES))[0]
    assert (site.shrunk, site.depth) == ("depth 3 -> 2", 3)  # the depth passed by position


def test_factory_parameters_bound_where_the_factory_is_called(tmp_path):
    factory = '''\
from model import Net


def build_model(opts, scale=2):
    return Net(opts["width"] * scale)
'''
    train = '''\
import json
from factory import build_model

settings = json.load(open("settings.json"))
model = build_model(settings)
'''
    found = sites(tmp_path, {"factory.py": factory, "train.py": train, "settings.json": '{"width": 10}'})
    assert found == [("factory.py", 5, "Net(20)", "")]


def test_a_factory_called_by_many_factories_is_followed_within_a_budget(tmp_path):
    # every level calls the one below three times: 3**10 caller paths to read `width` through (torchtune's
    # component builders, each called by many model builders); reading stops after MAX_STEPS values
    levels = ["from model import Net\n\n\ndef level0(width):\n    return Net(width)\n"]
    for level in range(1, 11):
        calls = "".join(f"    part{index} = level{level - 1}(width)\n" for index in range(3))
        levels.append(f"\n\ndef level{level}(width):\n{calls}    return part0\n")
    [(name, line, expr, reason)] = sites(tmp_path, {"builders.py": "".join(levels)})
    assert (name, line, expr) == ("builders.py", 5, "")
    assert reason.endswith("is built through too many steps to follow")


def test_parts_built_inside_models_are_not_sites(tmp_path):
    assert sites(tmp_path, {}, name="Block") == []


def test_an_unreadable_argument_is_named(tmp_path):
    train = '''\
import os
import torch
from model import Net

model = Net(int(os.environ["WIDTH"]))
loaded = Net(torch.load("width.pt"))
'''
    assert sites(tmp_path, {"train.py": train}) == [
        ("train.py", 5, "", "`int(os.environ['WIDTH'])`: `os` is the module `os`, whose code reslint does not run"),
        ("train.py", 6, "", "`torch.load('width.pt')`: `torch.load('width.pt')` runs a torch function, "
                            "not a constructor"),
    ]


def test_yaml_subset():
    text = '''\
# comment
defaults:
  - model: small
  - _self_
optim:
  name: "adamw"   # quoted
  lr: 3e-4
  betas: [0.9, 0.98]
  warmup_steps: 4_000
  nesterov: false
  schedule: ~
'''
    assert parse_yaml(text) == {
        "defaults": [{"model": "small"}, "_self_"],
        "optim": {"name": "adamw", "lr": 3e-4, "betas": [0.9, 0.98], "warmup_steps": 4000, "nesterov": False,
                  "schedule": None},
    }
    assert parse_yaml("text: |\n  many\n  lines\n") is None


@pytest.fixture(scope="module")
def discovery_report():
    result = run_reslint("check", "fixtures/discovery", "--output-format", "json", "--no-cache", "--jobs", "1",
                         cwd=REPO_ROOT)
    return result.returncode, json.loads(result.stdout)


def test_full_check_builds_models_from_their_sites(discovery_report):
    _, report = discovery_report
    models = {(model["path"], model["name"]): model for model in report["models"]}
    built = {key: (model["engine"].split(" ")[0], model["built_from"], [(stack["depth"], stack["placement"])
                                                                        for stack in model["stacks"]])
             for key, model in models.items()}
    root = "fixtures/discovery"
    assert built == {
        (f"{root}/factory/models/transformer.py", "Seq2Seq"): ("traced", f"{root}/factory/models/factory.py:5",
                                                               [(6, "post")]),
        (f"{root}/hydra/model.py", "Transformer"): ("traced", f"{root}/hydra/train.py:10", [(4, "post")]),
        (f"{root}/main_block/encoder.py", "Encoder"): ("traced", f"{root}/main_block/encoder.py:36", [(12, "pre")]),
        # its site's width comes from the environment: built from inferred arguments instead (no depth)
        (f"{root}/unreadable/net.py", "Net"): ("traced", "inferred arguments (width=32, depth=2)", []),
        (f"{root}/yaml_train/model.py", "Transformer"): ("traced", f"{root}/yaml_train/train.py:12", [(6, "post")]),
    }
    assert models[(f"{root}/yaml_train/model.py", "Transformer")]["notes"][:2] == [
        f"built from {root}/yaml_train/train.py:12: Transformer(vocab=1000, d_model=64, nhead=4, num_layers=2)",
        "traced shallower, num_layers 6 -> 2; its stacks report the site's depth, 6",
    ]
    assert models[(f"{root}/hydra/model.py", "Transformer")]["warmup"].startswith(
        f"yes ({root}/hydra/train.py:13: get_cosine_schedule_with_warmup, num_warmup_steps=500 ")


def test_full_check_findings_of_the_discovery_projects(discovery_report):
    code, report = discovery_report
    root = "fixtures/discovery"
    found = [(finding["path"], finding["line"], finding["code"], finding["severity"]) for finding in report["findings"]]
    assert found == [
        (f"{root}/factory/models/transformer.py", 10, "RL101", "info"),
        (f"{root}/factory/train.py", 18, "RL301", "warning"),
        (f"{root}/hydra/model.py", 13, "RL101", "info"),
        (f"{root}/hydra/model.py", 14, "RL101", "info"),
        (f"{root}/unreadable/net.py", 12, "RL101", "info"),
        (f"{root}/yaml_train/model.py", 13, "RL101", "info"),
        (f"{root}/yaml_train/model.py", 14, "RL101", "info"),
        (f"{root}/yaml_train/train.py", 13, "RL301", "warning"),
    ]
    assert code == 1
    messages = {(finding["path"], finding["code"]): finding["message"] for finding in report["findings"]}
    net = next(model for model in report["models"] if model["name"] == "Net")
    assert net["notes"][:2] == ["built from inferred constructor arguments: width=32, depth=2",
                                f"the arguments at {root}/unreadable/run.py:6 cannot be read without running the "
                                "project's code"]
    assert messages[(f"{root}/factory/train.py", "RL301")].startswith(
        "`torch.optim.AdamW` trains a Post-LN model (`nn.TransformerEncoderLayer` in `Seq2Seq` at "
        f"{root}/factory/models/transformer.py:10) without learning-rate warmup: StepLR only decays")
    assert f"without learning-rate warmup: num_warmup_steps=0 ({root}/yaml_train/config.yaml);" in \
        messages[(f"{root}/yaml_train/train.py", "RL301")]
    assert report["summary"]["models_traced"] == 5


def test_text_summary_names_the_site():
    result = run_reslint("check", "fixtures/discovery/main_block", "--verbose", "--no-cache", "--jobs", "1",
                         cwd=REPO_ROOT)
    assert "fixtures/discovery/main_block/encoder.py:23: Encoder: 12 blocks (self.blocks: PreLNBlock), Pre-LN, " \
           "final norm yes [traced (fx), built from fixtures/discovery/main_block/encoder.py:36]" in result.stdout


def test_a_class_imported_through_its_package(tmp_path):
    write(tmp_path, {"pyproject.toml": "[project]\nname = 'x'\n", "nets/__init__.py": "from .model import Net\n",
                     "nets/model.py": MODEL, "scripts/train.py": "from nets import Net\n\nmodel = Net(12, depth=2)\n"})
    finder = Finder(str(tmp_path / "nets" / "model.py"), str(tmp_path), MODEL_NAMES, MODULE_CLASSES)
    assert [(site.line, site.expr) for site in construction_sites("Net", finder)] == [(3, "Net(12, depth=2)")]


SCHEDULED = '''\
import json

import torch
from transformers import get_scheduler

with open("train.json") as handle:
    cfg = json.load(handle)
model = torch.nn.Transformer(d_model=32, nhead=4)
optimizer = torch.optim.AdamW(model.parameters())
scheduler = get_scheduler(cfg["schedule"], optimizer, num_warmup_steps=cfg["warmup"], num_training_steps=1000)
'''


@pytest.mark.parametrize("config, fires", [
    ('{"schedule": "linear", "warmup": 0}', True),
    ('{"schedule": "linear", "warmup": 400}', False),
    ('{"schedule": "constant", "warmup": 400}', True),
])
def test_schedules_read_from_a_json_training_config(tmp_path, config, fires):
    write(tmp_path, {"train.py": SCHEDULED, "train.json": config})
    result = run_reslint("check", "--static", "--no-cache", "--output-format", "json", "train.py", cwd=tmp_path)
    found = [(finding["code"], finding["line"]) for finding in json.loads(result.stdout)["findings"]
             if finding["code"] == "RL301"]
    assert found == ([("RL301", 9)] if fires else [])
