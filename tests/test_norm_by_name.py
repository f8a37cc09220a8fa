"""A norm class chosen by name up the chain of constructors (issue 12, darts' TSMixer `_TimeMixing` /
`_FeatureMixing`): `TSMixerModel(norm_type="LayerNorm", normalize_before=False)` keeps the name, `_TSMixerModule`
turns it into a class with `getattr(layer_norm_variants, norm_type)` and hands both on, through a static method's
`**kwargs`, to blocks whose norm is `norm_type(...) if not normalize_before else nn.Identity()`.

fixtures/project/norm_by_name mirrors it (its golden files pin the static findings); these tests pin the shared
helper's answers: the class named by `getattr(module, <string>)`, by a dict of classes indexed by a string, by an
import; a name rebound before the call read as the statements before it leave it."""

from __future__ import annotations

import pytest

from cli_support import run_reslint
from golden import FIXTURES
from reslint.project_index import ProjectIndex
from reslint.static.chained_defaults import NamedClass, chained_default
from reslint.static.index import UNKNOWN

PROJECT = FIXTURES / "project" / "norm_by_name"


@pytest.mark.parametrize(("owner", "parameter", "value"), [
    ("TimeMixing", "norm_type", NamedClass("norm_variants.LayerNorm")),  # getattr(norm_variants, "LayerNorm")
    ("TimeMixing", "normalize_before", False),  # through a static method's **kwargs
    ("FeatureMixing", "norm_type", NamedClass("norm_variants.LayerNorm")),  # two sites, both agree
    ("GatedBlock", "norm_class", NamedClass("torch.nn.LayerNorm")),  # NORM_CLASSES["layer"]
    ("ScaledBlock", "norm_type", NamedClass("torch.nn.Identity")),  # getattr(nn, "Identity")
])
def test_a_class_chosen_by_name_is_followed_up_the_chain(owner, parameter, value):
    assert chained_default(PROJECT / "mixing.py", owner, parameter)[0] == value


def write_project(tmp_path, module_body: str) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "norms.py").write_text("import torch.nn as nn\n\n\nclass ScaleNorm(nn.LayerNorm):\n    pass\n")
    (tmp_path / "block.py").write_text("class Block:\n    def __init__(self, d, norm_type):\n        pass\n")
    (tmp_path / "model.py").write_text("import torch.nn as nn\n\nimport norms\nfrom block import Block\n\n\n"
                                       "def build(d=8, norm_type='ScaleNorm'):\n" + module_body
                                       + "    return Block(d, norm_type)\n")
    ProjectIndex.new_run()


@pytest.mark.parametrize(("body", "value"), [
    # the rebinding the call sees, not the parameter's own default
    ("    norm_type = getattr(norms, norm_type)\n", NamedClass("norms.ScaleNorm")),
    # a test the name's value folds takes one branch; a branch that raises does not reach the call
    ("    if norm_type not in ('ScaleNorm',):\n        raise ValueError(norm_type)\n"
     "    if isinstance(norm_type, str):\n        norm_type = getattr(norms, norm_type)\n", NamedClass("norms.ScaleNorm")),
    ("    if norm_type == 'batch':\n        norm_type = nn.BatchNorm1d\n    else:\n        norm_type = getattr(nn, 'LayerNorm')\n",
     NamedClass("torch.nn.LayerNorm")),
    # a test it cannot fold: both branches, which disagree
    ("    if d > 4:\n        norm_type = nn.RMSNorm\n    else:\n        norm_type = getattr(norms, norm_type)\n", UNKNOWN),
    # not rebound: the string itself
    ("", "ScaleNorm"),
])
def test_a_name_rebound_before_the_call_is_read_as_the_statements_leave_it(tmp_path, body, value):
    write_project(tmp_path, body)
    found = chained_default(tmp_path / "block.py", "Block", "norm_type")[0]
    assert found is value if value is UNKNOWN else found == value


def test_static_check_reports_the_post_ln_the_named_class_makes(tmp_path):
    """Through the CLI: with the names turned to Pre-LN (normalize_before=True) no block is Post-LN."""
    import shutil

    project = tmp_path / "project"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("*.expected"))
    (project / "pyproject.toml").write_text("")

    def found() -> list[tuple[str, int, str]]:
        result = run_reslint("check", "--static", "--no-cache", "--select", "RL101", "--output-format", "json",
                             "--exit-zero", ".", cwd=project)
        import json

        return [(f["path"], f["line"], f["code"]) for f in json.loads(result.stdout)["findings"]]

    assert found() == [("mixing.py", 19, "RL101"), ("mixing.py", 33, "RL101")]
    model = project / "model.py"
    model.write_text(model.read_text().replace('norm_type="LayerNorm", normalize_before=False',
                                               'norm_type="LayerNorm", normalize_before=True'))
    assert found() == []
