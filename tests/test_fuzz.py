"""Hostile input to the static engine and the config loader: findings or a clean error, nothing else.

Sources are the repository's fixtures and examples, mutated: truncated, spliced with random
bytes, nested deeply, given huge lines, other encodings, BOMs, coding cookies, CRLF or CR line
ends, tabs, null bytes and suppression comments. Each goes through the runner's per-file path
(read, analyse, suppress, filter), which reports any exception as an internal error instead of
raising: there must be none. Configs are random TOML text and random tables: each gives
Settings or a one-line ConfigError.

Examples are derandomized, so every run tests the same ones. To hunt for new failures, run with
RESLINT_FUZZ_EXAMPLES=5000 (random examples, that many per test).
"""

from __future__ import annotations

import ast
import atexit
import os
import shutil
import tempfile
import warnings
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from golden import ROOT
from reslint.analysis import MAX_NESTING, analyze_file, decode_source
from reslint.catalog import RULES
from reslint.errors import ReslintError
from reslint.config import KNOWN_KEYS, ConfigContext, ConfigError, Overrides, load_settings, settings_from_table
from reslint.discovery import SourceFile
from reslint.runner import check_source
from reslint.settings import Settings

HUNT = int(os.environ.get("RESLINT_FUZZ_EXAMPLES", "0"))
FUZZ = settings(
    max_examples=HUNT or 150,
    deadline=None,
    derandomize=not HUNT,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
STATIC = Settings(static=True, cache=False, jobs=1)
SEEDS = [path.read_bytes() for path in sorted((ROOT / "fixtures").rglob("*.py")) + sorted((ROOT / "examples").glob("*.py"))]
WORKDIR = Path(tempfile.mkdtemp(prefix="reslint-fuzz-"))
atexit.register(shutil.rmtree, WORKDIR, ignore_errors=True)

ENCODINGS = ("utf-8", "utf-8-sig", "latin-1", "cp1252", "utf-16", "utf-16-le", "utf-32", "euc-jp", "koi8-r", "ascii",
             "rot13", "no-such-codec", "")
# What a line may nest: (opening, closing) around an innermost `x`. CPython allows 200 brackets.
NESTINGS = (("(", ")"), ("[", "]"), ("{1: ", "}"), ("f(", ")"), ("-", ""), ("not ", ""), ("lambda: ", ""),
            ("", ".a"), ("", "[0]"), ("", " + x"), ("", " ** x"), ("", " ** 9"), ("x if x else ", ""))


# ----- source mutations ----------------------------------------------------------------------

def truncate(draw, data: bytes) -> bytes:
    return data[:draw(st.integers(0, len(data)))]


def splice_bytes(draw, data: bytes) -> bytes:
    start = draw(st.integers(0, len(data)))
    end = draw(st.integers(start, min(len(data), start + 64)))
    return data[:start] + draw(st.binary(max_size=64)) + data[end:]


def random_bytes(draw, data: bytes) -> bytes:
    return draw(st.binary(max_size=512))


def random_text(draw, data: bytes) -> bytes:
    return draw(st.text(max_size=300)).encode("utf-8", "surrogatepass")


def null_bytes(draw, data: bytes) -> bytes:
    where = draw(st.integers(0, len(data)))
    return data[:where] + b"\0" * draw(st.integers(1, 3)) + data[where:]


def with_bom(draw, data: bytes) -> bytes:
    bom = draw(st.sampled_from([b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff", b"\xff\xfe\x00\x00", b"\xef\xbb"]))
    return bom + data


def coding_cookie(draw, data: bytes) -> bytes:
    encoding = draw(st.sampled_from(ENCODINGS))
    line = draw(st.sampled_from([f"# -*- coding: {encoding} -*-\n", f"# coding={encoding}\n", f"#!/usr/bin/env python\n# vim: set fileencoding={encoding} :\n"]))
    body = reencode(data, draw(st.sampled_from(ENCODINGS)))
    return line.encode("ascii") + body


def other_encoding(draw, data: bytes) -> bytes:
    return reencode(data, draw(st.sampled_from(ENCODINGS)))


def reencode(data: bytes, encoding: str) -> bytes:
    try:
        return data.decode("utf-8").encode(encoding or "utf-8", "replace")
    except (LookupError, UnicodeError):
        return data


def line_ends(draw, data: bytes) -> bytes:
    end = draw(st.sampled_from([b"\r\n", b"\r", b"\n\r", b"\x0c\n", b"\x0b\n"]))
    if draw(st.booleans()):
        return data.replace(b"\n", end)
    lines = data.split(b"\n")
    where = draw(st.integers(0, len(lines)))
    return b"\n".join(lines[:where]) + end + b"\n".join(lines[where:])


def tabs(draw, data: bytes) -> bytes:
    indent = draw(st.sampled_from([b"    ", b"        "]))
    replacement = draw(st.sampled_from([b"\t", b"\t    ", b"    \t", b" \t", b"\x0c    "]))
    if draw(st.booleans()):
        return data.replace(indent, replacement)
    return data.replace(indent, replacement, draw(st.integers(1, 5)))


def huge_line(draw, data: bytes) -> bytes:
    size = draw(st.sampled_from([10_000, 100_000, 1_000_000]))
    line = draw(st.sampled_from([
        b"x = '" + b"a" * size + b"'\n",
        b"x = [" + b"1, " * (size // 3) + b"]\n",
        b"# " + b"\xc3\xa9" * (size // 2) + b"\n",
        b"x = " + b"1 + " * min(size // 4, 20_000) + b"1\n",
        b"y" * size + b"\n",
        b"N = " + b"9" * size + b"\nM = 0x" + b"f" * size + b"\n",
    ]))
    lines = data.split(b"\n")
    where = draw(st.integers(0, len(lines)))
    return b"\n".join(lines[:where] + [line] + lines[where:])


def deep_nesting(draw, data: bytes) -> bytes:
    opening, closing = draw(st.sampled_from(NESTINGS))
    depth = draw(st.one_of(st.integers(1, 210), st.sampled_from([MAX_NESTING - 20, MAX_NESTING + 10, 3_000, 20_000])))
    if depth > 300 and opening.endswith(("(", "[", "{1: ")):  # past CPython's bracket limit: rejected early
        depth = draw(st.sampled_from([201, 5_000, 50_000]))
    expression = opening * depth + "x" + closing * depth
    statement = draw(st.sampled_from([
        f"y = {expression}\n",
        f"def forward(self, x):\n    return {expression}\n",
        f"class Net(nn.Module):\n    def forward(self, x):\n        return x + self.f({expression})\n",
    ]))
    lines = data.split(b"\n")
    where = draw(st.integers(0, len(lines)))
    return b"\n".join(lines[:where] + [statement.encode()] + lines[where:])


def deep_blocks(draw, data: bytes) -> bytes:
    depth = draw(st.integers(1, 120))
    keyword = draw(st.sampled_from(["if x:", "for x in y:", "with x:", "while x:", "try:", "def f():", "class C:"]))
    block = "".join("    " * level + keyword + "\n" for level in range(depth)) + "    " * depth + "pass\n"
    return data + b"\n" + block.encode()


def suppression_comment(draw, data: bytes) -> bytes:
    codes = draw(st.text(alphabet="RLrl0123456789, []-:*\t", max_size=20))
    comment = draw(st.sampled_from(["# noqa", "# noqa:", "# reslint: ignore", "# reslint: ignore-file", "# reslint:ignore["]))
    lines = data.split(b"\n")
    where = draw(st.integers(0, max(len(lines) - 1, 0)))
    lines[where] += f"  {comment}{codes}".encode()
    return b"\n".join(lines)


def shuffle_lines(draw, data: bytes) -> bytes:
    return b"\n".join(draw(st.permutations(data.split(b"\n"))))


MUTATIONS = (truncate, splice_bytes, random_bytes, random_text, null_bytes, with_bom, coding_cookie, other_encoding,
             line_ends, tabs, huge_line, deep_nesting, deep_blocks, suppression_comment, shuffle_lines)


@st.composite
def mutated_sources(draw) -> bytes:
    data = draw(st.sampled_from(SEEDS))
    for mutation in draw(st.lists(st.sampled_from(MUTATIONS), min_size=1, max_size=3)):
        data = mutation(draw, data)
    return data


def cpython_accepts(data: bytes) -> bool:
    try:
        text = decode_source(data)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except (UnicodeDecodeError, SyntaxError, LookupError, ValueError, RecursionError, MemoryError):
        return False
    return True


@FUZZ
@given(mutated_sources())
def test_mutated_sources_give_findings_never_an_exception(data):
    path = WORKDIR / "fuzzed.py"
    path.write_bytes(data)
    source = SourceFile(path=str(path), display="fuzzed.py", relative="fuzzed.py")
    outcome = check_source(source, STATIC)
    assert outcome.error is None, outcome.error.traceback
    for finding in outcome.findings:
        assert finding.code in RULES
        assert finding.line >= 1 and finding.column >= 1
        assert "\n" not in finding.message
    unparsable = [finding for finding in outcome.findings if finding.code == "RL901"]
    assert len(unparsable) <= 1
    if unparsable and cpython_accepts(data):
        # Valid Python is RL901 only past a documented limit of the static engine, never "syntax error".
        assert unparsable[0].message.startswith("cannot analyse: "), unparsable[0].message


@FUZZ
@given(st.binary(max_size=2048))
def test_random_bytes_straight_into_the_engine(data):
    result = analyze_file("random.py", data, STATIC)
    assert all(finding.code in RULES for finding in result.findings)


# ----- configs -------------------------------------------------------------------------------

toml_scalars = st.one_of(
    st.booleans(), st.integers(-2**63, 2**63 - 1), st.floats(allow_nan=True), st.text(max_size=12),
    st.sampled_from(["RL1", "RL101", "ALL", "all", "rl2", "RL", "", " ", "E501", "pre", "post", "any", "error",
                     "warning", "info", "model.py:Net()", ":", "a:", "*", "**/x", "[", "\\"]),
    st.datetimes(), st.dates(), st.times(),
)
toml_values = st.recursive(
    toml_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8) | st.sampled_from(KNOWN_KEYS + ("factory", "inputs")), children, max_size=4),
    max_leaves=12,
)
tables = st.dictionaries(st.sampled_from(KNOWN_KEYS) | st.text(max_size=12), toml_values, max_size=6)


@FUZZ
@given(tables)
def test_random_tables_give_settings_or_a_one_line_config_error(table):
    try:
        result = settings_from_table(table, ConfigContext("pyproject.toml", "tool.reslint"))
    except ConfigError as error:
        assert "\n" not in str(error)
        assert str(error).startswith("pyproject.toml: tool.reslint")
    else:
        assert isinstance(result, Settings)


VALID_PYPROJECT = (ROOT / "tests" / "test_config.py").read_text(encoding="utf-8").split("'''")[1]


@st.composite
def pyproject_texts(draw) -> bytes:
    data = VALID_PYPROJECT.encode()
    kind = draw(st.sampled_from(["truncate", "splice", "bytes", "lines", "table"]))
    if kind == "truncate":
        return data[:draw(st.integers(0, len(data)))]
    if kind == "splice":
        return splice_bytes(draw, data)
    if kind == "bytes":
        return b"[tool.reslint]\n" + draw(st.binary(max_size=200))
    if kind == "lines":
        return shuffle_lines(draw, data)
    key = draw(st.sampled_from(KNOWN_KEYS) | st.text(alphabet="abcdefghijklmnopqrstuvwxyz-_.\"'", min_size=1, max_size=12))
    value = draw(st.sampled_from(["1", "-1", "0", "1e400", "nan", "true", "'x'", '"RL1"', "[]", "['RL1', 2]", "{}",
                                  "{a = 1}", "[[1]]", "1979-05-27", "'''\n'''", "[{factory = 'm.py:M()'}]", "inf"]))
    return f"[tool.reslint]\n{key} = {value}\n".encode()


@FUZZ
@given(pyproject_texts())
def test_random_pyproject_files_give_settings_or_a_one_line_config_error(data):
    directory = WORKDIR / "project"
    directory.mkdir(exist_ok=True)
    (directory / "pyproject.toml").write_bytes(data)
    try:
        result = load_settings(directory, "pyproject.toml", Overrides(static=True))
    except ConfigError as error:
        assert "\n" not in str(error)
        assert str(error).startswith(("pyproject.toml: ", "config file not found"))
    else:
        assert isinstance(result, Settings)
        assert os.path.samefile(result.root, directory)


@FUZZ
@given(st.lists(st.text(max_size=10), max_size=4), st.lists(st.text(max_size=10), max_size=4))
def test_random_select_and_ignore_flags_give_settings_or_a_config_error(select, ignore):
    try:
        load_settings(WORKDIR, None, Overrides(select=tuple(select), ignore=tuple(ignore)))
    except ReslintError as error:  # a ConfigError, or a UsageError for a bad or empty selection
        assert "\n" not in str(error)
