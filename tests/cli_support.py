"""Sample sources and helpers shared by the CLI-level tests."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
RESLINT = Path(sys.executable).with_name("reslint")

# One finding of each severity: RL101 (info) and RL201 (warning) from the static engine,
# RL901 (error) from the parser.
POST_LN = '''\
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ff = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(x + self.ff(x))
'''
POST_LN_LINE = 11

BATCHNORM = '''\
import torch.nn as nn


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(100, 16)
        self.norm = nn.BatchNorm1d(16)

    def forward(self, tokens):
        return self.norm(self.embed(tokens).transpose(1, 2))
'''
BATCHNORM_LINE = 8

SYNTAX_ERROR = "def broken(:\n    pass\n"
CLEAN = "VALUE = 1\n"


def repository_sources(*transformers_patterns: tuple[str, int]) -> list[Path]:
    """The fixtures (not the hostile ones) and examples, then every k-th transformers file of `models/*/` matching
    each (pattern, k) when transformers is installed."""
    root = Path(__file__).resolve().parent.parent
    paths = sorted(path for path in root.glob("fixtures/**/*.py") if "hostile" not in path.parts)
    paths += sorted(root.glob("examples/**/*.py"))
    try:
        import transformers
    except ImportError:
        return paths
    models = Path(transformers.__file__).parent / "models"
    return paths + [path for pattern, step in transformers_patterns for path in sorted(models.glob(f"*/{pattern}"))[::step]]


def write(directory: Path, files: dict[str, str | bytes]) -> Path:
    for name, content in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return directory


def run_reslint(*args: str, cwd: Path, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """The installed console script, as a user or pre-commit runs it. `timeout` only stops a hung run."""
    environment = {**os.environ, "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [str(RESLINT), *args], cwd=cwd, env=environment, capture_output=True, text=True, timeout=timeout,
    )


def run_module(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    environment = {**os.environ, "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "reslint", *args], cwd=cwd, env=environment, capture_output=True, text=True, timeout=120,
    )


def codes(json_text: str) -> list[tuple[str, str, int]]:
    return [(finding["path"], finding["code"], finding["line"]) for finding in json.loads(json_text)["findings"]]


def import_file(path: Path, module_name: str):
    """Import a fixture or example file as the module `module_name`, once per name, registered as an import
    would be (inspect finds class sources through `sys.modules`)."""
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    return sys.modules[module_name]


def json_check(path: str) -> dict:
    """`reslint check` (full) of one repository file as JSON; the check must pass (exit 0)."""
    done = subprocess.run([str(RESLINT), "check", "--no-cache", "--jobs", "1", "--output-format", "json", path],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def input_shapes(inputs) -> dict:
    """An inferred input set as {position or keyword: (shape, dtype)}."""
    values = {**dict(enumerate(inputs.args)), **inputs.kwargs}
    return {key: (tuple(value.shape), str(value.dtype).removeprefix("torch.")) for key, value in values.items()}
