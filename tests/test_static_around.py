"""The static check's work around the engine, made cheaper without changing what it reports (wave 8): the fixers'
positions worked out for the top-level statements they ask about, the project files' imports and calls found without ast.walk's
generators, the checked file's CPython AST lent to the construction-site search, a skipped file parsed once."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import libcst as cst
import pytest

from cli_support import write
from reslint.analysis import analyze_file
from reslint.findings import Finding
from reslint.fixes import fixer
from reslint.fixes.source import Source
from reslint.settings import Settings

REPO_ROOT = Path(__file__).resolve().parent.parent
MODELS = Path(importlib.util.find_spec("transformers").origin).parent / "models"
KINDS = (cst.Call, cst.For, cst.Name, cst.FunctionDef, cst.BinaryOperation, cst.Assign, cst.If, cst.ClassDef)
FIXTURE_FILES = sorted(path for folder in ("fixtures", "examples") for path in (REPO_ROOT / folder).rglob("*.py"))
TRANSFORMERS_FILES = sorted(MODELS.rglob("modeling_*.py"))[::90]


def readable(path: Path) -> tuple[str, cst.Module] | None:
    try:
        text = path.read_text(encoding="utf-8")
        return text, cst.parse_module(text)
    except (UnicodeDecodeError, cst.ParserSyntaxError, RecursionError):
        return None


def whole(text: str, module: cst.Module) -> Source:
    """A Source answering from the whole module's places (what every Source did before)."""
    source = Source(text, module)
    source.positions, source.whole_parents  # noqa: B018 - computed: the whole module's answer from now on
    return source


def test_the_fixers_places_statement_by_statement_are_the_whole_modules() -> None:
    """Every lookup a fixer makes, on every fixture and example and a transformers sample: start, end, the nodes
    at a finding's place and around its line, the nodes within a class or method, parents, source order, the
    text of a top-level statement."""
    compared = files = 0
    for path in FIXTURE_FILES[::2] + TRANSFORMERS_FILES:
        parsed = readable(path)
        if parsed is None:
            continue
        text, module = parsed
        reference, scoped = whole(text, module), Source(text, module)
        if scoped.statements is None:  # an empty file or one without a final newline: the whole module's places
            assert not module.has_trailing_newline
            continue
        files += 1
        for kind in KINDS:
            nodes = list(reference.nodes(kind))
            for node in nodes[::max(1, len(nodes) // 10)]:
                line, column = reference.start(node)
                place = Finding("RL101", "", str(path), line, column + 1)
                assert (scoped.start(node), scoped.end(node)) == (reference.start(node), reference.end(node))
                assert scoped.at(place, kind) == reference.at(place, kind)
                if kind in (cst.For, cst.FunctionDef):  # what the fixers look for around a line
                    assert [other for other in scoped.around(line, kind) if line in scoped.lines(other)] == \
                        [other for other in reference.nodes(kind) if line in reference.lines(other)]
                assert scoped.parents.get(node) is reference.parents.get(node)
                compared += 1
            assert list(Source(text, module).in_order(kind)) == sorted(nodes, key=reference.start)
        for statement in [node for node in module.body if isinstance(node, (cst.ClassDef, cst.FunctionDef))][:12]:
            fresh = Source(text, module)
            method = next((node for node in statement.body.body if isinstance(node, cst.FunctionDef)), None)
            for outer in (statement, method) if method is not None else (statement,):
                for kind in KINDS:
                    assert fresh.within(outer, kind) == reference.within(outer, kind)
            assert fresh.replaced_statements({statement: statement}) == text
            assert "positions" not in fresh.__dict__  # all of it from the statements asked about
    assert files > 100 and compared > 3_000


def test_a_fix_places_only_the_statements_it_reads(tmp_path) -> None:
    """The RL101 and RL103 fixes of the fixes fixtures give the same text as with the whole module's places, from
    the statements of the classes they rewrite: the whole module's places are never worked out."""
    for code in ("RL101", "RL103", "RL501"):
        path = REPO_ROOT / "fixtures" / "fixes" / code / "before.py"
        text = path.read_text(encoding="utf-8")
        module = cst.parse_module(text)
        findings = [finding for finding in analyze_file(str(path), path.read_bytes(), Settings(static=True)).findings
                    if finding.code == code]
        assert findings
        for finding in findings:
            scoped = Source(text, module)
            fixed = fixer(code).fix(scoped, finding)
            assert fixed is not None and fixed == fixer(code).fix(whole(text, module), finding)
            assert "positions" not in scoped.__dict__ and "whole_parents" not in scoped.__dict__
            placed = scoped.statements._placed
            assert 0 < len(placed) < len(module.body)


def test_a_file_without_a_final_newline_is_placed_as_a_whole() -> None:
    text = (REPO_ROOT / "fixtures" / "fixes" / "RL103" / "before.py").read_text(encoding="utf-8").rstrip("\n")
    module = cst.parse_module(text)
    scoped = Source(text, module)
    assert scoped.statements is None
    cls = next(node for node in module.body if isinstance(node, cst.ClassDef))
    assert scoped.lines(cls) == whole(text, module).lines(cls)


def test_a_statement_whose_code_is_not_where_the_ast_puts_it_falls_back_to_the_whole_module() -> None:
    """A module that is not the text's (a statement moved): nothing is placed where its code is not."""
    text = "import torch\n\n\nclass A:\n    x = 1\n"
    other = cst.parse_module("import torch\nclass A:\n    x = 2\n")
    scoped = Source(text, other)
    cls = other.body[1]
    assert scoped.statements.placed(cls) is None and scoped.statements is None  # from now on: the whole module's
    assert scoped.start(cls) == (2, 0)  # the module's own code, as CodeRanges places it


def reference_imports(tree: ast.Module) -> list[tuple]:
    """project_index.read_imports as it was: ast.walk over the whole tree."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, 0, (), (alias.asname or alias.name.split(".")[0],)) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            aliases = [alias for alias in node.names if alias.name != "*"]
            found.append((node.module or "", node.level or 0, tuple(alias.name for alias in aliases),
                          tuple(alias.asname or alias.name for alias in aliases)))
    return found


def reference_calls(tree: ast.Module) -> list[tuple]:
    """project_index.named_calls as it was: ast.walk per top-level statement."""
    found = []
    for statement in tree.body:
        scope = statement.name if isinstance(statement, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) else ""
        for node in ast.walk(statement):
            if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
                found.append((id(node.func), node.lineno, scope, isinstance(statement, ast.ClassDef)))
    return found


def test_a_project_files_imports_and_calls_without_ast_walk_are_ast_walks() -> None:
    """In ast.walk's order: the first import binding a name is the one a re-export is followed through, and the
    construction sites of a class come in the order of its calls."""
    from reslint.project_index import code_nodes, named_calls, read_imports

    checked = 0
    for path in FIXTURE_FILES + sorted(MODELS.rglob("*.py"))[::40]:
        try:
            tree = ast.parse(path.read_bytes())
        except (SyntaxError, ValueError):
            continue
        imports, calls = read_imports(tree), named_calls(tree)
        assert [(s.module, s.level, s.names, s.local_names) for s in imports] == reference_imports(tree)
        assert [(id(func), *rest) for func, *rest in calls] == reference_calls(tree)
        leaves = (ast.expr_context, ast.operator, ast.boolop, ast.unaryop, ast.cmpop)
        assert list(map(id, code_nodes(tree))) == [id(node) for node in ast.walk(tree) if not isinstance(node, leaves)]
        checked += bool(imports) and bool(calls)
    assert checked > 100


def test_the_checked_files_own_tree_is_lent_to_the_construction_site_search(monkeypatch) -> None:
    """forecaster.py's RL103 asks where the file builds its own stack: read from the tree the analysis parsed."""
    import reslint.project_index as project_index

    parsed = []
    parse_quietly = project_index.parse_quietly
    monkeypatch.setattr(project_index, "parse_quietly", lambda source, path: parsed.append(Path(path)) or
                        parse_quietly(source, path))
    asked = []
    syntax_tree = project_index.ProjectIndex.syntax_tree
    monkeypatch.setattr(project_index.ProjectIndex, "syntax_tree", lambda self, path: asked.append(Path(path)) or
                        syntax_tree(self, path))
    path = REPO_ROOT / "fixtures" / "final_norm" / "forecaster.py"
    project_index.ProjectIndex.new_run()
    for index in project_index.ProjectIndex._shared.values():  # trees an earlier test left
        index._trees.clear()
    result = analyze_file(str(path), path.read_bytes(), Settings(static=True))
    assert [(finding.code, finding.line, finding.symbol) for finding in result.findings] == \
        [("RL103", 32, "PatchDecoder.layers")]
    assert path in asked and path not in parsed
    tree = project_index.ProjectIndex.for_file(path).syntax_tree(path)  # kept, as a tree parsed there would be
    assert isinstance(tree, ast.Module) and path not in parsed


def test_a_lent_tree_answers_only_for_the_content_it_was_parsed_from(tmp_path) -> None:
    from reslint.project_index import ProjectIndex

    path = tmp_path / "model.py"
    path.write_text("x = 1\n")
    lent = ast.parse("x = 1\n")
    index = ProjectIndex(tmp_path)
    with index.lent_tree(path, b"x = 2\n", lent):  # another text than the file's: not its tree
        assert index.syntax_tree(path) is not lent
    index = ProjectIndex(tmp_path)
    with index.lent_tree(path, b"x = 1\n", lent):
        assert index.syntax_tree(path) is lent
    index = ProjectIndex(tmp_path)
    with index.lent_tree(path, b"x = 1\n", lent):
        pass
    assert index.syntax_tree(path) is not lent  # lent only while the analysis runs


def test_a_skipped_file_is_parsed_once_for_its_reexports(monkeypatch) -> None:
    parses = []
    parse = ast.parse
    monkeypatch.setattr(ast, "parse", lambda *args, **kwargs: parses.append(1) or parse(*args, **kwargs))
    text = b'"""A package."""\nfrom .model import GPT, helper\nfrom .configuration import GPTConfig as Config\n'
    result = analyze_file("pkg/__init__.py", text, Settings(static=True))
    assert result.skipped and result.findings == []
    assert result.links.imports == {"GPT": ".model.GPT", "Config": ".configuration.GPTConfig"}
    assert len(parses) == 1


@pytest.mark.parametrize("path", FIXTURE_FILES[::7], ids=lambda path: path.name)
def test_the_training_readers_child_nodes_are_ast_iter_child_nodes(path: Path) -> None:
    from reslint.static.training import child_nodes

    try:
        tree = ast.parse(path.read_bytes())
    except (SyntaxError, ValueError):
        return
    for node in ast.walk(tree):
        assert child_nodes(node) == list(ast.iter_child_nodes(node))


def test_a_source_is_freed_as_soon_as_it_is_dropped() -> None:
    """The fix checks run with the collector paused: a Source in a reference cycle would keep its module (the
    largest thing a file's check holds) alive until the next collection: peak RSS over the goal."""
    import gc
    import weakref

    path = REPO_ROOT / "fixtures" / "fixes" / "RL101" / "before.py"
    finding = next(finding for finding in analyze_file(str(path), path.read_bytes(), Settings(static=True)).findings
                   if finding.code == "RL101")
    enabled = gc.isenabled()
    gc.disable()
    try:
        source = Source(path.read_text(encoding="utf-8"))
        assert fixer("RL101").fix(source, finding) is not None and source.parents.get(source.module.body[-1]) is not None
        freed = weakref.ref(source)
        del source
        assert freed() is None
    finally:
        if enabled:
            gc.enable()


# Wave 9: a static check's files are each checked with the collector paused; after each, what survives is
# frozen (runner.settle_collector), in reslint's own processes only. Wave 17: without a young collection first.
LEAK_CHECK = """
import gc, sys
import reslint.runner

thaw, settle = reslint.runner.thaw_collector, reslint.runner.settle_collector
young_collections = settled = 0

def frozen_cycles():  # what the console script froze, looked at just before it thaws it for Python's exit
    frozen = gc.get_freeze_count()
    gc.collect()  # what the check left unreachable and did not freeze
    gc.unfreeze()
    gc.set_debug(gc.DEBUG_SAVEALL)
    print("files", settled, "young collections", young_collections)
    print("frozen", frozen, "cycles", gc.collect(), sorted({type(thing).__name__ for thing in gc.garbage})[:8])
    gc.set_debug(0)
    thaw()

def counted_settle():
    global settled
    settled += 1
    settle()

def count_young(phase, info):
    global young_collections
    young_collections += phase == "start" and info["generation"] == 0

reslint.runner.thaw_collector, reslint.runner.settle_collector = frozen_cycles, counted_settle
gc.collect()
gc.callbacks.append(count_young)
sys.argv = ["reslint", "check", "--static", "--no-cache", "--jobs", "1", "--exit-zero", *sys.argv[1:]]
from reslint.cli import main
main()
"""


def test_the_console_scripts_static_check_freezes_no_cycle(tmp_path) -> None:
    """The console script freezes what survives each file; a cycle frozen then dropped would stay for the
    run (the last file's class references, kept until the next file, were such cycles)."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", LEAK_CHECK, "fixtures/", "examples/"], cwd=REPO_ROOT,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    line = run.stdout.strip().splitlines()[-1].split()
    assert line[0] == "frozen" and int(line[1]) > 0  # the console script settled the collector
    assert line[2:4] == ["cycles", "0"], run.stdout.splitlines()[-1]
    # No young collection per file: only the collector's own, when the work between two files allocates enough.
    files, young = (int(word) for word in run.stdout.strip().splitlines()[-2].split()[1::3])
    assert files > 100 and young < files / 2, run.stdout.splitlines()[-2]


def test_a_library_callers_objects_are_never_frozen() -> None:
    """`reslint.check` in a caller's process pauses the collector per file but freezes nothing: the caller's
    garbage of the moment would otherwise stay for good."""
    import gc

    import reslint

    before = gc.get_freeze_count()
    report = reslint.check([str(REPO_ROOT / "fixtures" / "fixes")], static=True, cache=False, jobs=1)
    assert report.findings  # the files were analysed
    assert gc.get_freeze_count() == before


# ----- wave 10: less work around the engine -----

BLOCK_READING_ARGS = """\
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.pre_norm = args.pre_norm
        self.norm = nn.LayerNorm(16)
        self.ff = nn.Linear(16, 16)

    def forward(self, x):
        if self.pre_norm:
            return x + self.ff(self.norm(x))
        return self.norm(x + self.ff(x))
"""
SCRIPT_WITH_ARGUMENTS = """\
import argparse

from model import Block

parser = argparse.ArgumentParser()
parser.add_argument("--pre-norm", action="store_true")
block = Block(parser.parse_args())
"""
BUILDER_WITHOUT_ARGUMENTS = """\
from model import Block


def build(args):
    return Block(args)
"""


def test_a_builder_without_command_line_arguments_is_not_searched(tmp_path, monkeypatch) -> None:
    """A model's builders are read for their command-line defaults only: a file that builds the model but never
    spells `add_argument` is not parsed for its sites, and the default still comes from the script that has them."""
    import reslint.project_index as project_index
    from reslint.static.index import FileIndex

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "model.py").write_text(BLOCK_READING_ARGS)
    (tmp_path / "train.py").write_text(SCRIPT_WITH_ARGUMENTS)
    (tmp_path / "build.py").write_text(BUILDER_WITHOUT_ARGUMENTS)
    parsed = []
    parse_quietly = project_index.parse_quietly
    monkeypatch.setattr(project_index, "parse_quietly", lambda source, path: parsed.append(Path(path).name) or
                        parse_quietly(source, path))
    project_index.ProjectIndex._shared.clear()
    path = tmp_path / "model.py"
    result = analyze_file(str(path), path.read_bytes(), Settings(static=True), str(path))
    assert [(finding.code, finding.line) for finding in result.findings] == [("RL101", 14)]
    assert result.reads == [str(tmp_path / "train.py")]
    project_index.ProjectIndex._shared.clear()
    parsed.clear()
    index = project_index.ProjectIndex.for_file(path)
    builders = index.builder_indexes(path, FileIndex(cst.parse_module(BLOCK_READING_ARGS)))
    assert [(path.name, list(builder.argument_defaults())) for path, builder in builders] == [("train.py", ["pre_norm"])]
    assert "train.py" in parsed and "build.py" not in parsed  # model.py: read to resolve train.py's import
    assert [site.path.name for site in index.construction_sites(path, "Block")] == ["build.py", "train.py"]


def test_the_search_for_a_models_builders_reads_import_words_only_of_files_declaring_arguments(tmp_path, monkeypatch):
    """Only a file that spells `add_argument` can give a model command-line defaults: the search for its builders
    reads each project file for that word and the import words of those files alone (a check of one transformers
    model file had extracted the import words of all 2,951 files of the package). A search for every construction
    site still reads them all."""
    import reslint.project_index as project_index
    from reslint.static.index import FileIndex

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "model.py").write_text(BLOCK_READING_ARGS)
    (tmp_path / "train.py").write_text(SCRIPT_WITH_ARGUMENTS)
    (tmp_path / "build.py").write_text(BUILDER_WITHOUT_ARGUMENTS)
    (tmp_path / "helpers.py").write_text("import math\n")
    asked = []
    imported_words = project_index.ProjectIndex.imported_words
    monkeypatch.setattr(project_index.ProjectIndex, "imported_words",
                        lambda self, file: asked.append(file.name) or imported_words(self, file))
    project_index.ProjectIndex._shared.clear()
    project_index.ProjectIndex.new_run()
    path = tmp_path / "model.py"
    index = project_index.ProjectIndex.for_file(path)
    builders = index.builder_indexes(path, FileIndex(cst.parse_module(BLOCK_READING_ARGS)))
    assert [builder_path.name for builder_path, _ in builders] == ["train.py"]
    assert set(asked) == {"train.py"}
    assert [site.path.name for site in index.construction_sites(path, "Block")] == ["build.py", "train.py"]
    assert set(asked) == {"build.py", "helpers.py", "model.py", "train.py"}


def test_a_resolved_import_is_looked_up_once_per_project_run(tmp_path, monkeypatch) -> None:
    from reslint.project import Project
    from reslint.project_index import ProjectIndex

    (tmp_path / "pyproject.toml").write_text("")
    monkeypatch.chdir(tmp_path)  # display paths are relative to the working directory
    (tmp_path / "model.py").write_text(BLOCK_READING_ARGS)
    (tmp_path / "train.py").write_text(SCRIPT_WITH_ARGUMENTS)
    looked_up = []
    module_file = ProjectIndex.module_file
    monkeypatch.setattr(ProjectIndex, "module_file", lambda self, *args: looked_up.append(args[1:]) or
                        module_file(self, *args))
    project = Project(Settings(static=True, root=str(tmp_path)))
    project.register(str(tmp_path / "train.py"), "train.py")
    assert project.resolve("train.py", "model.Block") == ("model.py", "Block")
    assert project.resolve("train.py", "model.Block") == ("model.py", "Block")
    assert project.resolve("train.py", ".model.Block") == ("model.py", "Block")
    assert looked_up == [("model", 0), ("model", 1)]


CONFIG_MODULE = """\
{cookie}class BlockConfig:
    name = "bloc"

    def __init__(self, pre_norm=False, width=16):
        self.pre_norm = pre_norm
        self.width = width
"""
MODEL_IMPORTING_ITS_CONFIG = """\
import torch.nn as nn

from .configuration_block import BlockConfig


class Block(nn.Module):
    def __init__(self, config: BlockConfig):
        super().__init__()
        self.pre_norm = config.pre_norm
        self.norm = nn.LayerNorm(config.width)
        self.ff = nn.Linear(config.width, config.width)

    def forward(self, x):
        if self.pre_norm:
            return x + self.ff(self.norm(x))
        return self.norm(x + self.ff(x))
"""


@pytest.mark.parametrize("cookie, parses", [("", 1), ("# -*- coding: utf-8 -*-\n", 1), ("# coding: latin-1\n", 2)])
def test_an_imported_config_module_is_parsed_once(tmp_path, monkeypatch, cookie, parses) -> None:
    """The config module's import is resolved from its CPython AST, and its defaults are read from the same tree
    (parsed twice before); a module declaring another encoding than UTF-8 is read from its UTF-8 text as before."""
    from reslint.project_index import ProjectIndex

    package = tmp_path / "pkg"
    package.mkdir()
    (tmp_path / "pyproject.toml").write_text("")
    (package / "__init__.py").write_text("")
    (package / "configuration_block.py").write_text(CONFIG_MODULE.format(cookie=cookie), encoding="utf-8")
    path = package / "modeling_block.py"
    path.write_text(MODEL_IMPORTING_ITS_CONFIG)
    config_parses = []
    parse = ast.parse

    def counted(source, *args, **kwargs):
        if ("BlockConfig:" if isinstance(source, str) else b"BlockConfig:") in source:
            config_parses.append(1)
        return parse(source, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", counted)
    ProjectIndex._shared.clear()
    result = analyze_file(str(path), path.read_bytes(), Settings(static=True), str(path))
    assert [(finding.code, finding.line) for finding in result.findings] == [("RL101", 16)]
    assert len(config_parses) == parses


TRAINS_THROUGH_HELPERS = """\
from helpers import make_optimizer, prepare


def train(model, cfg):
    batch = prepare(cfg)
    optimizer = make_optimizer(model.parameters())
    optimizer.step(batch)
"""
NOT_A_FACTORY = """

def prepare(cfg):
    return dict(cfg)
"""
BUILDS_ADAMW = """\
import torch


def build(parameters):
    return torch.optim.AdamW(parameters)
"""
HELPERS = {  # helpers.py's make_optimizer: each builds the optimizer in a way a cheaper reading could miss
    "spelled": "import torch\n\n\ndef make_optimizer(parameters):\n    return torch.optim.AdamW(parameters)\n",
    "spelled NFKC": "import torch\n\n\ndef make_optimizer(parameters):\n    return torch.optim.\uff21dam\uff37(parameters)\n",
    "through a helper": "from inner import build\n\n\ndef make_optimizer(parameters):\n"
                        "    optimizer = build(parameters)\n    return optimizer\n",
    "redefined under an if": "from inner import build\n\n\ndef make_optimizer(parameters):\n    return None\n\n\n"
                             "if True:\n    def make_optimizer(parameters):\n"
                             "        optimizer = build(parameters)\n        return optimizer\n",
}


def training_reads(tmp_path, monkeypatch, helpers: str):
    """train.py's optimizer sites, and the files a `TrainingReader` read for them."""
    from reslint.project_index import ProjectIndex
    from reslint.static import training

    write(tmp_path, {"pyproject.toml": "", "train.py": TRAINS_THROUGH_HELPERS, "helpers.py": helpers + NOT_A_FACTORY,
                     "inner.py": BUILDS_ADAMW})
    read_files = []
    read = training.TrainingReader.read
    monkeypatch.setattr(training.TrainingReader, "read",
                        lambda reader: read_files.append(Path(reader.path).name) or read(reader))
    ProjectIndex._shared.clear()
    path = tmp_path / "train.py"
    _, optimizers, _ = training.extract_training(path.read_text(), str(path), str(tmp_path))
    return [(site.line, site.api, site.target) for site in optimizers], read_files


@pytest.mark.parametrize("shape", HELPERS)
def test_an_optimizer_factory_in_another_file_is_still_read(tmp_path, monkeypatch, shape) -> None:
    """A helper file is read for a called function only when that function could return an optimizer: its file
    spells an optimizer's name (NFKC-normalised, as CPython reads identifiers), or a function of its name returns
    what a call assigned. Each shape here is such a factory: the site stays."""
    sites, read_files = training_reads(tmp_path, monkeypatch, HELPERS[shape])
    api = "torch.optim.AdamW" if shape.startswith("spelled") else "build() (torch.optim.AdamW)"
    assert sites == [(6, f"make_optimizer() ({api})", "optimizer")]
    assert read_files[:2] == ["train.py", "helpers.py"]


def test_a_helper_that_cannot_return_an_optimizer_leaves_its_file_unread(tmp_path, monkeypatch) -> None:
    """`batch = prepare(cfg)` in a training script is read as a possible optimizer factory; `prepare`'s file never
    spells an optimizer and `prepare` returns no assigned call, so the file is not walked (the whole file was
    walked, and every helper it calls followed)."""
    sites, read_files = training_reads(tmp_path, monkeypatch, "\ndef make_optimizer(parameters):\n    return None\n")
    assert sites == []
    assert read_files == ["train.py"]


LITERALS = ["'relu'", "b'x'", "r'\\d+'", "'\\N{BULLET}'", "1", "-1.5", "+2", "1+2j", "-1-2j", "(1, 'a', None)",
            "[True, [False]]", "{1, 2}", "set()", "{'a': {'b': [1]}}", "{**x}", "x", "f(1)", "1 + 2", "-'a'", "2j + 1",
            "set(1)", "lambda: 1"]
UNPARSABLE_LITERALS = ["'\\N{nonsense}'", "'unterminated", "(", "  'indented'"]


def test_literal_eval_answers_as_ast_literal_eval_does_and_leaves_no_cycle() -> None:
    """`string_value` and the config readers evaluate literals without `ast.literal_eval`'s per-call reference
    cycle, which the console script would freeze for the run (it no longer collects before freezing)."""
    import gc
    import re
    import warnings

    from reslint.static.literals import literal_eval

    def answer(evaluate, given):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return "value", evaluate(given)
        except Exception as error:  # noqa: BLE001 - the exception is the answer compared
            return type(error).__name__, re.sub(r" at 0x[0-9a-f]+", "", str(error))  # a node parsed twice: two addresses

    given = LITERALS + UNPARSABLE_LITERALS + [ast.parse(text, mode="eval").body for text in LITERALS]
    assert [answer(literal_eval, item) for item in given] == [answer(ast.literal_eval, item) for item in given]
    enabled = gc.isenabled()
    gc.disable()
    try:
        gc.collect()
        for item in given:
            answer(literal_eval, item)
        gc.set_debug(gc.DEBUG_SAVEALL)
        assert gc.collect() == 0, gc.garbage[:4]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if enabled:
            gc.enable()


@pytest.mark.parametrize("text", ["x = optimizer", "from torch import optim", "x = torch.optim.AdamW",
                                  "configure_optimizers", "from transformers.optimization import Adafactor",
                                  "x = optimization.Adafactor",
                                  "x = LRScheduler", "x = lr_scheduler", "x = TrainingArguments",
                                  "x = deepspeed.initialize", "x = param_groups", "x = lr_lambda", "x = WarmupLR",
                                  "x = warmup_steps"])
def test_a_file_naming_training_vocabulary_is_read_for_training_code(monkeypatch, text) -> None:
    """The training reader looks only at files whose text names its vocabulary (a word test, not a parse)."""
    from reslint.static import training

    read_files = []
    read = training.TrainingReader.read
    monkeypatch.setattr(training.TrainingReader, "read", lambda reader: read_files.append(text) or read(reader))
    training.extract_training(f"{text}\n")
    training.extract_training("import torch\n\nclass Block(torch.nn.Module):\n    'A residual block.'\n")
    assert read_files == [text]


@pytest.mark.parametrize("text", ['"""This is an optimized version."""',
                                  "from scipy.optimize import linear_sum_assignment", "can_optimize = True",
                                  '"""Optimal assignments."""', '"""Not applied due to optimization."""',
                                  "x = optimizations", "from optimum.exporters import main",
                                  "from ...integrations.deepspeed import is_deepspeed_zero3_enabled"])
def test_model_code_naming_optim_or_deepspeed_otherwise_is_not_read_for_training_code(monkeypatch, text) -> None:
    """Words that hold the vocabulary without naming an optimizer (prose, `scipy.optimize`, a DeepSpeed check that
    is no `deepspeed.initialize`): most of transformers' model files hold one, and none of them holds training code."""
    from reslint.static import training

    read_files = []
    monkeypatch.setattr(training.TrainingReader, "read", lambda reader: read_files.append(text))
    assert training.extract_training(f"import torch\n{text}\n") == ([], [], [])
    assert read_files == []
