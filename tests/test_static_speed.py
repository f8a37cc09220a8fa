"""The static engine's shortcuts change no finding: the same files analysed with each shortcut replaced
by the plain way it stands for (libcst's own visit for the fast walk) give the same findings,
positions, model summaries and cross-file links, over every fixture and example and a sample of
transformers' model files."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

import reslint.fixes.worker as worker
import reslint.static.dataflow as dataflow
import reslint.static.engine as engine
import reslint.static.index as index
from cli_support import repository_sources
from reslint.analysis import analyze_file
from reslint.settings import Settings
from reslint.static.positions import SourceMap

REPO_ROOT = Path(__file__).resolve().parent.parent


def sample() -> list[Path]:
    return repository_sources(("modeling_*.py", 45))


def libcst_walk(root, *visitors) -> None:
    for visitor in visitors:
        root.visit(visitor if isinstance(visitor, cst.CSTVisitor) else _LibcstVisitor(visitor))


class _LibcstVisitor(cst.CSTVisitor):
    """libcst's own visit of a visitor that only has `visit_<Node>` methods (the engine's visitors are plain
    classes: the fast walk calls what they define, and a CSTVisitor defines a method for every node kind)."""

    def __init__(self, visitor) -> None:
        super().__init__()
        self.visitor = visitor

    def on_visit(self, node: cst.CSTNode) -> bool:
        method = getattr(self.visitor, "visit_" + type(node).__name__, None)
        return method is None or method(node) is not False


def analysed(path: Path) -> tuple:
    result = analyze_file(str(path), path.read_bytes(), Settings(static=True), str(path))
    return ([(f.code, f.line, f.column, f.symbol, f.message) for f in result.findings],
            [model.to_dict() for model in result.models], result.links.to_dict() if result.links else None)


@pytest.fixture(scope="module")
def fast() -> dict[Path, tuple]:
    return {path: analysed(path) for path in sample()}


def test_the_fast_walk_gives_the_plain_engines_findings(fast, monkeypatch) -> None:
    for module in (index, dataflow):
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


def test_config_fields_resolved_once_and_texts_generated_when_read_give_the_eager_engines_findings(
        fast, monkeypatch) -> None:
    # The plain way: every config field looked up again where it is read, every place and sum's text computed
    # when the evaluator meets it, every name's text generated.
    monkeypatch.setattr(index.FileIndex, "config_field", lambda self, name, depth=0: self._config_field(name, depth))
    monkeypatch.setattr(dataflow, "partial", lambda function, *args: function(*args))
    monkeypatch.setattr(dataflow, "_plain_dotted_name", lambda node: None)
    findings = 0
    for path, expected in fast.items():
        assert analysed(path) == expected, path
        findings += len(expected[0])
    assert findings > 50


# ----- the whole run: fix availability beside the analysis, the project index's import words -----

def checked(paths: list[Path], jobs: int = 1) -> list[dict]:
    import reslint

    report = reslint.check([str(path) for path in paths], static=True, cache=False, jobs=jobs, cwd=REPO_ROOT)
    return [finding.to_dict() for finding in report.findings]


def test_fixes_checked_beside_the_analysis_are_the_fixes_checked_afterwards(monkeypatch) -> None:
    import reslint.fixes.apply as apply
    import reslint.runner as runner

    paths = sample()
    prepared = []
    real_prepare = apply.prepare_fixes

    def counted(*args, **kwargs):
        ready = real_prepare(*args, **kwargs)
        prepared.append(ready)
        return ready

    monkeypatch.setattr(apply, "prepare_fixes", counted)
    beside = checked(paths)
    assert sum(fix is not None for ready in prepared if ready for fix in ready.fixes.values()) >= 10
    assert sum(fix is None for ready in prepared if ready for fix in ready.fixes.values()) >= 10
    # The plain way: every fix checked after the run, the file parsed and re-checked again.
    monkeypatch.setattr(worker, "worker_fixes", lambda *args: None)
    afterwards = checked(paths)
    assert beside == afterwards
    assert sum(finding["fix"] is not None for finding in afterwards) >= 10


def test_the_fixers_place_statements_with_the_analysiss_own_syntax_tree(monkeypatch) -> None:
    """The fixes checked beside a file's analysis place its statements with the CPython AST the analysis parsed,
    not a second parse of the file; the plain way (a Source that parses its text) gives the same fixes. (The
    parent's own fix checks, of files with a project-stage finding, have neither parse at hand.)"""
    import reslint.fixes.apply as apply
    import reslint.fixes.source as source_module

    paths = sorted(REPO_ROOT.glob("fixtures/fixes/**/*.py")) + sorted(REPO_ROOT.glob("examples/**/*.py"))
    originals = {path.read_text(encoding="utf-8") for path in paths}
    lent: dict[str, bool] = {}  # an original text fixed beside its analysis -> whether its Source had the tree
    beside: list[bool] = []
    real_of, real_prepare = source_module.Statements.of.__func__, apply.prepare_fixes

    def recorded(cls, source):
        if beside and source.text in originals:
            lent[source.text] = lent.get(source.text, True) and source.tree is not None
        return real_of(cls, source)

    def prepared(*args, **kwargs):
        beside.append(True)
        try:
            return real_prepare(*args, **kwargs)
        finally:
            beside.pop()

    monkeypatch.setattr(source_module.Statements, "of", classmethod(recorded))
    monkeypatch.setattr(apply, "prepare_fixes", prepared)
    shared = checked(paths)
    assert sum(finding["fix"] is not None for finding in shared) >= 10
    assert len(lent) >= 5 and all(lent.values())
    real_init = source_module.Source.__init__
    monkeypatch.setattr(source_module.Source, "__init__", lambda self, text, module=None, tree=None:
                        real_init(self, text, module))
    assert checked(paths) == shared


def test_each_fix_candidate_is_matched_against_the_text_once_for_the_edits_matching_it_again_gives(monkeypatch) -> None:
    import difflib
    import types

    import reslint.fixes.apply as apply

    paths = sorted(REPO_ROOT.glob("fixtures/fixes/**/*.py")) + sorted(REPO_ROOT.glob("examples/**/*.py"))
    matched: list[tuple[tuple[str, ...], tuple[str, ...]]] = []

    class CountedMatcher(difflib.SequenceMatcher):
        def __init__(self, isjunk=None, a="", b="", autojunk=True) -> None:
            matched.append((tuple(a), tuple(b)))
            super().__init__(isjunk, a, b, autojunk)

    monkeypatch.setattr(apply, "difflib", types.SimpleNamespace(SequenceMatcher=CountedMatcher,
                                                                unified_diff=difflib.unified_diff))
    shared = checked(paths)
    assert sum(finding["fix"] is not None for finding in shared) >= 10
    assert len(matched) >= 10 and len(set(matched)) == len(matched)  # the scope check's match serves the edits
    # The plain way: every caller matches the texts itself.
    monkeypatch.setattr(apply.Parsed, "changes_to", lambda parsed, after: apply.changed_lines(parsed.text, after))
    assert checked(paths) == shared


def test_each_classs_column_table_walks_are_made_once_per_file_index_for_the_plain_walks_findings(monkeypatch) -> None:
    import reslint.static.sequence_context as sequence_context

    paths = sample()
    walked: list[tuple[object, str]] = []  # the ClassInfo objects themselves: kept, no id is reused
    plain = {"per_column": sequence_context.walk_per_column_builds, "lookups": sequence_context.walk_self_call_indexes}

    def counted(kind: str):
        def walk_of(info):
            walked.append((info, kind))
            return plain[kind](info)
        return walk_of

    monkeypatch.setattr(sequence_context, "walk_per_column_builds", counted("per_column"))
    monkeypatch.setattr(sequence_context, "walk_self_call_indexes", counted("lookups"))
    kept = checked(paths)
    keys = [(id(info), kind) for info, kind in walked]
    assert len(keys) >= 50 and len(set(keys)) == len(keys)
    assert {kind for _, kind in walked} == {"per_column", "lookups"}
    # The plain way: every model's question walks the classes of its closure again.
    monkeypatch.setattr(sequence_context, "per_column_builds", plain["per_column"])
    monkeypatch.setattr(sequence_context, "self_call_indexes", plain["lookups"])
    assert checked(paths) == kept


def test_two_workers_offer_the_fixes_one_process_offers() -> None:
    paths = sorted(REPO_ROOT.glob("fixtures/**/*.py"))
    paths = [path for path in paths if "hostile" not in path.parts]
    assert checked(paths, jobs=2) == checked(paths, jobs=1)


def test_import_words_are_read_as_the_regex_reads_them() -> None:
    import re

    from reslint.project_index import import_clauses

    regex = re.compile(rb"\bimport[ \t]+(\([^)]*\)|[^\n]*)")
    texts = [b"import os", b"reimport (a,\nimport b)\nimport c", b"x.import_module('m')\nfrom a import (b,\n c)",
             b"importlib.import_module\n_import x\n9import y\nfrom . import\timport_utils", b"import", b"imports x"]
    texts += [path.read_bytes() for path in sample()]
    for text in texts:
        assert import_clauses(text) == regex.findall(text), text[:80]


def test_a_top_level_statement_replaced_in_the_text_gives_the_regenerated_module() -> None:
    import libcst as cst

    from reslint.fixes.rl101_pre_ln import ReplaceNodes
    from reslint.fixes.source import Source

    texts = [data.decode("utf-8") for data in (path.read_bytes() for path in sample()) if is_utf8(data)]
    texts += ["class A:\n    pass\n\n# end\nclass B: pass", "x = 1\r\n\r\nclass C:\r\n  y = 2\r\n", "\ufeffimport os\n"]
    replaced = 0
    for text in texts:
        try:
            source = Source(text)
        except cst.ParserSyntaxError:  # the syntax-error fixtures
            continue
        body = source.module.body
        # every statement of a small file; of a large one (regenerated whole each time) the first, a middle one, the last
        chosen = range(len(body)) if len(text) < 20_000 else sorted({0, len(body) // 2, len(body) - 1})
        for index in chosen:
            statement = body[index]
            new = statement.with_changes(leading_lines=[cst.EmptyLine(comment=cst.Comment("# moved"))])
            expected = source.module.deep_replace(statement, new).code
            assert source.replaced(statement, new) == expected, (text[:60], index)
            replaced += 1
        if len(body) > 2:
            pairs = {body[0]: body[0].with_changes(leading_lines=[]), body[-2]: body[-1]}
            assert source.replaced_statements(pairs) == source.module.visit(ReplaceNodes(pairs)).code
    assert replaced > 500


def is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def whole_walk(tree) -> tuple[int, int, int]:
    """The nesting check's answer with every node visited through `ast.iter_child_nodes`: the depth and place of
    the first deepest node in the check's order."""
    import ast

    deepest, where, stack = 0, (1, 1), [(tree, 1, (1, 1))]
    while stack:
        node, depth, position = stack.pop()
        if hasattr(node, "lineno"):
            position = (node.lineno, node.col_offset + 1)
        if depth > deepest:
            deepest, where = depth, position
        stack.extend((child, depth + 1, position) for child in ast.iter_child_nodes(node))
    return deepest, *where


def test_the_nesting_check_finds_the_depth_and_place_ast_iter_child_nodes_finds() -> None:
    import ast

    from reslint.analysis import nesting

    texts = ["x = " + "(" * 150 + "1" + ")" * 150, "y = " + " + ".join(["a"] * 1500), "def f():\n    return [[[g(1)]]]\n"]
    texts += [path.read_bytes() for path in sample()]
    checked = 0
    for text in texts:
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        assert nesting(tree) == whole_walk(tree)
        checked += 1
    assert nesting(ast.parse(texts[1]))[0] > 1500
    assert checked > 100


POST_LN_BLOCK = """import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.attn = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        {body}
"""


def test_rl101s_fix_refuses_a_block_it_cannot_rewrite_before_placing_the_module() -> None:
    from reslint.findings import Finding
    from reslint.fixes import rl101_pre_ln
    from reslint.fixes.source import Source

    finding = Finding("RL101", "Post-LN", "block.py", 4, 1, "Block")
    norm_after_add = Source(POST_LN_BLOCK.format(body="x = x + self.attn(x)\n        return self.norm(x)"))
    assert rl101_pre_ln.fix(norm_after_add, finding) is None
    assert "positions" not in norm_after_add.__dict__  # the whole module's codegen was spared
    norm_of_a_sum = Source(POST_LN_BLOCK.format(body="return self.norm(x + self.attn(x))"))
    fixed = rl101_pre_ln.fix(norm_of_a_sum, finding)
    assert "h = self.norm(x)\n        return x + self.attn(h)" in fixed


def test_project_trees_past_the_budget_are_dropped_and_the_construction_sites_stay_the_same(tmp_path, monkeypatch) -> None:
    import reslint.project_index as project_index
    from reslint.project_index import ProjectIndex

    files = {
        "conv.py": "class ConvModule:\n    pass\n\n\nclass Gate:\n    pass\n",
        "block.py": "from conv import ConvModule as Conv\n\n\nclass Block:\n    def __init__(self):\n        self.conv = Conv()\n",
        "main.py": "import conv\n\n\ndef build():\n    return conv.ConvModule(), conv.Gate()\n",
        "gated.py": "from conv import Gate\n\n\nclass Gated:\n    def __init__(self):\n        self.gate = Gate()\n",
    }
    for name, text in {"pyproject.toml": "", **files}.items():
        (tmp_path / name).write_text(text)

    def sites() -> tuple[dict, ProjectIndex]:
        ProjectIndex._shared.clear()
        index = ProjectIndex.for_file(tmp_path / "conv.py")
        found = {}
        for _ in range(2):  # asked again after other trees pushed the first ones out
            for name in ("ConvModule", "Gate"):
                found.setdefault(name, []).append(sorted((site.path.name, site.line, site.scope)
                                                         for site in index.construction_sites(tmp_path / "conv.py", name)))
        return found, index

    unbounded, _ = sites()
    monkeypatch.setattr(project_index, "MAX_CACHED_TREE_SOURCE", 1)  # one tree at a time
    monkeypatch.setattr(project_index, "_named_calls", {})  # what the trees of the first run left
    monkeypatch.setattr(project_index, "_definitions_of", {})
    bounded, index = sites()
    assert bounded == unbounded
    assert unbounded["Gate"][0] == [("gated.py", 6, "Gated"), ("main.py", 5, "build")]
    assert len(index._trees) == 1
    held = {id(tree) for tree, _ in index._trees.values()}
    assert set(project_index._named_calls) <= held and set(project_index._definitions_of) <= held


# ----- the engine's facts: texts rendered and config fields resolved only when, and as often as, asked -----

EMBEDDED_BLOCK = """import torch
from torch import nn


class Embeddings(nn.Module):
    def forward(self, tokens, positions):
        return tokens * 2 + positions


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.mlp = nn.Linear(dim, dim)

    def forward(self, x):
        if self.config.pre_norm:
            return x + self.mlp(self.norm(x))
        return self.norm(x + self.mlp(x))


class Model(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.stages = nn.ModuleList([Embeddings()])
        self.proj = nn.Linear(config.dim, config.dim)
        self.block = Block(config.dim)
        self.other = Block(config.dim)

    def forward(self, tokens, positions):
        hidden = self.stages[0](tokens, positions)
        hidden = self.proj(hidden)
        return self.other(self.block(hidden))
"""


def forward_statements(module, name: str) -> list:
    import libcst as cst

    cls = next(node for node in module.body if isinstance(node, cst.ClassDef) and node.name.value == name)
    forward = next(node for node in cls.body.body if isinstance(node, cst.FunctionDef) and node.name.value == "forward")
    return list(forward.body.body)


def test_an_inlined_module_call_and_a_sum_that_is_no_residual_leave_their_statements_unread(tmp_path) -> None:
    import ast

    import libcst as cst

    path = tmp_path / "model.py"
    path.write_text(EMBEDDED_BLOCK)
    module = cst.parse_module(EMBEDDED_BLOCK)
    positions = SourceMap(module, EMBEDDED_BLOCK, ast.parse(EMBEDDED_BLOCK))
    facts = engine.StaticExtractor(str(path), module, positions, str(path)).run()
    residuals = {(fact.span.line, fact.skip, fact.branch) for fact in facts.residuals}
    assert residuals == {(18, "x", "self.mlp(self.norm(x))"), (19, "x", "self.mlp(x)")}
    # The model's statements call modules of the file, which are inlined (their text is never needed), and a
    # torch module named by its attribute: none of them is generated.
    assert not set(forward_statements(module, "Model")) & positions._placed
    # The sum of the embeddings is no residual connection: its terms are not rendered.
    assert not set(forward_statements(module, "Embeddings")) & positions._placed
    added = [node for node in engine_graph(facts, positions, module).nodes if node.op == "add"]
    assert added and callable(added[0].info["terms"])


def engine_graph(facts, positions, module):
    """The embeddings' graph as the engine evaluates it."""
    from reslint.static.index import FileIndex

    index = FileIndex(module)
    return dataflow.Evaluator(index, positions, "model.py").evaluate_class(index.classes["Embeddings"])


def test_a_config_field_many_layers_read_is_looked_up_in_the_project_once(tmp_path, monkeypatch) -> None:
    from reslint.project_index import ProjectIndex

    (tmp_path / "pyproject.toml").write_text("")
    path = tmp_path / "model.py"
    path.write_text(EMBEDDED_BLOCK)
    asked = []
    builder_indexes = ProjectIndex.builder_indexes

    def counted(self, *args):
        asked.append(args[0])
        return builder_indexes(self, *args)

    monkeypatch.setattr(ProjectIndex, "builder_indexes", counted)
    ProjectIndex._shared.clear()
    result = analyze_file(str(path), path.read_bytes(), Settings(static=True), str(path))
    assert [(finding.code, finding.line) for finding in result.findings if finding.code == "RL101"] == [("RL101", 19)]
    # `self.config.pre_norm` is read by Block as a root, twice inside Model, each time on both branches.
    assert len(asked) == 1


# ----- wave 8: a class evaluated once for every reader of its plain graph -----

NORM_AND_BLOCK = '''\
import torch
from torch import nn


class Norm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + 1e-5) * self.weight


class Attention(nn.Module):
    def __init__(self, dim, p):
        super().__init__()
        self.qkv = nn.Linear(dim, dim)
        self.p = p

    def forward(self, x):
        dropout = 0.0 if not self.training else self.p
        return nn.functional.dropout(self.qkv(x), p=dropout, training=self.training)


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = Norm(dim)
        self.attn = Attention(dim, 0.1)

    def forward(self, x):
        return x + self.attn(self.norm(x))
'''

# Norm builds Probe and Probe builds Norm: classifying Norm evaluates Probe, which reads Norm's classification
# while it is under way (as no norm); Probe's own evaluation reads Norm as the norm it is.
CYCLE = '''\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = Norm(dim)
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        return x + self.fc(self.norm(x))


class Norm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.probe = Probe(dim)

    def forward(self, x):
        self.probe(x)
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + 1e-5) * self.weight


class Probe(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = Norm(dim)
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        return x + self.fc(self.norm(x))
'''


def extracted(source: str, monkeypatch) -> tuple:
    """The engine's facts of `source`, its extractor, and the classes it evaluated (as a whole, in order)."""
    import ast

    import libcst as cst

    evaluated = []
    evaluate = dataflow.Evaluator._evaluate_class

    def counted(self, info, spec):
        evaluated.append((info.name, tuple(self.assumptions)))
        return evaluate(self, info, spec)

    monkeypatch.setattr(dataflow.Evaluator, "_evaluate_class", counted)
    module = cst.parse_module(source)
    extractor = engine.StaticExtractor("model.py", module, SourceMap(module, source, ast.parse(source)), None)
    return extractor.run(), extractor, evaluated


def test_a_norm_class_and_a_mode_reading_block_are_each_evaluated_once(monkeypatch) -> None:
    facts, _, evaluated = extracted(NORM_AND_BLOCK, monkeypatch)
    # Norm is classified while Block is evaluated, with the graph of its own evaluation as a root (or the other
    # way round); Attention's `self.training` picks a dropout probability, no configuration: one evaluation each.
    assert sorted(evaluated) == [("Attention", ()), ("Block", ()), ("Norm", ())]
    assert [(fact.span.line, fact.placement, fact.condition) for fact in facts.residuals] == [(34, "pre", ())]
    assert [(norm.span.line, norm.kind, norm.owner) for norm in facts.norms] == [(13, "layernorm", "Norm")]


def test_an_evaluation_reading_a_classification_under_way_is_not_reused(monkeypatch) -> None:
    facts, extractor, evaluated = extracted(CYCLE, monkeypatch)
    # Probe's evaluation inside Norm's classification (Norm read as no norm) is not Probe's graph as a root.
    assert evaluated.count(("Probe", ())) == 2
    assert [node.info.get("module_class") for node in extractor.graphs["Probe"].nodes if node.op == "norm"] == ["Norm"]
    assert [(fact.block, fact.placement) for fact in facts.residuals] == [("Block", "pre"), ("Probe", "pre")]


def test_plain_evaluations_kept_for_the_run_give_the_engines_findings(fast, monkeypatch) -> None:
    # The plain way: every class evaluated again for each reader (its root, its norm classification).
    monkeypatch.setattr(dataflow.Evaluator, "evaluate_class", dataflow.Evaluator._evaluate_class)
    findings = 0
    for path, expected in fast.items():
        assert analysed(path) == expected, path
        findings += len(expected[0])
    assert findings > 50


# ----- a submodule's inlined call recorded once per file and replayed (static/shared_inlines.py) -----

def evaluated_alone(evaluator, info, spec, forward, inner, self_value, args, kwargs, scope):
    """The plain way: every inlined call evaluated where it comes."""
    return evaluator._run_function(forward, inner, [self_value] + list(args), dict(kwargs))


def graph_signature(graph, evaluator) -> tuple:
    """Everything a graph holds, nodes by their position in it (loops: none and an empty tuple are alike)."""
    from functools import partial

    import libcst as cst

    from reslint.static.graph import Node

    position = {id(node): index for index, node in enumerate(graph.nodes)}

    def value(item):
        if isinstance(item, Node):
            return "node", position.get(id(item), "not in the graph")
        if isinstance(item, (list, tuple)):
            return type(item).__name__, tuple(value(part) for part in item)
        if isinstance(item, dict):
            return "dict", tuple((name, value(part)) for name, part in item.items())
        if isinstance(item, dataflow.TupleValue):
            return type(item).__name__, value(item.items)
        if isinstance(item, dataflow.Const):
            return "const", repr(item.value)
        if isinstance(item, partial):
            return "text", value(item())
        if isinstance(item, cst.CSTNode):
            return "code", id(item)  # one parsed module for both evaluations
        if isinstance(item, (str, int, float, bool, type(None))):
            return item
        return type(item).__name__, getattr(item, "name", ""), getattr(item, "attr", ""), getattr(item, "path", "")

    nodes = tuple((node.op, node.position, node.frames, node.condition, value(node.inputs),
                   tuple(sorted((name, value(part)) for name, part in node.info.items() if name != "loops")),
                   tuple(node.info.get("loops", ())), value(node.users)) for node in graph.nodes)
    return (nodes, value(graph.outputs), value(graph.stack_outputs),
            tuple((key, where if type(where) is tuple else where()) for key, where in graph.stack_iterations.items()),
            tuple(evaluator.undecided), tuple(evaluator.flag_defaults.items()), value(evaluator.returned))


def evaluations(path: Path, module, monkeypatch) -> tuple[list, str]:
    """Every evaluation of a class of the file in one engine run (in order) and the file's facts."""
    seen = []
    real = dataflow.Evaluator._evaluate_class

    def recorded(self, info, spec=None):
        graph = real(self, info, spec)
        if self.index.module is module:  # not the project files' facts (the file itself, parsed there, included)
            seen.append((info.name, graph_signature(graph, self)))
        return graph

    from reslint.project_index import ProjectIndex

    ProjectIndex._shared.clear()  # each run reads the project afresh (the first would leave the other files' facts)
    with monkeypatch.context() as patched:
        patched.setattr(dataflow.Evaluator, "_evaluate_class", recorded)
        facts = engine.extract_facts(str(path), module, text=path.read_text(encoding="utf-8"))
    return seen, repr(facts)


def test_replayed_inlined_calls_build_the_graphs_evaluating_each_call_builds(monkeypatch) -> None:
    import libcst as cst

    import reslint.static.shared_inlines as shared

    replays = []
    real_replay = shared._replay
    monkeypatch.setattr(shared, "_replay", lambda *args: replays.append(1) or real_replay(*args))
    compared = 0
    for path in sample():
        try:
            module = cst.parse_module(path.read_text(encoding="utf-8"))
        except (cst.ParserSyntaxError, UnicodeDecodeError):
            continue
        shared_run = evaluations(path, module, monkeypatch)
        with monkeypatch.context() as patched:
            patched.setattr(dataflow, "inlined_forward", evaluated_alone)
            alone = evaluations(path, module, monkeypatch)
        assert shared_run[1] == alone[1], path
        assert [name for name, _ in shared_run[0]] == [name for name, _ in alone[0]], path
        for (name, signature), (_, expected) in zip(shared_run[0], alone[0]):
            assert signature == expected, (path, name)
        compared += len(alone[0])
    assert compared > 800 and len(replays) > 100, (compared, len(replays))


BACKBONE_AND_HEADS = '''
import torch.nn as nn


class Layer(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.ff = nn.Linear(dim, dim)

    def forward(self, x, mask=None):
        if mask is not None:
            x = x * mask
        return x + self.ff(self.norm(x))


class Encoder(nn.Module):
    def __init__(self, dim, depth):
        super().__init__()
        self.layers = nn.ModuleList([Layer(dim) for _ in range(depth)])

    def forward(self, x, mask=None):
        for layer in self.layers:
            x = layer(x, mask)
        return x


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.encoder = Encoder(dim, 4)
        self.final = nn.LayerNorm(dim)

    def forward(self, x, mask=None):
        return self.final(self.encoder(x, mask))


class ForTagging(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.model = Model(dim)
        self.head = nn.Linear(dim, 9)

    def forward(self, x, mask=None):
        return self.head(self.model(x, mask))


class ForClasses(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.model = Model(dim)
        self.head = nn.Linear(dim, 2)

    def forward(self, x, mask=None):
        return self.head(self.model(x, mask)[:, 0])
'''


def forwards_run(tmp_path: Path, monkeypatch) -> dict[str, int]:
    """How often each class's forward body is evaluated in one engine run of BACKBONE_AND_HEADS."""
    import collections

    import libcst as cst

    path = tmp_path / "heads.py"
    path.write_text(BACKBONE_AND_HEADS, encoding="utf-8")
    runs: collections.Counter = collections.Counter()
    real = dataflow.Evaluator._run_function

    def counted(self, func, scope, args, kwargs):
        if func.name.value == "forward":
            runs[scope.cls.name] += 1
        return real(self, func, scope, args, kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(dataflow.Evaluator, "_run_function", counted)
        engine.extract_facts(str(path), cst.parse_module(BACKBONE_AND_HEADS), text=BACKBONE_AND_HEADS)
    return dict(runs)


def test_a_backbone_inlined_in_every_head_is_evaluated_once_per_call_shape(tmp_path, monkeypatch) -> None:
    # Roots: Layer, Encoder, Model, ForTagging, ForClasses; RL103 looks again at Encoder's ordinary call (optional
    # inputs undecided: another call shape). Layer's forward runs as its root, inlined in Encoder's root and in
    # Encoder's ordinary call; Encoder's as its root, its ordinary call and inlined in Model's root. Model's forward
    # runs as its root and in each head (two constructions: two calls). Every other inlining of Layer
    # and Encoder (in Model's root, in each head's) is a replay: evaluated alone, Layer runs 6 times, Encoder 5.
    shared = forwards_run(tmp_path, monkeypatch)
    monkeypatch.setattr(dataflow, "inlined_forward", evaluated_alone)
    alone = forwards_run(tmp_path, monkeypatch)
    assert alone["Layer"] > shared["Layer"] and alone["Encoder"] > shared["Encoder"], (shared, alone)
    assert shared == {"Layer": 3, "Encoder": 3, "Model": 3, "ForTagging": 1, "ForClasses": 1}, shared
    assert alone == {"Layer": 6, "Encoder": 5, "Model": 3, "ForTagging": 1, "ForClasses": 1}, alone


def ordinary_calls_evaluated(path: Path, monkeypatch) -> list[str]:
    """The roots RL103 evaluates again as called without their optional inputs, in one engine run of `path`."""
    roots: list[str] = []
    real = engine.StaticExtractor._ordinary_call

    def counted(self, root, assumed):
        roots.append(root)
        return real(self, root, assumed)

    text = path.read_text(encoding="utf-8")
    with monkeypatch.context() as patched:
        patched.setattr(engine.StaticExtractor, "_ordinary_call", counted)
        engine.extract_facts(str(path), cst.parse_module(text), text=text)
    return roots


def test_rl103_looks_again_only_at_roots_whose_evaluation_asked_an_optional_input(tmp_path, monkeypatch) -> None:
    # Every root's stream reaches its output with the optional inputs given; the second look (those inputs left
    # out) is evaluated only where `x is None` was asked of one: here by the backbone inlined in each root, and in
    # Calibrated by a replay of the classifier's record of it (the replay asks it again).
    replayed = REPO_ROOT / "fixtures/final_norm/stream_end_optional_input_replayed.py"
    assert ordinary_calls_evaluated(replayed, monkeypatch) == ["Backbone", "Classifier", "Calibrated"]
    # The same models with the backbone's head applied whatever the mask: no root asks, none is looked at again.
    unasked = tmp_path / "unasked.py"
    unasked.write_text(replayed.read_text(encoding="utf-8").replace("        if mask is None:\n            x = self.head(x)",
                                                                   "        x = self.head(x)"), encoding="utf-8")
    assert "if mask is None" not in unasked.read_text(encoding="utf-8")
    assert ordinary_calls_evaluated(unasked, monkeypatch) == []

ONE_BLOCK_TWO_WAYS = '''
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.ff = nn.Linear(dim, dim)

    def forward(self, x, pre_norm=True, gate=None):
        if gate is not None:
            x = x * gate
        if pre_norm:
            return x + self.ff(self.norm(x))
        return self.norm(x + self.ff(x))


class Net(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.block = Block(dim)

    def forward(self, x, gate):
        x = self.block(x, True)
        x = self.block(x, False)
        x = self.block(x, gate=x)
        return self.block(x, gate=gate)
'''


def test_a_call_with_other_constants_or_other_tensors_is_evaluated_not_replayed(tmp_path, monkeypatch) -> None:
    # One submodule called with `pre_norm` True, then False (a Post-LN add), then gated by the stream itself, then
    # by another tensor: four call shapes, none the replay of another.
    import libcst as cst

    path = tmp_path / "two_ways.py"
    path.write_text(ONE_BLOCK_TWO_WAYS, encoding="utf-8")
    module = cst.parse_module(ONE_BLOCK_TWO_WAYS)
    shared = evaluations(path, module, monkeypatch)
    monkeypatch.setattr(dataflow, "inlined_forward", evaluated_alone)
    alone = evaluations(path, module, monkeypatch)
    assert shared == alone
    facts = engine.extract_facts(str(path), module, text=ONE_BLOCK_TWO_WAYS)
    assert sorted((add.span.line, add.placement) for add in facts.residuals) == [(15, "pre"), (16, "post")]


TWO_BLOCKS_ONE_ATTRIBUTE = '''import torch.nn as nn


class PreBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.ff = nn.Linear(dim, dim)
        self.mode = None

    def forward(self, x):
        if self.mode is None:
            return x + self.ff(self.norm(x))
        return self.norm(x + self.ff(x))


class PostBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.ff = nn.Linear(dim, dim)
        self.mode = 1

    def forward(self, x):
        if self.mode is None:
            return x + self.ff(self.norm(x))
        return self.norm(x + self.ff(x))
'''


def test_an_attribute_folded_once_per_file_is_each_classs_own(monkeypatch) -> None:
    # `self.mode` folds to None in one class and to 1 in the other: each class's branch is its own (the fold is
    # remembered per class and attribute), as when it is folded at every read.
    import libcst as cst

    module = cst.parse_module(TWO_BLOCKS_ONE_ATTRIBUTE)

    def placements():
        facts = engine.extract_facts("two_blocks.py", module, text=TWO_BLOCKS_ONE_ATTRIBUTE)
        return sorted((add.span.line, add.block, add.placement) for add in facts.residuals)

    remembered = placements()
    assert remembered == [(13, "PreBlock", "pre"), (27, "PostBlock", "post")]
    monkeypatch.setattr(dataflow.Evaluator, "fold_self_attr_value",
                        lambda self, self_value, attr: None if (folded := self._folded_self_attr(
                            self_value.cls, attr)) is dataflow._UNFOLDED else dataflow.Const(folded))
    assert placements() == remembered


def test_reaches_answers_as_the_whole_search_within_its_step_limit() -> None:
    # `reaches` first follows only the nodes made after the source: its answers, and where the whole search runs out
    # of steps first (an older subtree searched before the path), the whole search's answer.
    from reslint.static.graph import Graph, reaches

    graph = Graph()
    old = [graph.add("input", (), (1, 0), name="old0")]
    for position in range(1, 6):
        old.append(graph.add("pass", (old[-1],), (1 + position, 0)))
    source = graph.add("input", (), (10, 0), name="x")
    projected = graph.add("module", (source,), (11, 0), name="linear")
    target = graph.add("add", (projected, old[-1]), (12, 0))  # the old chain is searched first (last pushed)
    assert reaches(target, source, True) and reaches(target, source, False)
    assert reaches(projected, source, True) and not reaches(source, projected, False)
    assert not reaches(target, graph.add("input", (), (13, 0)), False)  # made after the target
    assert not reaches(old[-1], source, False)
    # Within 6 steps the whole search is still in the old chain: no, as before.
    assert not reaches(target, source, True, limit=6)
    assert reaches(target, source, True, limit=9)


def without_module_classes() -> list[Path]:
    """Fixtures and examples, and transformers files that define no model: configurations, processors, tokenizers."""
    return repository_sources(("configuration_*.py", 20), ("*processing_*.py", 20), ("tokenization_*.py", 20),
                              ("feature_extraction_*.py", 20))


def test_files_the_ast_shows_without_models_give_the_engines_findings_and_facts(monkeypatch) -> None:
    """A file with no module class and no function named like a norm is not parsed by libcst: the same
    findings, models and links as the engine's, and the same facts but the config modules read for defaults
    (nothing reads them)."""
    import ast
    import dataclasses

    import reslint.static.without_libcst as without_libcst
    from reslint.file_gate import decode_source
    from reslint.static.engine import extract_facts

    paths = without_module_classes()
    shortcut = {path: analysed(path) for path in paths}
    gated = 0
    for path in paths:
        try:
            text = decode_source(path.read_bytes())
            tree = ast.parse(text)
        except (SyntaxError, UnicodeDecodeError, LookupError, ValueError):
            continue
        facts = without_libcst.facts_without_libcst(str(path), text, tree)
        if facts is not None:
            gated += 1
            engines = extract_facts(str(path), cst.parse_module(text), str(path), text=text, tree=tree)
            assert dataclasses.replace(engines, reads=[]) == facts, path
    monkeypatch.setattr(without_libcst, "facts_without_libcst", lambda *args: None)
    for path in paths:
        assert analysed(path) == shortcut[path], path
    assert gated > 20


MODEL_FREE = {
    "configuration_tiny.py": "from transformers import PretrainedConfig\n\n\nclass TinyConfig(PretrainedConfig):\n"
                             "    def __init__(self, n_layer=2, layer_norm_eps=1e-5):\n        self.n_layer = n_layer\n",
    "train.py": "import torch\nfrom torch.optim import AdamW\n\n\ndef train(model):\n"
                "    optimizer = AdamW(model.parameters(), lr=1e-3)\n    return optimizer\n",
    "norms.py": "import torch\n\n\ndef rms_norm(x, eps=1e-6):\n    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)\n",
    "block.py": "import torch.nn as nn\n\n\nclass Block(nn.Module):\n    pass\n",
}


def test_only_files_with_a_model_class_or_a_norm_function_are_parsed_by_libcst(tmp_path, monkeypatch) -> None:
    parsed = []
    parse_module = cst.parse_module
    monkeypatch.setattr(cst, "parse_module", lambda text, *args: parsed.append(text) or parse_module(text, *args))
    for name, text in MODEL_FREE.items():
        (tmp_path / name).write_text(text)
        analyze_file(str(tmp_path / name), text.encode(), Settings(static=True), str(tmp_path / name))
    assert parsed == [MODEL_FREE["norms.py"], MODEL_FREE["block.py"]]


LIBCST_IMPORTED = """\
import sys
from reslint.cli import run
status = run(sys.argv[1:])
print("status", status, "libcst imported", "libcst" in sys.modules)
"""


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_check_of_files_without_model_classes_does_not_import_libcst(tmp_path, jobs) -> None:
    """A configuration and a training script are analysed from CPython's AST: the check does not import libcst
    (two thirds of a one-file check), in one process or in a pool's parent (runner.preload_engine). A model file
    among them brings it back."""
    import subprocess
    import sys

    for name, text in MODEL_FREE.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "data.py").write_text("import torch\n\n\nclass Windows(torch.utils.data.Dataset):\n"
                                      "    def __getitem__(self, index):\n        return torch.zeros(4)\n")

    def check(*names: str) -> list[str]:
        done = subprocess.run([sys.executable, "-c", LIBCST_IMPORTED, "check", "--static", "--no-cache", "--jobs", jobs,
                               *names], cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    skipped = "1 skipped: no model or training code"  # the configuration: not even parsed
    assert check("configuration_tiny.py", "train.py", "data.py") == [
        f"All checks passed! (3 files, {skipped})", "status 0 libcst imported False"]
    assert check("configuration_tiny.py", "train.py", "data.py", "block.py") == [
        f"All checks passed! (4 files, {skipped})", "status 0 libcst imported True"]
