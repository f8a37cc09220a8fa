"""The result cache follows every other file a result was read from (issues 12/17): edit a file a fact of the
checked file came from, and the next run reports what an uncached run reports; edit an unrelated file, and
the checked file's entry is used as it is.

Each test runs the installed CLI on a small project, in the mode the hole was in: a file's result depends on
another file that it does not import (so no import digest covers it), through a constructor chain, a stack
builder, a hand-written norm function or a training script's command-line defaults. A cache hit is seen
without timing: a miss rewrites the file's entry (a new file put in place), a hit leaves it as it was."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_support import run_reslint, write
from golden import FIXTURES

POST_LN_ADVICE = ("train it with learning-rate warmup (Xiong et al. 2020); Post-LN stacks deeper than about 20 "
                  "layers diverge without DeepNorm-style scaling; Pre-LN needs neither")
UNRELATED = "VALUE = 1\n"


def copy_project(name: str, target: Path) -> None:
    """A project of fixtures/project/ (its golden files left out), with an unrelated file beside it."""
    shutil.copytree(FIXTURES / "project" / name, target, ignore=shutil.ignore_patterns("*.expected"), dirs_exist_ok=True)
    write(target, {"reslint.toml": "", "notes.py": UNRELATED})


def findings(project: Path, *flags: str) -> list[tuple[str, int, str, str]]:
    result = run_reslint("check", *flags, "--jobs", "1", "--exit-zero", "--config", "reslint.toml",
                         "--output-format", "json", ".", cwd=project, timeout=600)
    assert result.returncode == 0, result.stderr
    return [(item["path"], item["line"], item["code"], item["message"]) for item in json.loads(result.stdout)["findings"]]


def entry_stamps(project: Path) -> dict[str, tuple[int, int]]:
    """{checked file: (inode, mtime) of its cache entry}: a rewritten entry is a new file."""
    stamps = {}
    for entry in (project / ".reslint_cache" / "files").glob("*/*.json"):
        body = json.loads(json.loads(entry.read_text())["payload"])
        status = entry.stat()
        stamps[body["result"]["path"]] = (status.st_ino, status.st_mtime_ns)
    return stamps


def assert_unrelated_edit_keeps(project: Path, checked: str, flags: tuple[str, ...], expected: list) -> None:
    """Editing a file the result did not read re-analyses that file only: `checked`'s entry stays."""
    before = entry_stamps(project)
    (project / "notes.py").write_text(UNRELATED + "# edited\n")
    assert findings(project, *flags) == expected
    after = entry_stamps(project)
    assert after[checked] == before[checked]
    assert after["notes.py"] != before["notes.py"]  # the edited file itself was analysed again


BLOCKS = '''\
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d, norm_kind):
        super().__init__()
        self.ff = nn.Linear(d, d)
        self.norm = getattr(nn, norm_kind)(d)

    def forward(self, x):
        return self.norm(x + self.ff(x))
'''

MODEL = '''\
import torch.nn as nn

from blocks import Block


class Model(nn.Module):
    def __init__(self, d=16, norm_kind="LayerNorm"):
        super().__init__()
        self.block = Block(d, norm_kind)

    def forward(self, x):
        return self.block(x)
'''


def test_full_result_follows_the_constructor_chain_that_gave_a_required_argument(tmp_path):
    """The trace engine builds blocks.Block with `norm_kind` from Model's default in model.py (a file blocks.py
    does not import; the static engine cannot see the norm `getattr(nn, norm_kind)` makes, so only the
    trace engine read that chain). Model's default becomes Identity: the block has no norm, nothing to report."""
    pytest.importorskip("torch")
    write(tmp_path, {"reslint.toml": "", "blocks.py": BLOCKS, "model.py": MODEL, "notes.py": UNRELATED})
    post_ln = [("blocks.py", 11, "RL101", f"`Block` uses Post-LN: the norm follows `x + self.ff(x)`; {POST_LN_ADVICE}"),
               ("model.py", 12, "RL101", f"`Block` uses Post-LN: the norm follows `x + sublayer(x)`; {POST_LN_ADVICE}")]
    assert findings(tmp_path) == post_ln
    assert_unrelated_edit_keeps(tmp_path, "blocks.py", (), post_ln)

    (tmp_path / "model.py").write_text(MODEL.replace('norm_kind="LayerNorm"', 'norm_kind="Identity"'))
    assert findings(tmp_path) == []


def test_static_result_follows_the_function_in_another_file_that_builds_the_stack(tmp_path):
    """`repeat_layer` of builders.py returns deep copies of the layer: Encoder stacks Pre-LN layers without a
    final norm (RL103). Once it returns the one layer, there is no stack to report."""
    copy_project("helper_stack", tmp_path)
    no_final_norm = [("model.py", 22, "RL103", "the Pre-LN stack `self.layers` of `Encoder` feeds the head/output "
                      "without a final norm: in Pre-LN the residual stream is never normalised and grows with depth; "
                      "add a final LayerNorm/RMSNorm after the last block (as GPT-2's ln_f)")]
    assert findings(tmp_path, "--static") == no_final_norm
    assert_unrelated_edit_keeps(tmp_path, "model.py", ("--static",), no_final_norm)

    builders = tmp_path / "builders.py"
    builders.write_text(builders.read_text().replace("[copy.deepcopy(layer) for _ in range(times)]", "[layer]"))
    assert findings(tmp_path, "--static") == []


def test_static_result_follows_the_norm_function_in_another_file(tmp_path):
    """fixtures/project/norm_function with its norm class renamed (`Rescale`: no name that says norm) and its
    block Post-LN: Rescale calls pkg/functional.py's `fast_layer_norm`, which normalises, so Block is Post-LN.
    Once the function only scales, Rescale is no norm and Block has none."""
    copy_project("norm_function", tmp_path)
    layers = tmp_path / "pkg" / "layers.py"
    layers.write_text(layers.read_text().replace("FastLayerNorm", "Rescale").replace(
        "return x + self.fc(self.norm(x))", "return self.norm(x + self.fc(x))"))
    post_ln = [("pkg/functional.py", 8, "RL401", "hand-written LayerNorm in `fast_layer_norm` uses the unbiased variance "
                "(divides by n - 1), unlike nn.LayerNorm: pass unbiased=False (or correction=0)"),
               ("pkg/layers.py", 32, "RL101", f"`Block` uses Post-LN: the norm follows `x + self.fc(x)`; {POST_LN_ADVICE}")]
    assert findings(tmp_path, "--static") == post_ln
    assert_unrelated_edit_keeps(tmp_path, "pkg/layers.py", ("--static",), post_ln)

    (tmp_path / "pkg" / "functional.py").write_text(
        "def fast_layer_norm(x, weight, bias, eps=1e-5):\n    return x * weight + bias\n")
    assert findings(tmp_path, "--static") == []


def test_static_result_follows_the_training_script_that_gives_the_flag_its_default(tmp_path):
    """train.py builds model.Block from its arguments; `--pre-norm` has no default there, so the placement is
    open and its Post-LN branch is reported. Given a default of 1, Block is Pre-LN: nothing to report. The
    script was read while it held no default: the result depends on it all the same."""
    copy_project("argparse_flag", tmp_path)
    train = tmp_path / "train.py"
    train.write_text(train.read_text().replace('"--pre-norm", action="store_true")', '"--pre-norm", type=int)'))
    open_flag = [("model.py", 16, "RL101", f"`Block` uses Post-LN: the norm follows `x + self.ff(x)`; {POST_LN_ADVICE}")]
    assert findings(tmp_path, "--static") == open_flag
    assert_unrelated_edit_keeps(tmp_path, "model.py", ("--static",), open_flag)

    train.write_text(train.read_text().replace('"--pre-norm", type=int)', '"--pre-norm", type=int, default=1)'))
    assert findings(tmp_path, "--static") == []


WRAPPER = '''\
import torch.nn as nn


class Wrapper(nn.Module):
    def __init__(self, d=16, norm_first=False):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d, 2, 32, 0.0, batch_first=True, norm_first=norm_first)

    def forward(self, x):
        return self.layer(x)
'''

WRAPPERS_STACKED = '''\
import torch.nn as nn

from layer import Wrapper


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Wrapper(16, norm_first=True) for _ in range(2)])
        self.norm = nn.LayerNorm(16)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)
'''


def placements_and_traced(project: Path) -> tuple[dict[str, str], list[tuple[str, int, str]]]:
    """The models' placements and the trace engine's findings (the static engine's are not what this is about)."""
    result = run_reslint("check", "--jobs", "1", "--exit-zero", "--show-models", "--config", "reslint.toml",
                         "--output-format", "json", ".", cwd=project, timeout=600)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    return ({model["name"]: model["placement"] for model in document["models"]},
            [(item["path"], item["line"], item["code"]) for item in document["findings"] if item["engine"] == "trace"])


def test_full_result_follows_the_stacks_of_another_file_that_place_the_layer(tmp_path):
    """layer.py's Wrapper defaults to torch's Post-LN layer, but stack.py builds it with norm_first=True: the
    trace engine builds it that way, Pre-LN, and reports nothing. Once stack.py builds it Post-LN, the trace
    engine reports the layer. layer.py does not import stack.py."""
    pytest.importorskip("torch")
    write(tmp_path, {"reslint.toml": "", "layer.py": WRAPPER, "stack.py": WRAPPERS_STACKED, "notes.py": UNRELATED})
    assert placements_and_traced(tmp_path) == ({"Wrapper": "pre", "Stack": "none"}, [])
    before = entry_stamps(tmp_path)
    (tmp_path / "notes.py").write_text(UNRELATED + "# edited\n")
    assert placements_and_traced(tmp_path) == ({"Wrapper": "pre", "Stack": "none"}, [])
    assert entry_stamps(tmp_path)["layer.py"] == before["layer.py"]

    (tmp_path / "stack.py").write_text(WRAPPERS_STACKED.replace("norm_first=True", "norm_first=False"))
    assert placements_and_traced(tmp_path) == ({"Wrapper": "post", "Stack": "none"},
                                               [("layer.py", 7, "RL101"), ("stack.py", 14, "RL101")])


def test_static_result_follows_the_residual_helper_in_another_file(tmp_path):
    """fixtures/project/wrapped_residual: post.py's Block adds and norms through chunked.py's `apply_chunked`
    (`x + result if residual else result`), so it is Post-LN (RL101 at both calls with residual=True). Once the
    helper returns the callable's output alone, there is no residual add at those calls."""
    copy_project("wrapped_residual", tmp_path)
    everything = findings(tmp_path, "--static")
    post_ln = [finding for finding in everything if finding[0] == "post.py"]
    assert [(line, code) for _, line, code, _ in post_ln] == [(16, "RL101"), (18, "RL101")]
    assert_unrelated_edit_keeps(tmp_path, "post.py", ("--static",), everything)

    chunked = tmp_path / "chunked.py"
    chunked.write_text(chunked.read_text().replace("return x + result if residual else result", "return result"))
    assert [finding for finding in findings(tmp_path, "--static") if finding[0] == "post.py"] == []


def test_static_result_follows_the_stacks_of_another_file_that_set_the_wrappers_norm_first(tmp_path):
    """fixtures/project/builtin_wrapper: layers.py's classes pass their `norm_first` parameter (default False) on
    to torch's layer; model.py's stacks build EncoderLayer and DerivedLayer with True, PlainLayer with its default,
    so only PlainLayer's layer is Post-LN. Once model.py builds EncoderLayer with False, its layer is reported too.
    layers.py does not import model.py."""
    copy_project("builtin_wrapper", tmp_path)
    plain = ("layers.py", 31, "RL101", f"`nn.TransformerEncoderLayer` is Post-LN (norm_first=False, the default): "
                                       f"LayerNorm(x + sublayer(x)); {POST_LN_ADVICE}")
    assert findings(tmp_path, "--static") == [plain]
    assert_unrelated_edit_keeps(tmp_path, "layers.py", ("--static",), [plain])

    model = tmp_path / "model.py"
    model.write_text(model.read_text().replace("EncoderLayer(dim, norm_first=True)",
                                               "EncoderLayer(dim, norm_first=False)"))
    assert findings(tmp_path, "--static") == [(*plain[:1], 12, *plain[2:]), plain]
