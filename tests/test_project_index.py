"""reslint.project_index: the one import resolver (the files a file imports, what a name resolves to,
where a class is built, what the trace loader puts on sys.path), read statically."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cli_support import REPO_ROOT, RESLINT, write

from reslint.project_index import ProjectIndex, ResidualWrapper, module_name, project_root, search_path
from reslint.trace.loader import loaded_module


def deps(root: Path, path: str) -> list[str]:
    return [found.relative_to(root).as_posix() for found in ProjectIndex.for_file(root / path, root).dependencies(root / path)]


def test_a_script_imports_its_neighbours_transitively(tmp_path):
    write(tmp_path, {
        "train.py": "import torch\nfrom model import GPT\nimport config as cfg\n",
        "model.py": "from layers import Block\nimport os\n",
        "layers.py": "def helper():\n    import norms  # an import inside a function counts too\n",
        "norms.py": "",
        "config.py": "",
        "unrelated.py": "",
    })
    assert deps(tmp_path, "train.py") == ["config.py", "layers.py", "model.py", "norms.py"]
    assert deps(tmp_path, "norms.py") == []


def test_packages_run_their_init_files_and_from_imports_may_name_submodules(tmp_path):
    write(tmp_path, {
        "run.py": "import pkg.sub.mod\nfrom pkg import tools\nfrom pkg.sub import helper as h, CONSTANT\n",
        "pkg/__init__.py": "",
        "pkg/tools.py": "",
        "pkg/sub/__init__.py": "CONSTANT = 1\n",
        "pkg/sub/mod.py": "",
        "pkg/sub/helper.py": "",
        "pkg/sub/unused.py": "",
    })
    assert deps(tmp_path, "run.py") == [
        "pkg/__init__.py", "pkg/sub/__init__.py", "pkg/sub/helper.py", "pkg/sub/mod.py", "pkg/tools.py",
    ]


def test_relative_imports_resolve_from_the_importing_file(tmp_path):
    write(tmp_path, {
        "src/lib/__init__.py": "",
        "src/lib/models/__init__.py": "from .gpt import GPT\n",
        "src/lib/models/gpt.py": "from ..nn import layers\nfrom . import blocks\nfrom .. import util\n",
        "src/lib/models/blocks.py": "",
        "src/lib/nn/__init__.py": "",
        "src/lib/nn/layers.py": "",
        "src/lib/util.py": "",
    })
    # Checking gpt.py imports it as lib.models.gpt: lib/__init__ and lib/models/__init__ run first.
    assert deps(tmp_path, "src/lib/models/gpt.py") == [
        "src/lib/__init__.py", "src/lib/models/__init__.py", "src/lib/models/blocks.py",
        "src/lib/nn/__init__.py", "src/lib/nn/layers.py", "src/lib/util.py",
    ]


def test_namespace_packages_and_the_project_root_on_the_search_path(tmp_path):
    write(tmp_path, {
        "common/shapes.py": "",  # no __init__.py: a namespace package
        "scripts/check.py": "from common import shapes\nimport common.shapes\n",
    })
    assert deps(tmp_path, "scripts/check.py") == ["common/shapes.py"]


def test_a_folder_without_init_inside_a_regular_package_is_its_namespace_subpackage(tmp_path):
    # fair-esm: esm/model/ has no __init__.py, and esm/model/esm1.py imports `from ..modules import ...`.
    write(tmp_path, {
        "esm/__init__.py": "",
        "esm/modules.py": "class TransformerLayer:\n    pass\n",
        "esm/model/esm1.py": "from ..modules import TransformerLayer\nimport esm.modules\n",
        "loose/script.py": "",  # no package above: no namespace subpackage either
    })
    model = tmp_path / "esm/model/esm1.py"
    assert module_name(model) == ("esm.model.esm1", tmp_path)
    assert search_path(model)[0] == tmp_path
    assert deps(tmp_path, "esm/model/esm1.py") == ["esm/__init__.py", "esm/modules.py"]
    assert ProjectIndex.for_file(model, tmp_path).resolve(model, "esm.modules.TransformerLayer") == (
        tmp_path / "esm/modules.py", "TransformerLayer")
    assert module_name(tmp_path / "loose/script.py") is None


def test_the_trace_loader_imports_a_file_of_a_namespace_subpackage_by_its_dotted_name(tmp_path):
    write(tmp_path, {
        "esm/__init__.py": "",
        "esm/modules.py": "WIDTH = 8\n",
        "esm/model/esm1.py": "from ..modules import WIDTH\n",
    })
    with loaded_module(str(tmp_path / "esm/model/esm1.py"), str(tmp_path)) as module:
        assert (module.__name__, module.WIDTH) == ("esm.model.esm1", 8)


def test_only_files_under_the_root_count_and_broken_files_do_not_stop_it(tmp_path):
    root = tmp_path / "project"
    write(tmp_path, {"external.py": "", "project/pkg/__init__.py": ""})
    write(root, {
        "pkg/main.py": "import broken\nimport missing_module\nimport json\nfrom ... import external\n",
        "pkg/broken.py": "def (:\n",
        "pkg/json.py": "",  # shadows the standard library here, as it would at run time
    })
    assert (tmp_path / "external.py").is_file()
    assert deps(root, "pkg/main.py") == ["pkg/__init__.py", "pkg/broken.py", "pkg/json.py"]


def test_import_cycles_end(tmp_path):
    write(tmp_path, {"a.py": "import b\n", "b.py": "import a\nimport c\n", "c.py": "from a import x\n"})
    assert deps(tmp_path, "a.py") == ["b.py", "c.py"]


# ----- names: what an import resolves to ------------------------------------------------------------

def test_a_name_follows_package_reexports_to_the_file_defining_it(tmp_path):
    write(tmp_path, {
        "pyproject.toml": "",
        "src/lib/__init__.py": "from .models import GPT as GPT\n",
        "src/lib/models/__init__.py": "from .gpt import GPT\n",
        "src/lib/models/gpt.py": "class GPT:\n    pass\n",
        "scripts/train.py": "from lib import GPT\n",
    })
    index = ProjectIndex.for_file(tmp_path / "scripts/train.py")
    assert index.root == tmp_path
    assert index.resolve(tmp_path / "scripts/train.py", "lib.GPT") == (tmp_path / "src/lib/models/gpt.py", "GPT")
    assert index.resolve(tmp_path / "src/lib/models/__init__.py", ".gpt.GPT") == (
        tmp_path / "src/lib/models/gpt.py", "GPT")
    assert index.resolve(tmp_path / "scripts/train.py", "missing.GPT") is None


def test_the_search_path_is_the_one_the_project_runs_with(tmp_path):
    write(tmp_path, {".git/HEAD": "", "utils/__init__.py": "", "models/gpt/__init__.py": "", "models/gpt/net.py": "",
                     "models/gpt/src/.keep": "", "src/.keep": ""})
    # The directory above the file's package, the file's directory, the project root (its .git) and its src/.
    assert search_path(tmp_path / "models/gpt/net.py") == [tmp_path / "models", tmp_path / "models/gpt", tmp_path, tmp_path / "src"]
    assert project_root(tmp_path / "models/gpt/net.py") == tmp_path


def test_construction_sites_are_confirmed_through_the_callers_imports(tmp_path):
    write(tmp_path, {
        "pyproject.toml": "",
        "conv.py": "class ConvModule:\n    pass\n\n\nif __name__ == '__main__':\n    ConvModule()\n",
        "block.py": "from conv import ConvModule as Conv\n\n\nclass Block:\n    def __init__(self):\n"
                    "        self.conv = Conv()\n",
        "main.py": "import conv\n\n\ndef build():\n    return conv.ConvModule()\n",
        "other/conv.py": "class ConvModule:\n    pass\n",
        "other/model.py": "from conv import ConvModule\n\n\ndef build():\n    return ConvModule()\n",
    })
    sites = ProjectIndex.for_file(tmp_path / "conv.py").construction_sites(tmp_path / "conv.py", "ConvModule")
    # other/model.py builds its own neighbour's ConvModule, not this one.
    assert sorted((site.path.relative_to(tmp_path).as_posix(), site.line, site.scope, site.scope_is_class)
                  for site in sites) == [("block.py", 6, "Block", True), ("conv.py", 6, "", False),
                                         ("main.py", 5, "build", False)]


def test_a_star_import_of_the_defining_module_binds_nothing_to_follow(tmp_path):
    # transformers/integrations/executorch.py-like neighbours: `from module import *` once crashed the search
    write(tmp_path, {
        "pyproject.toml": "",
        "conv.py": "class ConvModule:\n    pass\n",
        "star.py": "from conv import *\nfrom conv import ConvModule\n\n\ndef build():\n    return ConvModule()\n",
    })
    sites = ProjectIndex.for_file(tmp_path / "conv.py").construction_sites(tmp_path / "conv.py", "ConvModule")
    assert [(site.path.name, site.line, site.scope) for site in sites] == [("star.py", 6, "build")]


def test_references_count_where_an_init_or_a_function_names_the_class(tmp_path):
    write(tmp_path, {
        "pyproject.toml": "",
        "conv.py": "class ConvModule:\n    pass\n",
        "encoder.py": "from conv import ConvModule\n\n\nclass Encoder:\n    def __init__(self):\n"
                      "        layer = ConvModule\n        self.convs = [layer() for _ in range(2)]\n\n"
                      "    def forward(self, x):\n        return isinstance(x, ConvModule)\n",
        "factory.py": "import conv\n\n\ndef pick():\n    return conv.ConvModule\n",
    })
    index = ProjectIndex.for_file(tmp_path / "conv.py")
    sites = index.construction_sites(tmp_path / "conv.py", "ConvModule", references=True)
    # espnet's `convolution_layer = ConvolutionModule` builds it; a forward's isinstance test does not.
    assert sorted((site.path.relative_to(tmp_path).as_posix(), site.line, site.scope, site.scope_is_class)
                  for site in sites) == [("encoder.py", 6, "Encoder", True), ("factory.py", 5, "pick", False)]
    assert index.construction_sites(tmp_path / "conv.py", "ConvModule") == []


# ----- the trace loader puts the project root on sys.path ------------------------------------------

REPO_MODEL = '''\
import torch.nn as nn

from utils.widths import WIDTH


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ff = nn.Linear(WIDTH, WIDTH)
        self.norm = nn.LayerNorm(WIDTH)

    def forward(self, x):
        return self.norm(x + self.ff(x))
'''


def test_the_full_check_imports_a_subfolder_model_that_imports_a_package_at_the_repository_root(tmp_path):
    repo = write(tmp_path / "repo", {
        ".git/HEAD": "",
        "utils/__init__.py": "",
        "utils/widths.py": "WIDTH = 8\n",
        "models/gpt.py": REPO_MODEL,
    })
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    result = subprocess.run([str(RESLINT), "check", "--output-format", "json", "--exit-zero", "--no-cache", "--jobs", "1",
                             str(repo)], cwd=outside, capture_output=True, text=True, timeout=600,
                            env={**os.environ, "NO_COLOR": "1"})
    report = json.loads(result.stdout)
    assert [(f["code"], f["line"], f["engine"]) for f in report["findings"]] == [("RL101", 13, "trace")]
    assert [(model["name"], model["engine"]) for model in report["models"]] == [("Block", "traced (fx)")]


SHADOWED_PACKAGE = {
    "shadowpkg/__init__.py": "from shadowpkg.shadowpkg import Net\n",
    "shadowpkg/parts.py": (
        "import torch.nn as nn\n\n\nclass Block(nn.Module):\n    def __init__(self, dim=8):\n        super().__init__()\n"
        "        self.norm = nn.LayerNorm(dim)\n        self.ff = nn.Linear(dim, dim)\n\n    def forward(self, x):\n"
        "        return self.norm(x + self.ff(x))\n"),
    "shadowpkg/shadowpkg.py": (
        "import torch.nn as nn\n\nfrom shadowpkg.parts import Block\n\n\nclass Net(nn.Module):\n"
        "    def __init__(self, dim=8):\n        super().__init__()\n"
        "        self.blocks = nn.ModuleList([Block(dim) for _ in range(2)])\n\n    def forward(self, x):\n"
        "        for block in self.blocks:\n            x = block(x)\n        return x\n"),
}


def test_a_module_named_as_its_package_does_not_shadow_the_package(tmp_path):
    # x-transformers' layout: site-packages/x_transformers/x_transformers.py imports x_transformers.attend,
    # with site-packages already on sys.path; the file's own folder must not come first.
    site = write(tmp_path / "site", SHADOWED_PACKAGE)
    result = subprocess.run([str(RESLINT), "check", "--output-format", "json", "--exit-zero", "--no-cache", "--jobs", "1",
                             "shadowpkg/shadowpkg.py"], cwd=site, capture_output=True, text=True, timeout=600,
                            env={**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(site)})
    report = json.loads(result.stdout)
    assert report["summary"]["files_not_imported"] == 0, report["findings"]
    assert [(model["name"], model["engine"]) for model in report["models"]] == [("Net", "traced (fx)")]


# ----- facts across files, in both engines (fixtures/project/) ---------------------------------------

POST_LN_TAIL = ("train it with learning-rate warmup (Xiong et al. 2020); Post-LN stacks deeper than about 20 layers "
                "diverge without DeepNorm-style scaling; Pre-LN needs neither")


def sequence_batchnorm(owner: str = "ConvModule", why: str = "attention (nn.MultiheadAttention)") -> str:
    return (f"BatchNorm1d in `{owner}`, part of a sequence model ({why}): its statistics mix samples and positions "
            "of the batch and padding, and differ between training and inference; use nn.LayerNorm or nn.RMSNorm "
            "over the feature dimension")


SEQUENCE_BATCHNORM = sequence_batchnorm()
HAND_WRITTEN_ATTENTION = "attention (softmax over q @ k)"
NO_FINAL_NORM = ("the Pre-LN stack `self.layers` of `Encoder` feeds the head/output without a final norm: in Pre-LN "
                 "the residual stream is never normalised and grows with depth; add a final LayerNorm/RMSNorm after "
                 "the last block (as GPT-2's ln_f)")
STATIC_FINDINGS = [
    ("argparse_flag/model.py", 16, "RL101", f"`Block` uses Post-LN: the norm follows `x + self.ff(x)`; {POST_LN_TAIL}"),
    ("builtin_base/layers.py", 9, "RL101",
     f"`PostLNEncoderLayer` is Post-LN (norm_first=False, the default): LayerNorm(x + sublayer(x)); {POST_LN_TAIL}"),
    ("builtin_base/layers.py", 19, "RL101",
     f"`Seq2Seq` is Post-LN (norm_first=False, the default): LayerNorm(x + sublayer(x)); {POST_LN_TAIL}"),
    ("config_elsewhere_post/layer.py", 15, "RL101",
     f"`Layer` uses Post-LN: the norm follows `residual + self.ff(x)`; {POST_LN_TAIL}"),
    ("config_post/model.py", 15, "RL101", f"`Block` uses Post-LN: the norm follows `x + self.ff(x)`; {POST_LN_TAIL}"),
    ("conformer_conv/conv.py", 13, "RL201", SEQUENCE_BATCHNORM),
    ("enum_flag/layer.py", 16, "RL101", f"`Layer` uses Post-LN: the norm follows `x + self.mlp(x)`; {POST_LN_TAIL}"),
    ("helper_stack/model.py", 22, "RL103", NO_FINAL_NORM),
    ("norm_subclass_missing/model.py", 23, "RL103", NO_FINAL_NORM),
    # RL201 with the sequence model in other files: the encoder naming the class, its attention in a third file
    # (espnet); the attention imported through a package (fairseq); a factory and a block between (three files up).
    ("rl201_conformer_encoder/convolution.py", 13, "RL201", sequence_batchnorm("ConvolutionModule", HAND_WRITTEN_ATTENTION)),
    ("rl201_conformer_factory/conv.py", 13, "RL201", SEQUENCE_BATCHNORM),
    ("rl201_conformer_layer/conformer_layer.py", 17, "RL201",
     sequence_batchnorm("ConvolutionModule", HAND_WRITTEN_ATTENTION)),
    ("norm_function/pkg/functional.py", 8, "RL401",
     "hand-written LayerNorm in `fast_layer_norm` uses the unbiased variance (divides by n - 1), unlike nn.LayerNorm: "
     "pass unbiased=False (or correction=0)"),
]
# torch's layer in the project's own classes, its `norm_first` a constructor parameter: how model.py's stacks build
# each class decides (Pre-LN twice: silent); the wrapper built with its default stays Post-LN.
STATIC_FINDINGS += [("builtin_wrapper/layers.py", 31, "RL101",
                     f"`nn.TransformerEncoderLayer` is Post-LN (norm_first=False, the default): LayerNorm(x + "
                     f"sublayer(x)); {POST_LN_TAIL}")]
# Defaults read through `kwargs.get` and a config dict, and RL301 through the project's factories (joeynmt's
# patterns): the encoder's layers are Pre-LN by default but its final norm reads another default; the decoder
# keeps its layers' Post-LN default and the scheduler factory returns no scheduler by default.
KWARGS_DEFAULTS_FINDINGS = [
    ("kwargs_defaults_post/encoder.py", 17, "RL103", NO_FINAL_NORM),
    ("kwargs_defaults_post/training.py", 11, "RL301",
     "`build_optimizer() (torch.optim.Adam)` trains a Post-LN model (`DecoderLayer` at "
     "fixtures/project/kwargs_defaults_post/layers.py:54) without learning-rate warmup: `build_scheduler()` "
     "(builders.py:10) returns no scheduler with the configuration's defaults: the learning rate stays constant; at "
     "initialisation Post-LN's gradients near the output are large and the full learning rate makes training diverge "
     "(Xiong et al. 2020); warm up over the first steps (LinearLR/SequentialLR, get_linear_schedule_with_warmup, "
     "warmup_steps) or use Pre-LN with a final norm"),
] + [(f"kwargs_defaults_{variant}/layers.py", line, "RL101",
      f"`{layer}` uses Post-LN: the norm follows `residual + self.ff(x)`; {POST_LN_TAIL}")
     for variant in ("post", "raises", "warmup")
     for line, layer in ((19, "FeedForward"), (54, "DecoderLayer"))]
STATIC_FINDINGS += KWARGS_DEFAULTS_FINDINGS
# flag_chain pins its findings in its golden files (tests/test_flag_chain.py checks them file by file): the
# whole-project run reports the same.
STATIC_FINDINGS += [(f"flag_chain/{golden.stem}.py", int(line), code, message)
                    for golden in sorted((REPO_ROOT / "fixtures/project/flag_chain").glob("*.expected"))
                    for line, code, message in re.findall(r"^(\d+):\d+ (RL\d+) (.*)$", golden.read_text(encoding="utf-8"),
                                                           re.M)]
# norm_by_name pins its findings in its golden files too (darts' TSMixer: a norm class chosen by name up the chain).
STATIC_FINDINGS += [(f"norm_by_name/{golden.stem}.py", int(line), code, message)
                    for golden in sorted((REPO_ROOT / "fixtures/project/norm_by_name").glob("*.expected"))
                    for line, code, message in re.findall(r"^(\d+):\d+ (RL\d+) (.*)$", golden.read_text(encoding="utf-8"),
                                                           re.M)]
# A layer Post-LN by its own default is placed as the stacks of other files build it (the encoder's layers
# above, and rl101_built_pre's EncoderLayer, are Pre-LN there); a skip scaled by alpha=1.0 is no DeepNorm.
# espnet2's transducer attention: a score method chosen in __init__, softmax over q @ k written by hand.
STATIC_FINDINGS += [("rl101_built_pre/layers.py", line, "RL101",
                     f"`{layer}` uses Post-LN: the norm follows `{terms}`; {POST_LN_TAIL}")
                    for line, layer, terms in ((22, "FeedForward", "self.alpha * residual + self.ff(x)"),
                                               (64, "DecoderLayer", "self.alpha * residual + self.attention(x)"),
                                               (83, "SpareLayer", "residual + self.ff(x)"))]
# tabpfn's chunked_evaluate_maybe_inplace: the residual add made by a helper of another file around the callable
# it is handed, when the call's `residual` flag is True (the norm calls pass False).
WRAPPED_RESIDUAL_STATIC = [("wrapped_residual/post.py", line, "RL101",
                            f"`Block` uses Post-LN: the norm follows `x + self.{branch}`; {POST_LN_TAIL}")
                           for line, branch in ((16, "attn"), (18, "mlp"))]
STATIC_FINDINGS += WRAPPED_RESIDUAL_STATIC
STATIC_FINDINGS += [("wrapped_residual/pre.py", 29, "RL103", NO_FINAL_NORM.replace(
    "stack `self.layers` of `Encoder`", "stack `self.blocks` of `Unnormed`"))]
STATIC_FINDINGS += [("rl201_chosen_score/convolution.py", 12, "RL201",
                     sequence_batchnorm("ConformerConvolution", HAND_WRITTEN_ATTENTION))]
# A ghost BatchNorm in its own file: built by a factory after a convolution over time for a text model, a sequence
# model's (rl201_sequence_ghost); built only to run on a table's (batch, features), by a column embedder and a factory
# next to an nn.Linear over its width, silent though attention runs on the feature tokens above (rl201_tabular_ghost).
GHOST_SEQUENCE = sequence_batchnorm("GhostBatchNorm", "attention (nn.MultiheadAttention), token embeddings (nn.Embedding)")
STATIC_FINDINGS += [("rl201_sequence_ghost/ghost_norm.py", 12, "RL201", GHOST_SEQUENCE)]
# The traced models add what running them shows, where they are built: the Post-LN layers a stack of
# model.py builds, and the BatchNorm1d at the place the Conformer block builds its convolution module.
TRACED_FINDINGS = [
    ("builtin_base/model.py", 13, "RL101",
     f"`PostLNEncoderLayer` uses Post-LN: the norm follows `x + sublayer(x)`; {POST_LN_TAIL}"),
    ("conformer_conv/conformer.py", 12, "RL201", SEQUENCE_BATCHNORM),
    ("rl201_conformer_factory/conformer.py", 11, "RL201", SEQUENCE_BATCHNORM),
    ("rl201_sequence_ghost/model.py", 13, "RL201", GHOST_SEQUENCE),
]
# The full check builds the joeynmt-style stacks from their defaults: the decoder runs its layers Post-LN; the
# model assembled by `build_model(cfg)` cannot be built without the config (reslint's guess: info).
TRACED_FINDINGS += [(f"kwargs_defaults_{variant}/decoder.py", 18, "RL101",
                     f"`DecoderLayer` uses Post-LN: the norm follows `x + sublayer(x)`; {POST_LN_TAIL}")
                    for variant in ("post", "raises", "warmup")]
TRACED_FINDINGS += [(f"kwargs_defaults_{variant}/model.py", 9, "RL902",
                     f"cannot build Model: the arguments at fixtures/project/kwargs_defaults_{variant}/model.py:22 "
                     "cannot be read without running the project's code: `encoder`: the parameter `cfg` of "
                     "`build_model()` gets no value reslint can read; pass --model FILE:EXPR to build it yourself; "
                     "static findings are still reported")
                    for variant in ("post", "pre", "raises", "warmup")]
# rl101_built_pre: the decoder's stack runs its layers Post-LN (as they are built there); the encoder layer is built
# Pre-LN, as encoder.py builds it.
TRACED_FINDINGS += [
    ("rl101_built_pre/decoder.py", 18, "RL101", f"`DecoderLayer` uses Post-LN: the norm follows `x + sublayer(x)`; {POST_LN_TAIL}"),
    # The trace engine counts espnet's hand-written softmax(q @ k) as attention: the encoder's BatchNorm1d too.
    ("rl201_conformer_encoder/encoder.py", 26, "RL201", sequence_batchnorm("ConvolutionModule", HAND_WRITTEN_ATTENTION)),
    # The Conformer block is built with the modules building.py's site passes (real project classes, not
    # stand-ins): its traced BatchNorm1d is at the place the block takes its convolution module.
    ("rl201_chosen_score/conformer.py", 10, "RL201", sequence_batchnorm("ConformerConvolution", HAND_WRITTEN_ATTENTION)),
]
# flag_chain: the trace finds NormedBlock's Post-LN where the stacks build it (use_norm=True, model.py's default);
# the lightning wrapper is built from the estimator's keyword dict, its `self.d_model`... read from the estimator's
# `__init__` (their defaults): torch's layer Post-LN where the wrapper calls the model.
TRACED_FINDINGS += [(f"flag_chain/{path}", line, "RL101",
                     f"`NormedBlock` uses Post-LN: the norm follows `x + sublayer(x)`; {POST_LN_TAIL}")
                    for path, line in (("model.py", 23), ("stacks.py", 24))]
TRACED_FINDINGS += [("flag_chain/patch_lightning.py", 15, "RL101",
                     "`nn.TransformerEncoderLayer` is Post-LN (norm_first=False, the default): LayerNorm(x + sublayer(x)); "
                     f"{POST_LN_TAIL}")]
# saved_hparams: the layers built from the forecaster's `self.hparams` and `self.d_ff` (pytorch-forecasting's
# TimeXer): Post-LN in both engines, and where the traced forecaster calls its encoder.
STATIC_FINDINGS += [("saved_hparams/layers.py", line, "RL101", f"`EncoderLayer` uses Post-LN: the norm follows `{terms}`; "
                     f"{POST_LN_TAIL}") for line, terms in ((15, "x + self.attention(x, x, x, need_weights=False)[0]"),
                                                           (16, "x + self.ff(x)"))]
TRACED_FINDINGS += [("saved_hparams/forecaster.py", 24, "RL101",
                     f"`EncoderLayer` uses Post-LN: the norm follows `x + sublayer(x)`; {POST_LN_TAIL}")]
# norm_by_name: the trace builds MixerModule with the chain's norm_type="LayerNorm", normalize_before=False and finds
# its first FeatureMixing Post-LN where the module calls it.
TRACED_FINDINGS += [("norm_by_name/model.py", 29, "RL101",
                     f"`FeatureMixing` uses Post-LN: the norm follows `x + sublayer(x)`; {POST_LN_TAIL}")]
# wrapped_residual: the trace follows the norms through the helper's flatten/view and reports the same Post-LN adds
# itself, in place of the static findings (its own wording: the call is no `+` expression to quote).
TRACED_FINDINGS += [("wrapped_residual/post.py", line, "RL101",
                     f"`Block` uses Post-LN: the norm follows `x + sublayer(x)`; {POST_LN_TAIL}") for line in (16, 18)]
# builtin_wrapper: the trace builds EncoderLayer and DerivedLayer with norm_first=True, as model.py builds them, and
# finds PostEncoder's torch layers Post-LN where it builds them.
TRACED_FINDINGS += [("builtin_wrapper/model.py", 37, "RL101",
                     f"`nn.TransformerEncoderLayer` is Post-LN (norm_first=False, the default): LayerNorm(x + "
                     f"sublayer(x)); {POST_LN_TAIL}")]
# Every other fixture directory (argparse_flag_pre, config_elsewhere_pre, config_pre, conv_in_cnn, enum_flag_pre,
# helper_stack_normed, kwargs_defaults_pre, norm_subclass, rl201_chosen_gate, rl201_conv_in_cnn, rl201_tabular_ghost,
# stats_function)
# must stay silent.


def project_findings(*args: str) -> list[tuple[str, int, str, str]]:
    result = subprocess.run([str(RESLINT), "check", "--output-format", "json", "--exit-zero", "--no-cache", "--jobs", "1",
                             *args, "fixtures/project"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=1800,
                            env={**os.environ, "NO_COLOR": "1"})
    report = json.loads(result.stdout)
    return sorted((f["path"].removeprefix("fixtures/project/"), f["line"], f["code"], f["message"])
                  for f in report["findings"])


def test_cross_file_facts_in_the_static_check():
    assert project_findings("--static") == sorted(STATIC_FINDINGS)


def test_cross_file_facts_in_the_full_check():
    static = [finding for finding in STATIC_FINDINGS if finding not in WRAPPED_RESIDUAL_STATIC]
    assert project_findings() == sorted(static + TRACED_FINDINGS)


def test_a_cached_rl201_follows_the_files_that_made_the_module_part_of_a_sequence_model(tmp_path):
    project = tmp_path / "asr"
    shutil.copytree(REPO_ROOT / "fixtures/project/rl201_conformer_encoder", project)
    (project / "pyproject.toml").write_text("")

    def codes() -> list[tuple[str, int, str]]:
        result = subprocess.run([str(RESLINT), "check", "--static", "--output-format", "json", "--exit-zero", "--jobs",
                                 "1", "."], cwd=project, capture_output=True, text=True, timeout=600)
        return [(f["path"], f["line"], f["code"]) for f in json.loads(result.stdout)["findings"]]

    assert codes() == [("convolution.py", 13, "RL201")]
    # The attention in attention.py is what made it a sequence model: without it, the cached finding goes.
    attention = project / "attention.py"
    attention.write_text(attention.read_text().replace("torch.softmax(scores, dim=-1)", "torch.sigmoid(scores)"))
    assert codes() == []


def test_rl201_follows_a_factory_that_hands_the_module_to_a_block_with_attention(tmp_path):
    # espnet2's transducer encoder: `build_conformer_block` passes attention and the convolution module to one
    # block that takes both as arguments. Not among fixtures/project/: the full check's model discovery reports,
    # from that factory, an RL902 that is not this test's subject. cnn.py builds the module too, with no attention.
    fixture = REPO_ROOT / "fixtures/project/rl201_conformer_encoder"
    write(tmp_path, {
        "pyproject.toml": "",
        "conv.py": (fixture / "convolution.py").read_text(),
        "attention.py": (fixture / "attention.py").read_text(),
        "block.py": (fixture / "encoder_layer.py").read_text(),
        "building.py": "from attention import MultiHeadedAttention\nfrom block import EncoderLayer\n"
                       "from conv import ConvolutionModule\n\n\ndef build_conformer_block(configuration):\n"
                       "    size = configuration.get('hidden_size', 16)\n"
                       "    return lambda: EncoderLayer(size, MultiHeadedAttention(size), ConvolutionModule(size))\n",
        "cnn.py": "import torch.nn as nn\n\nfrom conv import ConvolutionModule\n\n\ndef build_cnn(dim=16):\n"
                  "    return nn.Sequential(ConvolutionModule(dim), nn.Flatten(), nn.LazyLinear(10))\n",
    })
    result = subprocess.run([str(RESLINT), "check", "--static", "--no-cache", "--output-format", "json", "--exit-zero",
                             "--jobs", "1", "."], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert [(f["path"], f["line"], f["code"], f["message"]) for f in json.loads(result.stdout)["findings"]] == [
        ("conv.py", 13, "RL201", sequence_batchnorm("ConvolutionModule", HAND_WRITTEN_ATTENTION))]


def test_a_helper_of_another_file_that_adds_its_callable_argument_back_is_read_as_a_residual(tmp_path):
    write(tmp_path, {
        "pyproject.toml": "",
        "helpers.py": "def chunked(f, x, residual, *args):\n    result = f(x.flatten(0, 1), *args).view(x.shape)\n"
                      "    return x + result if residual else result\n\n\n"
                      "def always(block, h):\n    return h + block(h)\n\n\n"
                      "def other(f, x):\n    return x + torch.relu(x)\n\n\n"
                      "def itself(f, x):\n    return x + x(f)\n",
        "model.py": "from helpers import always, chunked, itself, other\n",
    })
    index = ProjectIndex(tmp_path)
    model = tmp_path / "model.py"
    assert index.residual_wrapper(model, "helpers.chunked") == ResidualWrapper("f", "x", ("f", "x", "residual"),
                                                                               "residual")
    assert index.residual_wrapper(model, "helpers.always") == ResidualWrapper("block", "h", ("block", "h"), None)
    # the add does not involve the callable argument, or adds the called parameter itself: no residual helper
    assert index.residual_wrapper(model, "helpers.other") is None
    assert index.residual_wrapper(model, "helpers.itself") is None


@pytest.mark.parametrize("layout", ["lib/python3.12/site-packages/visionpkg", "build/checkout"],
                         ids=["installed package", "checkout under build"])
def test_cross_file_links_resolve_in_a_project_that_lives_under_a_skipped_folder_name(tmp_path, layout):
    """A project folder whose ancestors are named like skipped folders (site-packages: an installed package
    checked where pip put it; a checkout under ~/build) still links its files: only folders inside the project
    are skipped. vision.py normalises the stream of encoder.py's stack, so encoder.py draws no RL103."""
    fixture = REPO_ROOT / "fixtures/final_norm/parent_norm"
    project = write(tmp_path / layout, {
        "__init__.py": "",
        "pyproject.toml": "",
        "encoder.py": (fixture / "encoder.py").read_text(),
        "vision.py": (fixture / "vision.py").read_text().replace("from encoder import", "from .encoder import"),
    })
    result = subprocess.run([str(RESLINT), "check", "--static", "--no-cache", "--output-format", "json", "--exit-zero",
                             "--jobs", "1", "--select", "RL103", "encoder.py", "vision.py"],
                            cwd=project, capture_output=True, text=True, timeout=600)
    assert json.loads(result.stdout)["findings"] == []


def test_an_unchanged_file_is_read_once_per_run_and_overlay(tmp_path, monkeypatch):
    """syntax_tree remembers which content a path had in this run: the classes of a checked file ask for the
    same few files a thousand times. An overlay (a fix's re-check), a change of the file (a library caller's
    check after it rewrote it) and a new run read the file again."""
    from reslint.file_gate import overlaid

    write(tmp_path, {"pyproject.toml": "", "layers.py": "class Block:\n    pass\n"})
    path = tmp_path / "layers.py"
    index = ProjectIndex(tmp_path)
    reads = []
    real_source = ProjectIndex.source
    monkeypatch.setattr(ProjectIndex, "source", lambda self, file: reads.append(file) or real_source(self, file))

    def names(tree) -> list[str]:
        return [statement.name for statement in tree.body]

    ProjectIndex.new_run()
    assert names(index.syntax_tree(path)) == names(index.syntax_tree(path)) == ["Block"]
    assert len(reads) == 1
    with overlaid(path, b"class Fixed:\n    pass\n"):
        assert names(index.syntax_tree(path)) == ["Fixed"]
    assert names(index.syntax_tree(path)) == ["Block"]
    assert len(reads) == 3

    path.write_text("class Changed:\n    pass\n", encoding="utf-8")
    assert names(index.syntax_tree(path)) == ["Changed"]
    assert len(reads) == 4
    ProjectIndex.new_run()
    assert names(index.syntax_tree(path)) == ["Changed"]
    assert len(reads) == 5


def test_resolving_a_name_reads_a_file_once_per_content_after_its_tree_left_the_cache(tmp_path, monkeypatch):
    """A shared module's outline (its top-level names, each with its kind, and its imports) outlives its tree in
    the bounded tree cache: resolving names through it again does not parse it again, a change of its content
    does, and a function fact of it (a residual helper, a `clones` helper) is kept by its content too. A name
    the outline shows to be no function (transformers' model-output classes) never has its file parsed again."""
    import reslint.project_index as project_index

    write(tmp_path, {
        "pyproject.toml": "",
        "shared/__init__.py": "from .helpers import always, Output\n",
        "shared/helpers.py": "class Output:\n    pass\n\n\ndef always(block, h):\n    return h + block(h)\n",
        "model.py": "from shared import always, Output\n",
    })
    model, helpers = tmp_path / "model.py", tmp_path / "shared/helpers.py"
    index = ProjectIndex(tmp_path)
    parsed = []
    real_parse = project_index.parse_quietly
    monkeypatch.setattr(project_index, "parse_quietly",
                        lambda source, path: parsed.append(Path(path).relative_to(tmp_path).as_posix())
                        or real_parse(source, path))
    monkeypatch.setattr(project_index, "MAX_CACHED_TREE_SOURCE", 0)  # every tree but the last leaves the cache
    ProjectIndex.new_run()

    wrapper = ResidualWrapper("block", "h", ("block", "h"), None)
    assert index.residual_wrapper(model, "shared.always") == wrapper
    assert index.resolve(model, "shared.Output") == (helpers, "Output")
    assert index.residual_wrapper(model, "shared.Output") is None
    assert parsed == ["shared/__init__.py", "shared/helpers.py"]
    index.syntax_tree(model)  # the last tree read: the others have left the cache
    assert index.residual_wrapper(model, "shared.always") == wrapper
    assert index.resolve(model, "shared.always") == (helpers, "always")
    assert index.residual_wrapper(model, "shared.Output") is None
    assert index.copies_first_argument(model, "shared.Output") is False
    assert parsed == ["shared/__init__.py", "shared/helpers.py", "model.py"]

    helpers.write_text("def always(f, x):\n    return x + f(x)\n", encoding="utf-8")
    assert index.residual_wrapper(model, "shared.always") == ResidualWrapper("f", "x", ("f", "x"), None)
    assert index.resolve(model, "shared.Output") == (helpers, "Output")  # no longer defined there: named by its file
    assert parsed[3:] == ["shared/helpers.py"]


def test_whether_a_file_declares_command_line_arguments_is_read_once_per_run_without_its_import_words(tmp_path,
                                                                                                      monkeypatch):
    """`declares_arguments` (asked of every project file when the scripts building a model are searched) reads a
    file once per run and does not extract its import words; words asked for later are read then, and a file
    whose words are known answers without another read, in a later run too while it is unchanged; an overlay (a
    fix's re-check) is read as it is."""
    import reslint.project_index as project_index
    from reslint.file_gate import overlaid

    write(tmp_path, {"pyproject.toml": "", "train.py": "import argparse\nparser.add_argument('--depth')\n",
                     "other.py": "import torch\n"})
    train, other = tmp_path / "train.py", tmp_path / "other.py"
    index = ProjectIndex(tmp_path)
    reads, clauses = [], []
    real_source, real_clauses = ProjectIndex.source, project_index.import_clauses
    monkeypatch.setattr(ProjectIndex, "source", lambda self, file: reads.append(file.name) or real_source(self, file))
    monkeypatch.setattr(project_index, "import_clauses", lambda source: clauses.append(source) or real_clauses(source))
    ProjectIndex.new_run()
    assert [index.declares_arguments(train), index.declares_arguments(other)] == [True, False]
    assert [index.declares_arguments(train), index.declares_arguments(other)] == [True, False]
    assert reads == ["train.py", "other.py"] and clauses == []
    assert index.imported_words(train) == {"argparse"}
    assert index.imported_words(train) == {"argparse"}
    assert reads == ["train.py", "other.py", "train.py"] and len(clauses) == 1
    ProjectIndex.new_run()
    assert [index.declares_arguments(train), index.imported_words(train)] == [True, {"argparse"}]
    assert reads == ["train.py", "other.py", "train.py"]
    with overlaid(other, b"parser.add_argument('--norm')\n"):
        assert index.declares_arguments(other) is True
    assert index.declares_arguments(other) is False


def test_only_a_call_with_a_callable_and_a_data_argument_asks_whether_its_helper_is_a_residual_one(tmp_path, monkeypatch):
    """A residual helper takes the callable and the data (`chunked(self.mlp, h, True)`): a call of an imported
    function with one argument (`scale(h)`) cannot be one, and its file is not read to find out."""
    import reslint

    write(tmp_path, {
        "pyproject.toml": "",
        "helpers.py": "def always(block, h):\n    return h + block(h)\n\n\ndef scale(h):\n    return h * 2\n",
        "model.py": "import torch.nn as nn\n\nfrom helpers import always, scale\n\n\nclass Block(nn.Module):\n"
                    "    def __init__(self, dim):\n        super().__init__()\n        self.mlp = nn.Linear(dim, dim)\n\n"
                    "    def forward(self, x):\n        h = scale(x)\n        return always(self.mlp, h)\n",
    })
    asked = []
    real = ProjectIndex.residual_wrapper
    monkeypatch.setattr(ProjectIndex, "residual_wrapper",
                        lambda self, importer, dotted, through=None: asked.append(dotted)
                        or real(self, importer, dotted, through))
    reslint.check([str(tmp_path / "model.py")], static=True, cache=False, jobs=1, cwd=tmp_path)
    assert asked == ["helpers.always"]


def test_what_is_kept_by_content_is_bounded(tmp_path, monkeypatch):
    """Outlines and function facts outlive runs in a process that checks again: past the bound, they start over."""
    import reslint.project_index as project_index

    write(tmp_path, {"pyproject.toml": "", "a.py": "def f(g, x):\n    return x + g(x)\n", "b.py": "def h(y):\n    return y\n",
                     "model.py": "from a import f\nfrom b import h\n"})
    monkeypatch.setattr(project_index, "MAX_KEPT_BY_CONTENT", 1)
    index = ProjectIndex(tmp_path)
    ProjectIndex.new_run()
    assert index.residual_wrapper(tmp_path / "model.py", "a.f") == ResidualWrapper("g", "x", ("g", "x"), None)
    assert index.residual_wrapper(tmp_path / "model.py", "b.h") is None
    assert [key[0].name for key in index._outlines] == ["b.py"]
    assert [key[0][0].name for key in index._function_facts] == ["b.py"]


NORM_MODULE = ("import torch.nn as nn\n\n\nclass Rescale(nn.LayerNorm):\n    pass\n\n\n"
               "class Block(nn.Module):\n    def __init__(self, d):\n        super().__init__()\n"
               "        self.norm = Rescale(d)\n        self.fc = nn.Linear(d, d)\n\n"
               "    def forward(self, x):\n        return self.norm(x + self.fc(x))\n")
USER_MODULE = ("import torch.nn as nn\nfrom blocks import Rescale\n\n\nclass {name}(nn.Module):\n"
               "    def __init__(self, d):\n        super().__init__()\n        self.fc = nn.Linear(d, d)\n"
               "        self.norm = Rescale(d)\n\n    def forward(self, x):\n        return self.norm(x + self.fc(x))\n")


def test_a_file_checked_earlier_in_the_run_leaves_its_outline_for_the_files_importing_it(tmp_path, monkeypatch):
    """The trees of the files checked earlier have left the bounded tree cache, but their outlines have not: a file
    checked later resolves the names it imports from them without parsing them again (transformers' modular files
    import from the modeling files checked before them)."""
    import reslint
    import reslint.project_index as project_index

    write(tmp_path, {"pyproject.toml": "", "blocks.py": NORM_MODULE, "model.py": USER_MODULE.format(name="Model")})
    parsed = []
    real_parse = project_index.parse_quietly
    monkeypatch.setattr(project_index, "parse_quietly",
                        lambda source, path: parsed.append(Path(path).name) or real_parse(source, path))
    monkeypatch.setattr(project_index, "MAX_CACHED_TREE_SOURCE", 0)
    report = reslint.check([tmp_path / "blocks.py", tmp_path / "model.py"], static=True, cache=False, jobs=1)
    assert [(finding.code, Path(finding.path).name, finding.line) for finding in report.findings] == [
        ("RL101", "blocks.py", 15), ("RL101", "model.py", 12)]  # model.py read Rescale as a LayerNorm
    assert "blocks.py" not in parsed


def test_a_file_the_files_before_it_had_parsed_is_not_parsed_again_for_its_own_check(tmp_path, monkeypatch):
    """A file read through the project index while an earlier file was checked (its tree still in the tree cache)
    is checked with that tree, not a second CPython parse of the same text."""
    import reslint
    import reslint.analysis as analysis

    write(tmp_path, {"pyproject.toml": "", "a_model.py": USER_MODULE.format(name="Model").replace("blocks", "z_blocks"),
                     "z_blocks.py": NORM_MODULE})
    parsed = []
    real_parse = analysis.cpython_parse
    monkeypatch.setattr(analysis, "cpython_parse", lambda text: parsed.append(text) or real_parse(text))
    report = reslint.check([tmp_path / "a_model.py", tmp_path / "z_blocks.py"], static=True, cache=False, jobs=1)
    assert [(finding.code, Path(finding.path).name, finding.line) for finding in report.findings] == [
        ("RL101", "a_model.py", 12), ("RL101", "z_blocks.py", 15)]
    assert parsed == [USER_MODULE.format(name="Model").replace("blocks", "z_blocks")]


def test_a_norm_class_of_another_file_is_classified_once_per_content(tmp_path, monkeypatch):
    """Whether an imported class is a norm is kept by its file's content: the files importing it after its libcst
    index left the index cache do not parse it with libcst again, and a change of the file is read."""
    import reslint
    import reslint.project_index as project_index
    import reslint.static.unvalidated_parse as unvalidated_parse

    two_norms = USER_MODULE.replace("from blocks import Rescale\n", "from blocks import Rescale\nfrom more import Shift\n")
    two_norms = two_norms.replace("        self.norm = Rescale(d)\n", "        self.norm = Rescale(d)\n        self.shift = Shift(d)\n")
    two_norms = two_norms.replace("return self.norm(x + self.fc(x))", "return self.shift(self.norm(x + self.fc(x)))")
    write(tmp_path, {"pyproject.toml": "", "blocks.py": NORM_MODULE,
                     "more.py": "import torch.nn as nn\n\n\nclass Shift(nn.LayerNorm):\n    pass\n",
                     **{f"model_{n}.py": two_norms.format(name=f"Model{n}") for n in range(3)}})
    parsed = []
    real_parse = unvalidated_parse.parse_module
    monkeypatch.setattr(unvalidated_parse, "parse_module", lambda text: parsed.append(text) or real_parse(text))
    monkeypatch.setattr(project_index, "MAX_CACHED_INDEX_SOURCE", 0)  # every index but the last leaves the cache
    models = [tmp_path / f"model_{n}.py" for n in range(3)]
    report = reslint.check(models, static=True, cache=False, jobs=1)
    assert [(finding.code, Path(finding.path).name) for finding in report.findings] == [
        ("RL101", f"model_{n}.py") for n in range(3)]
    assert parsed.count(NORM_MODULE) == 1  # the index of more.py had pushed it out of the cache

    (tmp_path / "blocks.py").write_text(NORM_MODULE.replace("nn.LayerNorm", "nn.Module"), encoding="utf-8")
    report = reslint.check(models, static=True, cache=False, jobs=1)
    assert report.findings == []  # Rescale is no norm now: no Post-LN to report


def test_an_import_is_looked_for_on_disk_once_per_run_and_directory(tmp_path, monkeypatch):
    """Where `import x.y` leads from a directory is walked (a handful of `stat`s) once per run: the classes of every
    checked file of that directory resolve the same imports. A new run looks again (a module may have appeared)."""
    import reslint.project_index as project_index

    write(tmp_path, {"pyproject.toml": "", "pkg/__init__.py": "", "pkg/layers.py": "class Block:\n    pass\n",
                     "a.py": "from pkg.layers import Block\n", "b.py": "from pkg.layers import Block\n"})
    walked = []
    real_walk = project_index.walk
    monkeypatch.setattr(project_index, "walk", lambda directory, parts: walked.append(parts) or real_walk(directory, parts))
    index = ProjectIndex(tmp_path)
    ProjectIndex.new_run()
    for importer in ("a.py", "b.py", "a.py"):
        assert index.resolve(tmp_path / importer, "pkg.layers.Block") == (tmp_path / "pkg/layers.py", "Block")
    assert index.resolve(tmp_path / "a.py", "pkg.norms.Scale") is None
    assert walked == [["pkg", "layers"], ["pkg", "norms"]]

    write(tmp_path, {"pkg/norms.py": "class Scale:\n    pass\n"})
    assert index.resolve(tmp_path / "a.py", "pkg.norms.Scale") is None  # the same run: as it was
    ProjectIndex.new_run()
    assert index.resolve(tmp_path / "b.py", "pkg.norms.Scale") == (tmp_path / "pkg/norms.py", "Scale")


def test_the_indexes_of_one_root_keep_the_files_they_read_in_one_store(tmp_path, monkeypatch):
    """The static engine's index (no configured root) and the training reader's (the configured root, which joins
    the search path) are two indexes of one project root; a file one of them parsed is not parsed again, nor held
    twice, by the other (ContentStore). Indexes made after `_shared` starts over read afresh."""
    import reslint.project_index as project_index

    write(tmp_path, {"pyproject.toml": "", "layers.py": "def helper(x):\n    return x\n",
                     "model.py": "from layers import helper\n"})
    parsed = []
    parse_quietly = project_index.parse_quietly
    monkeypatch.setattr(project_index, "parse_quietly",
                        lambda source, path: parsed.append(Path(path).name) or parse_quietly(source, path))
    ProjectIndex._shared.clear()
    ProjectIndex.new_run()
    engine = ProjectIndex.for_file(tmp_path / "model.py")
    reader = ProjectIndex.for_file(tmp_path / "model.py", tmp_path)
    assert engine is not reader and engine.configured_root is None and reader.configured_root == tmp_path
    for index in (engine, reader):
        assert index.resolve(tmp_path / "model.py", "layers.helper") == (tmp_path / "layers.py", "helper")
    assert reader.syntax_tree(tmp_path / "layers.py") is engine.syntax_tree(tmp_path / "layers.py")
    assert parsed == ["layers.py"]

    ProjectIndex._shared.clear()
    fresh = ProjectIndex.for_file(tmp_path / "model.py", tmp_path)
    assert fresh.resolve(tmp_path / "model.py", "layers.helper") == (tmp_path / "layers.py", "helper")
    assert parsed == ["layers.py", "layers.py"]
