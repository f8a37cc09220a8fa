"""The static check's work around the engine, made cheaper without changing what it reports: config
modules read with `ast` (the libcst index's defaults, field by field), a fix's re-check without the
fixed text's links and once per text, and a start-up without the probe's and trace engine's modules."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import libcst
import pytest

from reslint.analysis import analyze_file
from reslint.settings import Settings
from reslint.static.index import UNKNOWN, FileIndex, config_index

REPO_ROOT = Path(__file__).resolve().parent.parent

CONFIG_MODULE = textwrap.dedent('''\
    """Every form FileIndex folds, and the ones it leaves unknown."""
    import os.path
    from dataclasses import dataclass
    from . import base as shared
    from .. import constants

    DEPTH = 6
    WIDTH: int = 2 * DEPTH
    A = B = -3
    if os.path.exists("x"):
        GUARDED = 7
    if True: ONE_LINE = 8
    try:
        TRIED = 2 ** 3
    except ImportError:
        EXCEPTED = 1


    @dataclass
    class ModelConfig(shared.Base):
        n_layer: int = DEPTH + 2
        plain = 4
        name: str = "gpt"
        glued: str = "pre" "fix"
        formatted: str = f"{DEPTH}"
        raw = b"bytes"
        huge = 2 ** 2 ** 2 ** 2 ** 2
        ratio = 1 / 0
        scale = -WIDTH * 0.5
        flag = None
        imaginary = 1j
        dots = ...
        tried = TRIED
        guarded = GUARDED
        one_line = ONE_LINE
        excepted = EXCEPTED
        a, b = A, B

        def __init__(self, hidden_size=768, *args, norm="post", pre=DEPTH == 6, later=DEPTH > 2, options=None, **kwargs):
            self.pre_ln = kwargs.get("pre_ln", False)
            self.position = kwargs.pop("position", "post") if kwargs.get("position") else "pre"


    class Packed: small = 1


    class OtherConfig(*[ModelConfig]):
        depth = 12
        same = "post" if self.config.get("norm", "post") == "post" else "pre"
        compared = DEPTH != 6
        undecided = "a" if DEPTH else "b"
        via_config = config.name
        got = cfg.get("absent", 5)
        missing = opts.get("plain")
        not_config = table.get("x", 1)

        async def run(self):
            pass


    class Runner(nn.Module):
        pass


    class AsyncRunner(OtherConfig):
        async def forward(self, x):
            return x
''')


def field_values(index: FileIndex, names) -> dict:
    return {name: index.config_field(name, 1) for name in names}


def names_of(index: FileIndex) -> set[str]:
    names = set(index.constants) | {"absent", "nonexistent"}
    for info in index.classes.values():
        names |= set(info.class_fields) | set(info.init_defaults)
    return names


def test_a_config_module_read_with_ast_gives_the_libcst_indexs_defaults() -> None:
    with_libcst = FileIndex(libcst.parse_module(CONFIG_MODULE))
    with_ast = config_index(CONFIG_MODULE.encode())
    names = names_of(with_libcst)
    assert names == names_of(with_ast)
    assert field_values(with_ast, names) == field_values(with_libcst, names)
    assert with_ast.aliases == with_libcst.aliases
    assert {name: info.bases for name, info in with_ast.classes.items()} == \
        {name: info.bases for name, info in with_libcst.classes.items()}
    assert [with_ast.is_module_class(info) for info in with_ast.classes.values()] == [False, False, False, True, True]
    unknown = ("glued", "formatted", "huge", "ratio", "imaginary", "dots", "one_line", "excepted", "small",
               "later", "undecided", "not_config", "absent", "args", "kwargs", "a")
    values = field_values(with_ast, names | set(unknown))  # `small`: a one-line class body, `a`: a tuple target
    # What each form gives (OtherConfig is a module: its fields are not config defaults)
    assert {name: values[name] for name in ("n_layer", "plain", "name", "raw", "scale", "flag", "hidden_size",
                                            "norm", "pre", "options", "tried", "guarded", "depth", "same",
                                            "compared", "via_config", "got", "missing")} == {
        "n_layer": 8, "plain": 4, "name": "gpt", "raw": b"bytes", "scale": -6.0, "flag": None, "hidden_size": 768,
        "norm": "post", "pre": True, "options": None, "tried": 8, "guarded": 7, "depth": 12,
        "same": "post", "compared": False, "via_config": "gpt", "got": 5, "missing": 4}
    assert [name for name in unknown if values[name] is not UNKNOWN] == []


def transformers_configs() -> list[Path]:
    try:
        import transformers
    except ImportError:
        return []
    return sorted(Path(transformers.__file__).parent.glob("models/*/configuration_*.py"))[::15]


@pytest.mark.parametrize("path", [*sorted(REPO_ROOT.glob("fixtures/project/**/config*.py")), *transformers_configs()],
                         ids=lambda path: path.name)
def test_real_config_modules_read_with_ast_give_the_libcst_indexs_defaults(path: Path) -> None:
    source = path.read_bytes()
    with_libcst = FileIndex(libcst.parse_module(source.decode()))
    with_ast = config_index(source)
    names = names_of(with_libcst)
    assert list(with_ast.classes) == list(with_libcst.classes)
    assert field_values(with_ast, names) == field_values(with_libcst, names)


def analysed_counting_parses(fixture: str, checked: str, tmp_path, monkeypatch):
    """A static analysis of `checked` in a copy of fixtures/project/`fixture`: (its result, its path, the texts
    libcst parsed meanwhile)."""
    project = tmp_path / fixture
    shutil.copytree(REPO_ROOT / "fixtures/project" / fixture, project)
    (project / "pyproject.toml").write_text("[tool.reslint]\n")
    parsed = []
    parse_module = libcst.parse_module
    monkeypatch.setattr(libcst, "parse_module", lambda text, *args: parsed.append(text) or parse_module(text, *args))
    path = project / checked
    return analyze_file(str(path), path.read_bytes(), Settings(static=True, root=str(project)), str(path)), path, parsed


def test_a_checked_files_config_module_is_read_without_libcst(tmp_path, monkeypatch) -> None:
    result, model, parsed = analysed_counting_parses("config_post", "model.py", tmp_path, monkeypatch)
    project = model.parent
    # The Post-LN default is read from config.py ...
    assert [(finding.code, finding.line, finding.symbol) for finding in result.findings] == [("RL101", 15, "Block")]
    assert result.reads == [str(project / "config.py")]
    # ... without parsing it with libcst
    assert parsed == [model.read_text()]


def module_class_files() -> list[Path]:
    try:
        import transformers
    except ImportError:
        return sorted(REPO_ROOT.glob("fixtures/**/*.py"))[::9]
    models = Path(transformers.__file__).parent / "models"
    return sorted(REPO_ROOT.glob("fixtures/**/*.py"))[::9] + sorted(models.glob("*/modular_*.py"))[::25]


@pytest.mark.parametrize("path", module_class_files(), ids=lambda path: path.name)
def test_module_classes_read_with_ast_are_the_libcst_indexs(path: Path) -> None:
    """ProjectIndex.is_module_class reads a caller's classes with `ast`: the same answer for every class."""
    source = path.read_bytes()
    try:
        with_libcst = FileIndex(libcst.parse_module(source.decode()))
    except (libcst.ParserSyntaxError, RecursionError, UnicodeDecodeError):
        return  # the project index reads such a file with libcst anyway, or not at all
    with_ast = config_index(source)
    if with_ast is None:
        return
    assert {name: with_ast.is_module_class(info) for name, info in with_ast.classes.items()} == \
        {name: with_libcst.is_module_class(info) for name, info in with_libcst.classes.items()}


def test_the_module_classes_calling_a_norm_function_are_read_without_libcst(tmp_path, monkeypatch) -> None:
    """fast_layer_norm is judged where it is written because layers.py's Block, a module, calls it: layers.py is
    read with `ast` for that (a large modular_* caller cost more than the checked file's own parse)."""
    result, functional, parsed = analysed_counting_parses("norm_function", "pkg/functional.py", tmp_path, monkeypatch)
    assert [(finding.code, finding.line, finding.symbol) for finding in result.findings] == \
        [("RL401", 8, "fast_layer_norm")]
    assert parsed == [functional.read_text()]


def test_a_config_module_cpython_rejects_is_still_read_by_libcst(tmp_path) -> None:
    # A form libcst accepts and CPython refuses: a `\\N{...}` escape of an unknown name.
    source = 'class TinyConfig:\n    n_layer = 3\n    label = "\\N{NOT A NAME}"\n'.encode()
    assert config_index(source) is None
    from reslint.project_index import ProjectIndex

    path = tmp_path / "configuration_tiny.py"
    path.write_bytes(source)
    index = ProjectIndex(tmp_path).config_index(path, FileIndex)
    assert type(index) is FileIndex and index.config_field("n_layer", 1) == 3


def test_a_fixs_recheck_reads_the_findings_once_per_text_without_the_files_links(tmp_path, monkeypatch) -> None:
    """bert_style's RL201 fix fails its re-check (the LayerNorm would make a residual Post-LN: a new RL101);
    the RL101 fix passes it, and the RL104 fix, the same text, is not re-checked twice. The re-checks
    analyse the fixed texts, but what those offer other files (file_links: training code, class uses) is
    never read, so it is not computed."""
    import reslint.analysis as analysis
    from reslint.api import check

    model = tmp_path / "model.py"
    model.write_text((REPO_ROOT / "examples" / "bert_style.py").read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text("[tool.reslint]\n")
    analysed, linked = [], []
    analyze_file, file_links = analysis.analyze_file, analysis.file_links
    monkeypatch.setattr(analysis, "analyze_file", lambda *args, **kwargs: analysed.append(args[1]) or
                        analyze_file(*args, **kwargs))
    monkeypatch.setattr(analysis, "file_links", lambda facts, text, *args: linked.append(text) or
                        file_links(facts, text, *args))
    report = check([str(model)], static=True, cache=False, jobs=1, fixes=True)
    offered = [(finding.code, finding.fix.applicability if finding.fix else None) for finding in report.findings]
    assert sorted(offered) == [("RL101", "unsafe"), ("RL104", "unsafe"), ("RL201", None)]
    assert len(analysed) == 3 and analysed[0] == model.read_bytes()  # the file, then each candidate fix's text
    assert linked == [model.read_text()]


def test_a_static_check_imports_neither_the_probe_nor_the_trace_engine(tmp_path) -> None:
    """`reslint check --static` as a user runs it (a real CLI process): what it imports before and while it
    checks a file, as `python -X importtime` lists it."""
    import subprocess
    import sys

    model = tmp_path / "model.py"
    model.write_text((REPO_ROOT / "examples" / "bert_style.py").read_text(encoding="utf-8"), encoding="utf-8")
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "reslint", "check", "--static", "--no-cache",
                          "--exit-zero", str(model)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and "RL201" in run.stdout
    imported = {line.split("|")[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}
    assert "libcst" in imported and "reslint.static.engine" in imported
    assert sorted(name for name in imported if name.split(".")[0] in ("torch", "numpy")
                  or name.startswith(("reslint.probing.", "reslint.trace."))) == \
        ["reslint.probing.devices", "reslint.probing.distributed"]  # the probe command's option choices
