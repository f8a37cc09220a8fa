"""The static engine's shortcuts change no finding: the same files analysed with each shortcut replaced
by the plain way it stands for (libcst's own visit for the fast walk) give the same findings,
positions, model summaries and cross-file links, over every fixture and example and a sample of
transformers' model files."""

from __future__ import annotations

from pathlib import Path

import pytest

import reslint.static.dataflow as dataflow
import reslint.static.engine as engine
import reslint.static.index as index
import reslint.static.stream_end as stream_end
from reslint.analysis import analyze_file
from reslint.settings import Settings
from reslint.static.positions import SourceMap

REPO_ROOT = Path(__file__).resolve().parent.parent


def sample() -> list[Path]:
    paths = sorted(path for path in REPO_ROOT.glob("fixtures/**/*.py") if "hostile" not in path.parts)
    paths += sorted(REPO_ROOT.glob("examples/**/*.py"))
    try:
        import transformers
    except ImportError:
        return paths
    models = sorted(Path(transformers.__file__).parent.glob("models/*/modeling_*.py"))
    return paths + models[::45]


def libcst_walk(root, *visitors) -> None:
    for visitor in visitors:
        root.visit(visitor)


def analysed(path: Path) -> tuple:
    result = analyze_file(str(path), path.read_bytes(), Settings(static=True), str(path))
    return ([(f.code, f.line, f.column, f.symbol, f.message) for f in result.findings],
            [model.to_dict() for model in result.models], result.links.to_dict() if result.links else None)


@pytest.fixture(scope="module")
def fast() -> dict[Path, tuple]:
    return {path: analysed(path) for path in sample()}


def test_the_fast_walk_gives_the_plain_engines_findings(fast, monkeypatch) -> None:
    for module in (stream_end, index, dataflow):
        monkeypatch.setattr(module, "walk", libcst_walk)
    findings = 0
    for path, expected in fast.items():
        assert analysed(path) == expected, path
        findings += len(expected[0])
    assert findings > 50


def test_placing_only_the_statements_asked_about_gives_the_whole_modules_findings(fast, monkeypatch) -> None:
    # The plain way: the whole module's code generated for the first place asked, every graph node placed when built.
    monkeypatch.setattr(engine, "SourceMap", lambda module, text=None, tree=None: SourceMap(module))
    monkeypatch.setattr(dataflow.Evaluator, "place", lambda self, node: self.position(node))
    findings = 0
    for path, expected in fast.items():
        assert analysed(path) == expected, path
        findings += len(expected[0])
    assert findings > 50
