"""The result cache: a warm run reports exactly what a cold or uncached run reports, and an edit
re-analyses exactly the files whose result it can change: for static results the file itself and
the settings that change findings; for traced results also the project modules the file imports."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_support import BATCHNORM, CLEAN, POST_LN, REPO_ROOT, run_reslint, write

from reslint import cli

TRACED_MODEL = '''\
import torch.nn as nn
from layers import Block


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(16) for _ in range(2)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x
'''

LAYERS = '''\
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.ff = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(x + self.ff(x))
'''


def copy_tree(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".reslint_cache", "__pycache__"))
    (target / "reslint.toml").write_text("")  # keep any pyproject.toml above tmp_path out of it
    return target


def json_run(cwd: Path, *args: str) -> str:
    result = run_reslint("check", "--output-format", "json", "--exit-zero", "--config", "reslint.toml", *args, cwd=cwd)
    assert result.returncode == 0, result.stderr
    return result.stdout


def entries(directory: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in sorted((directory / ".reslint_cache").glob("files/*/*.json"))}


def test_cached_and_uncached_static_runs_report_the_same_over_the_fixtures(tmp_path):
    project = copy_tree(REPO_ROOT / "fixtures", tmp_path / "fixtures")
    cold = json_run(project, "--static", "--jobs", "2")
    stored = entries(project)
    assert len(stored) == len(list(project.rglob("*.py")))
    warm = json_run(project, "--static", "--jobs", "2")
    uncached = json_run(project, "--static", "--no-cache", "--jobs", "1")
    assert warm == cold == uncached
    assert json.loads(cold)["findings"]
    assert entries(project) == stored  # the warm run wrote nothing


def test_cached_and_uncached_traced_runs_report_the_same(tmp_path):
    project = copy_tree(REPO_ROOT / "fixtures" / "trace", tmp_path / "trace")
    cold = json_run(project)
    assert {model["engine"] for model in json.loads(cold)["models"]} >= {"traced (export)"}
    stored = entries(project)
    assert len(stored) == len(list(project.rglob("*.py")))
    warm = json_run(project)  # the cold run above analysed every file: it is the uncached result
    assert warm == cold
    assert entries(project) == stored


def test_a_warm_static_run_offers_the_cached_fixes_without_parsing(tmp_path, monkeypatch, capsys):
    """The fixes a worker checked beside a file's analysis are cached with its result: a warm run neither analyses
    the fixable files nor parses them again to offer their fixes (it did, in the parent, for every such file:
    16 of the 19 CPU-s of a warm run over transformers' models). A fix of the project stage's findings (RL301's,
    checked against the whole project) is left out: the parent checks those in every run."""
    import libcst

    project = copy_tree(REPO_ROOT / "fixtures" / "fixes", tmp_path / "fixes")
    shutil.rmtree(project / "RL301")
    monkeypatch.chdir(project)
    real_parse = libcst.parse_module
    parses: list[int] = []
    monkeypatch.setattr(libcst, "parse_module", lambda *args, **kwargs: parses.append(1) or real_parse(*args, **kwargs))

    def run() -> tuple[dict, int]:
        parses.clear()
        capsys.readouterr()
        assert cli.run(["check", "--static", "--jobs", "1", "--exit-zero", "--output-format", "json",
                        "--config", "reslint.toml", "."]) == 0
        return json.loads(capsys.readouterr().out), len(parses)

    cold, cold_parses = run()
    warm, warm_parses = run()
    assert sum(1 for finding in cold["findings"] if finding["fix"]) >= 5 and cold_parses > 0
    assert warm == cold and warm_parses == 0


@pytest.fixture
def analysed(monkeypatch):
    """The display paths the engines analysed in each in-process run (cache misses), one set per run."""
    import reslint.analysis

    real = reslint.analysis.analyze_file
    runs: list[set[str]] = []

    def spy(path, data, settings, source_path=None, **options):
        runs[-1].add(path)
        return real(path, data, settings, source_path, **options)

    monkeypatch.setattr(reslint.analysis, "analyze_file", spy)

    def run(*args: str) -> set[str]:
        runs.append(set())
        assert cli.run(["check", "--jobs", "1", "--exit-zero", "--show-models", "--config", "reslint.toml", *args]) == 0
        return runs[-1]

    return run


def test_static_results_follow_the_file_and_the_settings_that_change_findings(tmp_path, monkeypatch, analysed):
    write(tmp_path, {
        "reslint.toml": "",
        "post.py": POST_LN,
        "bn.py": "import helpers\n" + BATCHNORM,
        "helpers.py": "import torch\nWIDTH = 16\n",
    })
    monkeypatch.chdir(tmp_path)
    everything = {"post.py", "bn.py", "helpers.py"}
    assert analysed("--static") == everything
    assert analysed("--static") == set()

    (tmp_path / "post.py").write_text(POST_LN + "\n# edited\n")
    assert analysed("--static") == {"post.py"}
    (tmp_path / "helpers.py").write_text("import torch\nWIDTH = 32\n")  # imported by bn.py
    assert analysed("--static") == {"helpers.py"}

    # Settings applied after analysis do not invalidate; those that change findings do.
    (tmp_path / "reslint.toml").write_text('fail-on = "error"\nexclude = ["nothing"]\n'
                                           '[per-file-ignores]\n"bn.py" = ["RL201"]\n')
    assert analysed("--static") == set()
    (tmp_path / "reslint.toml").write_text('norm-placement = "pre"\n')
    assert analysed("--static") == everything
    assert analysed("--static", "--select", "RL1") == everything
    assert analysed("--static", "--select", "RL1") == set()
    assert analysed("--static", "--ignore", "RL101") == everything


def test_traced_results_also_follow_the_project_modules_the_file_imports(tmp_path, monkeypatch, analysed, capsys):
    write(tmp_path, {
        "reslint.toml": "",
        "net.py": TRACED_MODEL,
        "layers.py": LAYERS,
        "standalone.py": POST_LN,
        "notes.py": "VALUE = 1\n",
    })
    monkeypatch.chdir(tmp_path)
    everything = {"net.py", "layers.py", "standalone.py", "notes.py"}
    assert analysed() == everything
    cold = capsys.readouterr().out
    assert "[traced" in cold
    assert analysed() == set()
    assert capsys.readouterr().out == cold

    # An imported project module changes a traced result (net.py builds layers.Block)...
    (tmp_path / "layers.py").write_text(LAYERS.replace("Block(nn.Module):", "Block(nn.Module):  # edited"))
    assert analysed() == {"layers.py", "net.py"}
    # ...but a file the trace engine never imported depends on its own bytes only.
    (tmp_path / "notes.py").write_text("VALUE = 2\n")
    assert analysed() == {"notes.py"}
    # A new file that the import now resolves to is a change too: `layers` is a package from now on.
    (tmp_path / "layers.py").rename(tmp_path / "old_layers.py")
    write(tmp_path, {"layers/__init__.py": LAYERS})
    assert analysed() == {"net.py", "layers/__init__.py", "old_layers.py"}
    # The static check of the same files keeps its own entries; an import invalidates one only where the static
    # facts read it: net.py stacks layers.Block, placed as its forward in that file runs.
    assert analysed("--static") == {"net.py", "layers/__init__.py", "old_layers.py", "standalone.py", "notes.py"}
    (tmp_path / "layers" / "__init__.py").write_text(LAYERS + "\n# edited again\n")
    assert analysed("--static") == {"layers/__init__.py", "net.py"}
    (tmp_path / "notes.py").write_text("VALUE = 3\n")
    assert analysed("--static") == {"notes.py"}


def test_skipped_files_are_cached_and_still_counted(tmp_path, monkeypatch, analysed, capsys):
    write(tmp_path, {"reslint.toml": "", "notes.py": CLEAN, "post.py": POST_LN})
    monkeypatch.chdir(tmp_path)
    assert analysed("--static") == {"notes.py", "post.py"}
    cold = capsys.readouterr().out
    assert analysed("--static") == set()
    assert capsys.readouterr().out == cold
    assert "2 files (1 skipped: no model or training code)" in cold


# reslint clean

def test_clean_removes_the_project_cache_and_those_below(tmp_path):
    write(tmp_path, {"pyproject.toml": "[tool.reslint]\n", "src/model.py": POST_LN, "tools/other/x.py": POST_LN})
    run_reslint("check", "--static", "--exit-zero", ".", cwd=tmp_path / "src")  # root: the config's directory
    isolated = tmp_path / "tools" / "other"
    (isolated / "reslint.toml").write_text("")
    run_reslint("check", "--static", "--exit-zero", "--config", "reslint.toml", ".", cwd=isolated)
    assert (tmp_path / ".reslint_cache").is_dir() and (isolated / ".reslint_cache").is_dir()
    assert not (tmp_path / "src" / ".reslint_cache").exists()

    result = run_reslint("clean", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines() == ["Removed .reslint_cache", "Removed tools/other/.reslint_cache"]
    assert not (tmp_path / ".reslint_cache").exists() and not (isolated / ".reslint_cache").exists()
    assert (tmp_path / "src" / "model.py").is_file()

    again = run_reslint("clean", cwd=tmp_path)
    assert (again.returncode, again.stdout) == (0, "No .reslint_cache/ to remove\n")


def test_clean_from_a_subdirectory_removes_the_project_roots_cache(tmp_path):
    write(tmp_path, {"pyproject.toml": "[tool.reslint]\n", "src/model.py": POST_LN})
    run_reslint("check", "--static", "--exit-zero", cwd=tmp_path)
    result = run_reslint("clean", cwd=tmp_path / "src")
    assert result.returncode == 0
    assert not (tmp_path / ".reslint_cache").exists()
