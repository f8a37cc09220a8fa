"""Models whose constructors take modules, and inferred arguments the constructor rejects at first (issue 13
item 3, wave 5): how construction sites read layers built in other files and lists filled by loops, how
inferred arguments are retried from the statement that raised, and the full check that builds and traces
them (real CLI subprocess, real torch tracing)."""

from __future__ import annotations

import json

import pytest
from cli_support import REPO_ROOT, run_reslint, write

from reslint.static.construction_sites import Finder, construction_sites

MODEL = '''\
import torch.nn as nn


class Layer(nn.Module):
    def __init__(self, mlp, norm):
        super().__init__()
        self.mlp, self.norm = mlp, norm

    def forward(self, x):
        return x + self.mlp(self.norm(x))


class Net(nn.Module):
    def __init__(self, layers, heads):
        super().__init__()
        self.layers = layers
'''
PARTS = '''\
import torch.nn as nn


class Mlp(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        return self.fc(x)


class Settings:
    def __init__(self, dim=8):
        self.dim = dim
'''


def sites(tmp_path, builder: str) -> list[tuple[int, str, str]]:
    write(tmp_path, {"pyproject.toml": "[project]\nname = 'x'\n", "model.py": MODEL, "parts.py": PARTS,
                     "builders.py": builder})
    finder = Finder(str(tmp_path / "model.py"), str(tmp_path), {"Layer", "Net"}, {"Layer", "Net"})
    return [(site.line, site.expr, site.reason) for site in construction_sites("Net", finder)]


def test_a_loop_fills_the_layer_list_with_modules_of_another_file(tmp_path):
    builder = '''\
import torch.nn as nn
from model import Layer, Net
from parts import Mlp


def build(dim=16, num_layers=6, kv_heads=None, heads=4):
    kv_heads = kv_heads if kv_heads else heads
    layers = nn.ModuleList()
    for _ in range(num_layers):
        layer = Layer(mlp=Mlp(dim), norm=nn.LayerNorm(dim))
        layers.append(layer)
    return Net(layers, kv_heads)
'''
    layer = "Layer(mlp=_reslint_import('parts').Mlp(16), norm=torch.nn.LayerNorm(16))"
    # the module class of parts.py is built for real (a SimpleNamespace would not run); six layers kept as two,
    # and `kv_heads` read on the right of its own assignment is the parameter (it used to loop on itself)
    [(line, expr, reason)] = sites(tmp_path, builder)
    assert (line, reason) == (12, "")
    assert expr == f"Net(torch.nn.ModuleList([{layer}, {layer}]), 4)"
    finder = Finder(str(tmp_path / "model.py"), str(tmp_path), {"Layer", "Net"}, {"Layer", "Net"})
    [site] = construction_sites("Net", finder)
    assert (site.shrunk, site.depth) == ("layers 6 -> 2", 6)
    assert site.full == f"Net(torch.nn.ModuleList([{', '.join([layer] * 6)}]), 4)"


def test_a_list_filled_where_reslint_cannot_follow_is_unreadable_not_empty(tmp_path):
    builder = '''\
import torch.nn as nn
from model import Layer, Net
from parts import Mlp, Settings


def build(dim=16, num_layers=6, every=2):
    settings = Settings(dim)
    layers = []
    for index in range(num_layers):
        if index % every == 0:
            layers.append(Layer(mlp=Mlp(settings.dim), norm=nn.LayerNorm(dim)))
    return Net(layers, heads=4)
'''
    assert sites(tmp_path, builder) == [(12, "", "`layers`: `layers` is filled by code reslint does not follow")]


def check(path: str) -> dict:
    done = run_reslint("check", "--no-cache", "--jobs", "1", "--timeout", "600", "--output-format", "json", path,
                       cwd=REPO_ROOT)
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


def test_full_check_builds_a_decoder_whose_parts_are_modules_of_other_files():
    pytest.importorskip("torch")
    document = check("fixtures/module_arguments/layer_modules/model.py")
    assert [(t["name"], t["traced"]) for t in document["traces"]] == [("Decoder", True)]
    [model] = document["models"]
    assert model["built_from"] == "fixtures/module_arguments/layer_modules/builders.py:24"
    assert model["engine"] == "traced (export)"
    assert "traced shallower, layers 6 -> 2; its stacks report the site's depth, 6" in model["notes"]
    assert [(s["attribute"], s["depth"], s["placement"], s["final_norm"]) for s in model["stacks"]] == [
        ("self.layers", 6, "pre", True)]
    assert document["findings"] == []


def test_inferred_arguments_are_retried_with_what_the_failing_statement_names():
    pytest.importorskip("torch")
    document = check("fixtures/trace/inferred_retry.py")
    # Layers is traced as a part of LayersWrapper; before the retries only GRUEncoder was built
    assert [(t["name"], t["traced"]) for t in document["traces"]] == [
        ("LowRankMix", True), ("WindowMix", True), ("GRUEncoder", True), ("Decoder", True), ("LayersWrapper", True)]
    models = {model["name"]: model for model in document["models"]}
    assert {name: model["built_from"] for name, model in models.items() if model["built_from"]} == {
        "Decoder": "inferred arguments (hidden_size=32, encoder=GRUEncoder())",  # the abstract base's subclass
        # `assert depth is not None` in the module argument: its optional depth filled
        "LayersWrapper": "inferred arguments (attn_layers=Layers(dim=32, depth=2), max_seq_len=32)",
    }
    assert ("the first guess, attn_layers=Layers(dim=32), max_seq_len=32, raised AssertionError: `depth` must be "
            "passed in") in models["LayersWrapper"]["notes"]
    # an inferred depth stays unknown: no depth for RL104
    assert [(s["attribute"], s["depth"], s["final_norm"]) for s in models["LayersWrapper"]["stacks"]] == [
        ("self.layers", None, True)]
    assert ("the first guess, hidden_size=32, raised AttributeError: 'NoneType' object has no attribute "
            "'output_size'") in models["Decoder"]["notes"]
    assert [(f["code"], f["line"], f["engine"]) for f in document["findings"]] == [("RL101", 79, "trace")]


def test_inferred_keywords_of_a_constructor_that_splits_its_kwargs_by_prefix():
    pytest.importorskip("torch")
    document = check("fixtures/trace/prefixed_kwargs.py")
    # Block and Tower are traced as parts of EncoderDecoder; before the retry it was not built (KeyError)
    assert [(t["name"], t["traced"]) for t in document["traces"]] == [("EncoderDecoder", True)]
    [model] = document["models"]
    assert model["built_from"] == ("inferred arguments (dim=32, enc_num_tokens=256, dec_num_tokens=256, "
                                   "enc_depth=2, dec_depth=2)")
    assert "the first guess, dim=32, raised KeyError: 'num_tokens'" in model["notes"]
    assert "its stacks' depth is unknown (inferred: enc_depth, dec_depth)" in model["notes"]
    assert [(s["attribute"], s["depth"], s["placement"], s["final_norm"]) for s in model["stacks"]] == [
        ("self.layers", None, "pre", True)]
    assert document["findings"] == []
