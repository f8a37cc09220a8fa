"""A required flag's default followed up the chain of constructors that pass it on (issue 12 items 2-3, the
wave-8 false RL101 on pytorch-forecasting's TiDE and the missed Post-LN of gluonts' PatchTST / iTransformer /
Lag-TST), in both engines.

fixtures/project/flag_chain mirrors them: blocks whose norm or placement hangs on a required argument whose
default sits two or three constructors up in other files (through positional and keyword arguments, a
`**kwargs` parameter, a dict literal passed as `model_kwargs` and spread into the model, an attribute the
caller's `__init__` set), and the same flags with no default anywhere. Its golden files pin the static
engine; these tests pin the shared helper and the full check (real tracing through the CLI)."""

from __future__ import annotations

import json
import shutil

import pytest

from cli_support import run_reslint
from golden import FIXTURES
from reslint.project_index import ProjectIndex
from reslint.static.chained_defaults import chained_default
from reslint.static.index import UNKNOWN

CHAIN = FIXTURES / "project" / "flag_chain"
POST_LN_ADVICE = ("train it with learning-rate warmup (Xiong et al. 2020); Post-LN stacks deeper than about 20 "
                  "layers diverge without DeepNorm-style scaling; Pre-LN needs neither")
BUILTIN_DEFAULT = "`nn.TransformerEncoderLayer` is Post-LN (norm_first=False, the default): LayerNorm(x + sublayer(x))"
BUILTIN_OPEN = ("`nn.TransformerEncoderLayer` is Post-LN with norm_first=False, torch's default (its `norm_first` is "
                "a required argument that no constructor up the chain gives a default): LayerNorm(x + sublayer(x))")
# (path, line, message) of every RL101 the fixture must draw, in either mode
EXPECTED_RL101 = [
    ("blocks.py", 38, f"`NormedBlock` uses Post-LN: the norm follows `x + self.ff(x)`; {POST_LN_ADVICE}"),
    ("blocks.py", 72, f"`OpenBlock` uses Post-LN: the norm follows `x + self.ff(x)`; {POST_LN_ADVICE}"),
    ("blocks.py", 87, f"`OpenNormBlock` uses Post-LN: the norm follows `x + self.dense(x)`; {POST_LN_ADVICE}"),
    ("patch_module.py", 10, f"{BUILTIN_DEFAULT}; {POST_LN_ADVICE}"),
    ("patch_module.py", 29, f"{BUILTIN_OPEN}; {POST_LN_ADVICE}"),
]


def names(paths) -> list[str]:
    return sorted(path.rsplit("/", 1)[-1] for path in paths)


@pytest.mark.parametrize(("path", "owner", "parameter", "value", "read"), [
    ("blocks.py", "ResidualBlock", "use_layer_norm", False, ["blocks.py", "model.py", "stacks.py"]),
    ("blocks.py", "NormedBlock", "use_norm", True, ["blocks.py", "model.py", "stacks.py"]),
    ("blocks.py", "PlacedBlock", "pre_norm", True, ["blocks.py", "model.py", "stacks.py"]),
    ("patch_module.py", "PatchModel", "norm_first", False,
     ["patch_estimator.py", "patch_lightning.py", "patch_module.py"]),
])
def test_chained_default_is_found_constructors_up_in_other_files(path, owner, parameter, value, read):
    found, reads = chained_default(CHAIN / path, owner, parameter)
    assert found is value
    assert names(reads) == read


@pytest.mark.parametrize(("path", "owner", "parameter"), [
    ("blocks.py", "OpenBlock", "pre_norm"),
    ("blocks.py", "OpenNormBlock", "use_layer_norm"),
    ("patch_module.py", "OpenLayerModel", "norm_first"),
])
def test_chained_default_is_unknown_where_nothing_builds_the_class(path, owner, parameter):
    assert chained_default(CHAIN / path, owner, parameter)[0] is UNKNOWN


def test_chained_default_disagreeing_sites_decide_nothing(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "block.py").write_text("class Block:\n    def __init__(self, pre_norm):\n        pass\n")
    (tmp_path / "a.py").write_text("from block import Block\n\n\ndef build(pre_norm=True):\n    return Block(pre_norm)\n")
    (tmp_path / "b.py").write_text("from block import Block\n\nBLOCK = Block(pre_norm=False)\n")
    assert chained_default(tmp_path / "block.py", "Block", "pre_norm")[0] is UNKNOWN
    (tmp_path / "b.py").write_text("from block import Block\n\nBLOCK = Block(pre_norm=not False)\n")
    ProjectIndex.new_run()  # answers are kept for one run
    assert chained_default(tmp_path / "block.py", "Block", "pre_norm")[0] is True


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    pytest.importorskip("torch")
    project = tmp_path_factory.mktemp("flag_chain") / "project"
    shutil.copytree(CHAIN, project, ignore=shutil.ignore_patterns("*.expected"))
    found = {}
    for mode in ("static", "full"):
        flags = ["--static"] if mode == "static" else []
        result = run_reslint("check", *flags, "--no-cache", "--jobs", "1", "--select", "RL101,RL902",
                             "--output-format", "json", ".", cwd=project)
        assert result.returncode == 0, result.stderr
        found[mode] = json.loads(result.stdout)
    return found


@pytest.mark.parametrize("mode", ["static", "full"])
def test_both_modes_report_the_placement_the_chain_defaults(reports, mode):
    """Silent: ResidualBlock (no norm, TiDE) and PlacedBlock (Pre-LN); reported: NormedBlock's Post-LN by
    default, torch's layer whose norm_first=False is the estimator's, and the three flags with no default."""
    found = sorted((finding["path"], finding["line"], finding["message"]) for finding in reports[mode]["findings"]
                   if finding["code"] == "RL101" and finding["path"] in ("blocks.py", "patch_module.py"))
    assert found == EXPECTED_RL101


def test_full_check_builds_the_models_with_the_chain_defaults(reports):
    """The trace engine builds what no site builds with the flag's default up the chain (the same helper), so it
    judges the configuration the static engine judges: TideStack without norms, PlacedBlock Pre-LN, torch's
    layer Post-LN; OpenBlock's and OpenLayerModel's flags have no default, so they are not guessed."""
    models = {model["name"]: model for model in reports["full"]["models"]}
    assert models["TideStack"]["built_from"] == "inferred arguments (d=32, hidden=32, depth=2, use_layer_norm=False)"
    assert [stack["placement"] for stack in models["TideStack"]["stacks"]] == ["none"]
    assert models["PlacedBlock"]["built_from"] == "inferred arguments (d=32, pre_norm=True)"
    assert models["PlacedBlock"]["placement"] == "pre"
    assert models["PatchModel"]["built_from"] == ("inferred arguments (d_model=32, nhead=4, dim_feedforward=64, "
                                                  "num_encoder_layers=2, norm_first=False)")
    assert [stack["placement"] for stack in models["PatchModel"]["stacks"]] == ["post"]
    assert models["OpenBlock"]["engine"] == "static"
    engines = {(finding["path"], finding["line"]): finding["engine"] for finding in reports["full"]["findings"]}
    assert engines[("patch_module.py", 10)] == "trace"
    assert engines[("blocks.py", 38)] == "trace"


def test_full_check_passes_a_chained_flag_through_kwargs(reports):
    """PlacedStack(d, depth, **block_kwargs) builds PlacedBlock(d, **block_kwargs): the keyword the inner
    constructor's TypeError names is given its default up the chain (pre_norm=True, model.py)."""
    models = {model["name"]: model for model in reports["full"]["models"]}
    assert models["PlacedStack"]["built_from"] == "inferred arguments (d=32, depth=2, pre_norm=True)"
    assert [stack["placement"] for stack in models["PlacedStack"]["stacks"]] == ["pre"]


def test_chained_default_of_a_name_bound_to_itself_ends(tmp_path):
    """`X = X` at module level, passed as the flag: UNKNOWN, not a RecursionError."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "m.py").write_text("X = X\n\n\nclass Block:\n    def __init__(self, pre_norm):\n        pass\n\n\n"
                                   "BLOCK = Block(X)\n")
    assert chained_default(tmp_path / "m.py", "Block", "pre_norm")[0] is UNKNOWN
