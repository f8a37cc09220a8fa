"""Construction sites inside a Lightning module (issue 12/13, real-world trace share): pytorch-forecasting's TimeXer
builds its encoder from `self.hparams.x` (saved by `self.save_hyperparameters()`) and from attributes it set a line
before, in a list comprehension over `range(self.hparams.e_layers)`. fixtures/project/saved_hparams mirrors it; the
site readers run on it without running anything, the full check through the CLI."""

from __future__ import annotations

import json
import shutil

import pytest

from cli_support import run_reslint, write
from golden import FIXTURES
from reslint.static.construction_sites import Finder, construction_sites

PROJECT = FIXTURES / "project" / "saved_hparams"
LAYERS = {"EncoderLayer", "Encoder", "Head"}


def sites(project, name: str) -> list[tuple[str, int, str, str, str]]:
    finder = Finder(str(project / "layers.py"), str(project), LAYERS, LAYERS)
    return [(site.path.rsplit("/", 1)[-1], site.line, site.expr, site.shrunk, site.reason)
            for site in construction_sites(name, finder)]


def test_saved_hyperparameters_and_attributes_set_before_are_read():
    """d_model is None by default and set to 48 before the save: the saved value; d_ff = 2 * d_model; three layers
    in a comprehension, built two deep (the site keeps its depth)."""
    layer = "EncoderLayer(48, 4, 96)"
    assert sites(PROJECT, "Encoder") == [
        ("forecaster.py", 16, f"Encoder([{layer}, {layer}], norm_layer=torch.nn.LayerNorm(48))",
         "self.hparams.e_layers 3 -> 2", ""),
    ]
    assert sites(PROJECT, "Head") == [("forecaster.py", 20, "Head(48, 8)", "", "")]


def test_what_the_save_leaves_out_is_not_read(tmp_path):
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("*.expected"))
    source = (project / "forecaster.py").read_text(encoding="utf-8")
    write(project, {"forecaster.py": source.replace("self.hparams.horizon", "self.hparams.loss")})
    assert sites(project, "Head") == [("forecaster.py", 20, "", "", "`self.hparams.loss`: the parameter `self` of "
                                       "`__init__()` gets no value reslint can read")]
    write(project, {"forecaster.py": source.replace("        self.save_hyperparameters(ignore=[\"loss\"])\n", "")})
    assert sites(project, "Head")[0][2] == ""


def test_the_full_check_traces_the_encoder_the_forecaster_builds(tmp_path):
    pytest.importorskip("torch")
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("*.expected"))
    result = run_reslint("check", "--no-cache", "--jobs", "1", "--output-format", "json", "layers.py", cwd=project)
    report = json.loads(result.stdout)
    assert [(trace["name"], trace["traced"]) for trace in report["traces"]] == [("Encoder", True), ("Head", True)]
    encoder = next(model for model in report["models"] if model["name"] == "Encoder")
    assert encoder["built_from"] == "forecaster.py:16"
    assert encoder["engine"] == "traced (fx)"
    assert [(finding["code"], finding["line"], finding["engine"]) for finding in report["findings"]] == [
        ("RL101", 15, "trace"), ("RL101", 16, "trace")]
