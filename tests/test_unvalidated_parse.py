"""The static engine's parse (reslint.static.unvalidated_parse): libcst's tree, without the validation of the
nodes its parser makes, and libcst's validation everywhere else."""

from __future__ import annotations

import dataclasses  # at the top: the string annotation `dataclasses.InitVar[int]` is looked up here
import threading

import libcst
import pytest

from golden import ROOT
from reslint.static.unvalidated_parse import parse_module


def python_files() -> list:
    """A seventh of the fixtures and the examples; not the hostile ones (nested past any recursion limit: the
    analysis turns them away before libcst, see analysis.refused_before_libcst)."""
    fixtures = [path for path in sorted((ROOT / "fixtures").rglob("*.py")) if "hostile" not in path.parts]
    return fixtures[::7] + sorted((ROOT / "examples").glob("*.py"))


@pytest.mark.parametrize("path", python_files(), ids=lambda path: path.relative_to(ROOT).as_posix())
def test_the_tree_is_libcsts(path):
    text = path.read_text(encoding="utf-8")
    try:
        expected = libcst.parse_module(text)
    except (libcst.ParserSyntaxError, RecursionError) as error:  # the fixtures that do not parse fail alike
        with pytest.raises(type(error)):
            parse_module(text)
        return
    tree = parse_module(text)
    assert tree.deep_equals(expected)
    assert tree.code == text


def test_the_parser_made_nodes_are_not_validated(monkeypatch):
    """What the skip is for: `Name._validate` runs for every name libcst.parse_module makes, never for ours."""
    checked = []
    monkeypatch.setattr(libcst.Name, "_validate", lambda node: checked.append(node.value))
    libcst.parse_module("x = y + z\n")
    assert sorted(checked) == ["x", "y", "z"]
    checked.clear()
    parse_module("x = y + z\n")
    assert checked == []


def test_nodes_made_after_a_parse_are_validated():
    parse_module("x = 1\n")
    with pytest.raises(libcst.CSTValidationError):
        libcst.Name("not a name")


def test_nodes_made_after_a_parse_that_failed_are_validated():
    with pytest.raises(libcst.ParserSyntaxError):
        parse_module("def (:\n")
    with pytest.raises(libcst.CSTValidationError):
        libcst.Name("not a name")


def test_another_thread_is_validated_while_one_parses(monkeypatch):
    """The skip belongs to the parsing thread: a node another thread makes meanwhile is validated."""
    raised: list[type] = []
    real_parse = libcst.parse_module

    def make_invalid_name():
        try:
            libcst.Name("not a name")
        except libcst.CSTValidationError as error:
            raised.append(type(error))

    def parse_with_another_thread_meanwhile(source, **kwargs):
        other = threading.Thread(target=make_invalid_name)
        other.start()
        other.join(10)
        return real_parse(source, **kwargs)

    monkeypatch.setattr(libcst, "parse_module", parse_with_another_thread_meanwhile)
    assert parse_module("x = y\n").code == "x = y\n"
    assert raised == [libcst.CSTValidationError]


def test_a_forked_child_does_not_inherit_another_threads_parse():
    """A child forked while another thread parses has only the forking thread: the other's ident, reused by a
    thread of the child, must not skip validation there."""
    import os

    from reslint.static import unvalidated_parse

    other = threading.get_ident() + 1
    unvalidated_parse._parsing.add(other)
    try:
        child = os.fork()
        if child == 0:
            os._exit(0 if other not in unvalidated_parse._parsing else 1)
        _, status = os.waitpid(child, 0)
    finally:
        unvalidated_parse._parsing.discard(other)
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.fixture
def own_process(monkeypatch):
    """A process of reslint's own (the console script, a pool worker): see reslint.runner.own_process."""
    import reslint.runner

    monkeypatch.setattr(reslint.runner, "own_process", True)


@pytest.mark.parametrize("path", python_files()[::3], ids=lambda path: path.relative_to(ROOT).as_posix())
def test_in_reslints_own_process_the_tree_is_libcsts(own_process, path):
    text = path.read_text(encoding="utf-8")
    try:
        expected = libcst.parse_module(text)
    except (libcst.ParserSyntaxError, RecursionError):
        return
    tree = parse_module(text)
    assert tree.deep_equals(expected) and tree.code == text


def test_in_reslints_own_process_no_check_runs_per_node_and_validation_comes_back(own_process, monkeypatch):
    """No thread but the parsing one makes nodes there: the whole class skips validation during the parse (no
    Python call per node), and every node made after it is validated again, also after a parse that failed."""
    from libcst._nodes.base import CSTNode

    checked, during = [], []
    real_parse = libcst.parse_module

    def recording_parse(source, **kwargs):
        during.append(CSTNode.__post_init__)
        return real_parse(source, **kwargs)

    monkeypatch.setattr(libcst.Name, "_validate", lambda node: checked.append(node.value))
    monkeypatch.setattr(libcst, "parse_module", recording_parse)
    assert parse_module("x = y + z\n").code == "x = y + z\n"
    assert checked == [] and during == [object.__init__]
    libcst.Name("made after")
    assert checked == ["made after"]
    with pytest.raises(libcst.ParserSyntaxError):
        parse_module("def (:\n")
    libcst.Name("made after a failed parse")
    assert checked == ["made after", "made after a failed parse"]


def test_during_the_parse_nodes_are_made_by_the_faster_inits_and_after_it_by_libcsts():
    from reslint.static.unvalidated_parse import faster_init

    libcsts_own = libcst.Name.__init__
    during = []
    real_parse = libcst.parse_module

    def recording_parse(source, **kwargs):
        during.append(libcst.Name.__init__)
        return real_parse(source, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(libcst, "parse_module", recording_parse)
        parse_module("x = y\n")
        with pytest.raises(libcst.ParserSyntaxError):
            parse_module("def (:\n")
        assert libcst.Name.__init__ is libcsts_own
    assert len(during) == 2 and libcsts_own not in during
    assert during[0].__code__.co_code == faster_init(libcst.Name).__code__.co_code


def test_a_faster_init_takes_the_same_arguments_and_makes_the_same_node():
    import inspect

    from reslint.static.unvalidated_parse import faster_init

    for cls in (libcst.Call, libcst.Attribute, libcst.FunctionDef, libcst.SimpleWhitespace, libcst.Tuple):
        own, faster = inspect.signature(cls.__init__), inspect.signature(faster_init(cls))
        assert [(p.name, p.kind) for p in faster.parameters.values()] == \
            [(p.name, p.kind) for p in own.parameters.values()]
    call = libcst.Call(func=libcst.Name("f"), args=[libcst.Arg(libcst.Name("x"))])
    made = object.__new__(libcst.Call)
    faster_init(libcst.Call)(made, func=libcst.Name("f"), args=[libcst.Arg(libcst.Name("x"))])
    assert made.deep_equals(call)
    again = object.__new__(libcst.Call)
    faster_init(libcst.Call)(again, func=libcst.Name("g"))
    # a default_factory is called for each node, as the dataclass's own __init__ calls it
    assert again.whitespace_after_func is not made.whitespace_after_func
    with pytest.raises(libcst.CSTValidationError):  # __post_init__ still runs: the node validates itself
        faster_init(libcst.Name)(object.__new__(libcst.Name), "not a name")


def test_a_class_whose_init_is_not_the_plain_generated_one_keeps_its_own():
    from reslint.static.unvalidated_parse import faster_init

    @dataclasses.dataclass(frozen=True)
    class WithoutSlots:
        value: int = 0

    @dataclasses.dataclass(frozen=True, slots=True)
    class Plain:
        value: int = 0

    @dataclasses.dataclass(frozen=True, slots=True)
    class KeptOut:
        value: int = 0
        derived: int = dataclasses.field(init=False, default=1)

    @dataclasses.dataclass(frozen=True, slots=True)
    class KeywordOnly:
        value: int = dataclasses.field(default=0, kw_only=True)

    @dataclasses.dataclass(frozen=True, slots=True)
    class WithInitVar:
        value: int = 0
        scale: dataclasses.InitVar[int] = 1

    @dataclasses.dataclass(frozen=True, slots=True)
    class InitInC:
        value: int = 0

    InitInC.__init__ = object.__init__  # no code object to read the parameters from

    assert faster_init(Plain) is not None
    assert [faster_init(cls) for cls in (WithoutSlots, KeptOut, KeywordOnly, WithInitVar, InitInC)] == [None] * 5


def test_inits_made_while_another_parse_has_the_faster_ones_installed_restore_libcsts_own(monkeypatch):
    """Two threads' first parses may both make the inits, one while the other's are installed."""
    from reslint.static.unvalidated_parse import faster_init

    libcsts_own = libcst.Name.__init__
    monkeypatch.setattr(libcst.Name, "__init__", faster_init(libcst.Name))
    assert faster_init(libcst.Name).made_from is libcsts_own


def test_a_parse_that_cannot_make_the_inits_leaves_the_thread_validated(monkeypatch):
    from reslint.static import unvalidated_parse

    def cannot_make():
        raise RuntimeError("an unexpected libcst")

    monkeypatch.setattr(unvalidated_parse, "_node_inits", cannot_make)
    with pytest.raises(RuntimeError):
        parse_module("x = 1\n")
    assert threading.get_ident() not in unvalidated_parse._parsing


def whitespace_nodes(tree) -> list:
    """Every SimpleWhitespace and Newline under `tree`, once per place it holds one (a shared node repeats)."""
    found, pending = [], [tree]
    while pending:
        node = pending.pop()
        if type(node) in (libcst.SimpleWhitespace, libcst.Newline):
            found.append(node)
        for field in dataclasses.fields(node):
            value = getattr(node, field.name)
            for item in value if isinstance(value, (tuple, list)) else (value,):
                if isinstance(item, libcst.CSTNode):
                    pending.append(item)
    return found


SPACED = "x = f(a, b)\nif x:\n    y  =  x.z  # two spaces\n"


def test_in_reslints_own_process_the_parser_shares_the_common_whitespace_nodes(own_process):
    """`SimpleWhitespace("")`, `SimpleWhitespace(" ")` and `Newline(None)` are nearly half of the nodes libcst makes:
    one node each, in every place and every parse; any other value is a node of its own per place, and the tree
    is libcst's tree all the same."""
    first, second = parse_module(SPACED), parse_module("a = b\n")
    assert first.deep_equals(libcst.parse_module(SPACED)) and first.code == SPACED
    nodes = whitespace_nodes(first) + whitespace_nodes(second)
    common = {("SimpleWhitespace", ""), ("SimpleWhitespace", " "), ("Newline", None)}
    distinct: dict[tuple, set[int]] = {}
    places: dict[tuple, int] = {}
    for node in nodes:
        key = (type(node).__name__, node.value)
        distinct.setdefault(key, set()).add(id(node))
        places[key] = places.get(key, 0) + 1
    assert common <= set(distinct)
    assert all(len(distinct[key]) == 1 for key in common)
    assert len(distinct[("SimpleWhitespace", "  ")]) == places[("SimpleWhitespace", "  ")] == 3
    assert places[("SimpleWhitespace", "")] > 10


def test_whitespace_nodes_made_outside_the_parse_or_for_a_library_caller_are_each_their_own(own_process, monkeypatch):
    import reslint.runner

    with pytest.raises(libcst.ParserSyntaxError):
        parse_module("def (:\n")
    parse_module("x = 1\n")
    assert libcst.SimpleWhitespace("") is not libcst.SimpleWhitespace("")
    assert libcst.Newline() is not libcst.Newline()
    assert isinstance(libcst.SimpleWhitespace, type) and isinstance(libcst.Newline, type)
    # a library caller's process: its other threads may make nodes during the parse, and keep their own
    monkeypatch.setattr(reslint.runner, "own_process", False)
    nodes = whitespace_nodes(parse_module(SPACED))
    assert len({id(node) for node in nodes}) == len(nodes)


def test_a_pool_forked_after_the_engines_preload_inherits_the_inits_and_shared_nodes():
    """The parent of a pool makes the faster `__init__`s and the shared nodes before it forks (runner.preload_engine):
    each worker's first parse would otherwise make its own, 30 ms each. It imports the modules a worker's static
    check imports on the way to the parse, too."""
    import subprocess
    import sys

    script = (
        "import sys, reslint.runner as runner\n"
        "from reslint.settings import Settings\n"
        "from reslint.static import unvalidated_parse as parse\n"
        "runner.preload_engine(Settings(static=True))\n"
        "print(parse._inits is not None, parse._sharing is not None, all(name in sys.modules for name in (\n"
        "    'libcst.native', 'reslint.prefilter', 'reslint.static.without_libcst', 'reslint.static.training')))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "True"]
