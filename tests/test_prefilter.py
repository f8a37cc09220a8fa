"""The text pre-filter: files with no model or training code are skipped, counted, and never parsed
with libcst; every file a rule could report on is analysed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from cli_support import BATCHNORM, POST_LN, SYNTAX_ERROR, run_reslint, write

from reslint.prefilter import may_hold_model_or_training_code

NOT_MODEL_CODE = {
    "constants": "VALUE = 1\n",
    "a configuration": textwrap.dedent('''\
        """Configuration of the [`LlamaModel`]: the model's width and depth."""
        from ...configuration_utils import PretrainedConfig


        class LlamaConfig(PretrainedConfig):
            model_type = "llama"

            def __init__(self, hidden_size=4096, **kwargs):
                self.hidden_size = hidden_size
        '''),
    "a lazy package init": "from ...utils import _LazyModule\nimport sys\nsys.modules[__name__] = _LazyModule(__name__)\n",
    "a tokenizer": "import regex\n\nclass Tokenizer:\n    def encode(self, text):\n        return text.split()\n",
}

MODEL_OR_TRAINING_CODE = {
    "an nn.Module subclass": POST_LN,
    "a module base through an alias": "from torch.nn import Module as Base\n\nclass A(Base):\n    pass\n",
    "a local base with forward": "class Base:\n    def forward(self, x):\n        return x\n",
    "a Hugging Face model": "from .modeling_utils import PreTrainedModel\n\nclass M(PreTrainedModel):\n    pass\n",
    "a torch import": "import torch\n",
    "an optimizer": "from apex.optimizers import FusedAdam\nopt = FusedAdam(params)\n",
    "a scheduler": "from transformers import get_linear_schedule_with_warmup\n",
    "a Trainer": "from transformers import Trainer, TrainingArguments\nTrainer(model, TrainingArguments('out'))\n",
    "deepspeed": "import deepspeed\nengine, *_ = deepspeed.initialize(model=model, config=cfg)\n",
    "lightning": "import lightning as L\ntrainer = L.Trainer(max_epochs=1)\n",
    "accelerate": "from accelerate import Accelerator\n",
}


@pytest.mark.parametrize("name", sorted(NOT_MODEL_CODE))
def test_files_without_model_or_training_code_may_be_skipped(name):
    assert not may_hold_model_or_training_code(NOT_MODEL_CODE[name])


@pytest.mark.parametrize("name", sorted(MODEL_OR_TRAINING_CODE))
def test_files_with_model_or_training_code_are_kept(name):
    assert may_hold_model_or_training_code(MODEL_OR_TRAINING_CODE[name])


def summary(cwd, *args):
    result = run_reslint("check", "--static", "--no-cache", "--output-format", "json", "--exit-zero", *args, cwd=cwd)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_a_non_model_file_is_skipped_and_counted_a_model_and_a_training_file_are_not(tmp_path):
    write(tmp_path, {
        "config.py": NOT_MODEL_CODE["a configuration"],
        "model.py": BATCHNORM,
        "train.py": MODEL_OR_TRAINING_CODE["a Trainer"],
    })
    document = summary(tmp_path)
    assert (document["summary"]["files"], document["summary"]["files_skipped"]) == (3, 1)
    assert [(f["path"], f["code"]) for f in document["findings"]] == [("model.py", "RL201")]

    text = run_reslint("check", "--static", "--no-cache", "--exit-zero", "config.py", "train.py", cwd=tmp_path)
    assert text.stdout == "All checks passed! (2 files, 1 skipped: no model or training code)\n"


def test_a_file_that_does_not_parse_is_never_skipped(tmp_path):
    write(tmp_path, {"broken.py": SYNTAX_ERROR, "notes.py": "x = (1,\n"})
    document = summary(tmp_path)
    assert document["summary"]["files_skipped"] == 0
    assert sorted((f["path"], f["code"]) for f in document["findings"]) == [
        ("broken.py", "RL901"), ("notes.py", "RL901")]


def test_files_named_as_training_scripts_are_never_skipped(tmp_path):
    write(tmp_path, {"pyproject.toml": "[tool.reslint]\ntrain = ['scripts/*.py']\n", "scripts/run.py": "main()\n",
                     "other.py": "main()\n"})
    document = summary(tmp_path)
    assert (document["summary"]["files"], document["summary"]["files_skipped"]) == (2, 1)


def test_a_skipped_file_costs_no_libcst_import(tmp_path):
    write(tmp_path, {"notes.py": "VALUE = 1\n", "model.py": POST_LN})
    probe = ("import sys\nfrom reslint import cli\nstatus = cli.run(sys.argv[1:])\n"
             "print('libcst' in sys.modules, status)\n")
    for target, imported in (("notes.py", False), ("model.py", True)):
        result = subprocess.run([sys.executable, "-c", probe, "check", "--static", "--no-cache", "--exit-zero", target],
                                cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert result.stdout.splitlines()[-1] == f"{imported} 0", result.stderr


def test_the_full_check_imports_no_file_without_model_classes(tmp_path):
    """The static facts decide: a file the trace engine's text hint would accept (a `def forward(`)
    but without an nn.Module class is never imported; a file with one is, and a --model spec
    naming a file imports it whatever its classes."""
    pytest.importorskip("torch")
    from reslint.analysis import analyze_file
    from reslint.settings import ModelFactory, Settings

    marker = tmp_path / "imported"
    script = tmp_path / "functional.py"
    script.write_text(f"import torch\nopen({str(marker)!r}, 'w').close()\n\n\ndef forward(x):\n    return x + 1\n")
    result = analyze_file(str(script), script.read_bytes(), Settings(root=str(tmp_path)))
    assert (result.skipped, result.imported, marker.exists()) == (False, False, False)

    model = tmp_path / "model.py"
    model.write_text(f"open({str(marker)!r}, 'w').close()\n" + POST_LN)
    result = analyze_file(str(model), model.read_bytes(), Settings(root=str(tmp_path)))
    assert (result.imported, marker.exists()) == (True, True)

    marker.unlink()
    named = Settings(root=str(tmp_path), models=(ModelFactory(f"{script}:torch.nn.Identity()"),))
    result = analyze_file(str(script), script.read_bytes(), named)
    assert (result.imported, marker.exists()) == (True, True)
