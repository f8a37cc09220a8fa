"""Only residuals are residuals, and a flag's default decides the placement: the static engine on the
fixtures whose golden files pin the full check (fixtures/trace/), so both engines are held to them."""

from __future__ import annotations

import json
import subprocess

import libcst as cst
import pytest

from cli_support import RESLINT
from golden import ROOT, render
from reslint.settings import Settings
from reslint.static.engine import extract_facts

TRACE = ROOT / "fixtures" / "trace"

STATIC = {
    "side_inputs.py": ["81:19 RL101", "111:18 RL101", "123:18 RL101", "summary: MaskedEncoder: Pre-LN",
                       "summary: PointDecoder: Post-LN", "summary: PosDecoder: Post-LN"],
    "normalised_skip.py": [
        "61:9 RL103",
        "summary: Adapter: 2 blocks (self.layers: AdapterLayer), Pre-LN",
        "summary: PlainPreLN: 2 blocks (self.layers: PreLNBlock), Pre-LN, final norm no",
    ],
    "broadcast_terms.py": [
        "summary: TwoTower: 2 blocks (self.layers: TwoTowerLayer), Pre-LN, final norm yes",
        "summary: Forecaster: 2 blocks (self.layers: MixerLayer), Pre-LN, final norm yes",
        "summary: ContextMixer: 2 blocks (self.layers: ContextLayer), Pre-LN, final norm yes",
    ],
    "flag_defaults.py": [
        "36:26 RL101",
        "57:26 RL101",
        "96:30 RL101",
        "summary: QueryDecoder: 2 blocks (self.layers: DecoderLayer), Post-LN",
        "summary: PositionFlagged: 2 blocks (self.blocks: PositionBlock), Post-LN",
        "summary: DeepNormOption: 2 blocks (self.blocks: DeepNormOptionBlock), Pre-LN, final norm yes",
    ],
}


def static_facts(name: str):
    path = TRACE / name
    return extract_facts(f"fixtures/trace/{name}", cst.parse_module(path.read_text(encoding="utf-8")))


@pytest.mark.parametrize("name", sorted(STATIC))
def test_static_engine_on_full_check_fixtures(name):
    assert render(TRACE / name, Settings(static=True)) == STATIC[name]


def test_mask_and_position_bias_added_by_every_layer_are_not_residuals():
    # Lines 27 and 28 add the shared mask and position bias to the scores of both layers; line 79 adds
    # the shared query_pe to the queries, which still makes `queries + attn_out` (line 81) a residual;
    # lines 110 and 122 add query_pos to the stream: position terms, not skips.
    lines = sorted({(add.span.line, add.placement) for add in static_facts("side_inputs.py").residuals})
    assert lines == [(42, "pre"), (43, "pre"), (66, "none"), (81, "post"), (111, "post"), (123, "post")]


def test_skip_through_norm_and_conv_is_a_transformed_skip():
    adds = {add.span.line: add for add in static_facts("normalised_skip.py").residuals if add.stack}
    assert (adds[25].skip_projection, adds[25].skip_normalised) == (True, True)
    assert (adds[27].skip_projection, adds[27].skip_normalised) == (False, False)
    assert not adds[50].skip_normalised


def test_non_default_branches_are_alternatives_not_residuals():
    facts = static_facts("flag_defaults.py")
    placed = sorted({(add.span.line, add.placement) for add in facts.residuals if add.placement != "none"})
    assert placed == [(36, "post"), (57, "post"), (96, "post"), (124, "pre")]
    others = sorted({(add.span.line, add.placement, add.alternative) for add in facts.alternatives
                     if add.placement != "none" and add.stack})
    assert others == [
        (39, "pre", "config.pre_norm = True"),
        (60, "pre", "config.pre_norm = True"),
        (97, "pre", "config.layer_norm_position != 'post'"),
        (123, "post", "config.deepnorm = True"),
    ]


def test_summary_notes_name_the_other_branch():
    completed = subprocess.run(
        [str(RESLINT), "check", "--static", "--no-cache", "--output-format", "json", "fixtures/trace/flag_defaults.py"],
        cwd=ROOT, capture_output=True, text=True, check=False)
    assert completed.returncode == 0, completed.stderr
    models = {model["name"]: (model["stacks"][0]["placement"], model["notes"])
              for model in json.loads(completed.stdout)["models"]}
    assert models == {
        "QueryDecoder": ("post", ["self.layers: Post-LN by default, Pre-LN when config.pre_norm = True"]),
        "PositionFlagged": ("post", ["self.blocks: Post-LN by default, Pre-LN when "
                                     "config.layer_norm_position != 'post'"]),
        "DeepNormOption": ("pre", ["self.blocks: Pre-LN by default, Post-LN (DeepNorm) when config.deepnorm = True"]),
    }


def test_config_defaults_come_from_the_imported_config_module_and_a_change_there_drops_the_cache(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[tool.reslint]\n", encoding="utf-8")
    for name in ("configuration_flags.py", "modeling_flags.py"):
        source = ROOT / "fixtures" / "placement" / "config_project" / name
        (project / name).write_text(source.read_text(encoding="utf-8"), encoding="utf-8")

    def check():
        completed = subprocess.run(
            [str(RESLINT), "check", "--static", "--exit-zero", "--output-format", "json", "modeling_flags.py"],
            cwd=project, capture_output=True, text=True, check=False)
        assert completed.returncode == 0, completed.stderr
        report = json.loads(completed.stdout)
        stack = report["models"][0]["stacks"][0]
        return sorted((f["code"], f["line"]) for f in report["findings"]), stack["placement"], stack["depth"]

    assert check() == ([("RL101", 19), ("RL101", 32), ("RL104", 48)], "post", 24)
    config = project / "configuration_flags.py"
    config.write_text(config.read_text(encoding="utf-8").replace("num_layers: int = 24", "num_layers: int = 4")
                      .replace("pre_norm: bool = False", "pre_norm: bool = True"), encoding="utf-8")
    assert check() == ([("RL103", 51)], "pre", 4)  # Pre-LN now, and no final norm
