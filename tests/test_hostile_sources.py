"""Sources built to break a parser: each is analysed or is one RL901 saying why, never a crash.

Before these limits, 5,000 nested brackets or lambdas overflowed libcst's native parser
(SIGSEGV, killing the run) and a few hundred nested calls overflowed Python's recursion limit
in libcst's visitors (an internal error). CPython's parser now judges first; the static engine
runs on a thread with a deep stack, up to MAX_NESTING levels.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from reslint.analysis import MAX_NESTING, analyze_file
from reslint.settings import Settings

STATIC = Settings(static=True)
MODEL = '''\
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.act = nn.ReLU()
        self.ff = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        h = {expression}
        return self.norm(x + h)
'''
RL101_LINE = 13


def model(expression: str) -> bytes:
    return MODEL.format(expression=expression).encode()


def findings(data: bytes) -> list[tuple[int, str, str]]:
    result = analyze_file("hostile.py", data, STATIC)
    return [(finding.line, finding.code, finding.message) for finding in result.findings]


@pytest.mark.parametrize("expression", [
    "self.act(" * 199 + "self.ff(x)" + ")" * 199,  # 200 brackets: CPython's limit
    "-" * (MAX_NESTING - 20) + "self.ff(x)",
    "not " * (MAX_NESTING - 20) + "self.ff(x)",
    "self.ff(x)" + " ** 2" * (MAX_NESTING - 20),
    "self.ff(x)" + ".relu()" * 300,
    "self.ff(x) if x is None else " * 300 + "self.ff(x)",
], ids=["brackets-200", "unary", "not", "power", "methods", "conditional"])
def test_nesting_up_to_the_limit_is_analysed(expression):
    assert [(line, code) for line, code, _ in findings(model(expression))] == [(RL101_LINE, "RL101")]


@pytest.mark.parametrize(("expression", "message"), [
    ("(" * 201 + "x" + ")" * 201, "syntax error: too many nested parentheses"),
    ("-" * (MAX_NESTING + 10) + "x", f"cannot analyse: code nested {MAX_NESTING + 16} levels deep (the limit is {MAX_NESTING})"),
    ("x" + "[0]" * 2_500, f"cannot analyse: code nested 2506 levels deep (the limit is {MAX_NESTING})"),
], ids=["brackets-201", "unary", "subscripts"])
def test_nesting_past_a_limit_is_one_rl901_on_its_line(expression, message):
    assert findings(model(expression)) == [(12, "RL901", message)]


@pytest.mark.parametrize(("source", "line"), [
    ("x = " + "(" * 5_000 + "1" + ")" * 5_000 + "\n", 1),
    ("x = " + "lambda: " * 5_000 + "1\n", 1),
    ("x = " + "[" * 50_000 + "\n", 1),
    ("def broken(:\n    pass\n" + "x = " + "lambda: " * 5_000 + "1\n", 1),  # CPython stops at line 1
    ("if x:\n        a\n b\n" + "x = " + "(" * 5_000 + "1" + ")" * 5_000 + "\n", 3),  # so does tokenize, at line 3
], ids=["brackets", "lambdas", "unclosed", "after-a-syntax-error", "after-an-indentation-error"])
def test_what_overflowed_libcst_is_rl901_in_a_process_that_survives(source, line):
    # A subprocess, so that a regression fails this test instead of killing the test run.
    script = (
        "import sys\n"
        "from reslint.analysis import analyze_file\n"
        "from reslint.settings import Settings\n"
        "result = analyze_file('deep.py', sys.stdin.buffer.read(), Settings(static=True))\n"
        "print([(f.code, f.line) for f in result.findings])\n"
    )
    run = subprocess.run([sys.executable, "-c", script], input=source.encode(), capture_output=True, timeout=120)
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    assert run.stdout.decode().strip() == repr([("RL901", line)])


def test_deeply_nested_blocks_are_cpythons_indentation_error():
    source = "".join("    " * level + "if x:\n" for level in range(120)) + "    " * 120 + "pass\n"
    assert findings(source.encode()) == [(101, "RL901", "syntax error: too many levels of indentation")]


def test_null_bytes_are_rl901_on_their_line():
    assert [(line, code) for line, code, _ in findings(b"x = 1\ny = 2\0\n")] == [(2, "RL901")]


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="this syntax is valid for CPython itself from 3.12")
def test_syntax_newer_than_this_python_is_still_analysed_by_libcst():
    source = MODEL.format(expression="self.ff(x)") + "\n\ntype Alias = int\n"
    assert [(line, code) for line, code, _ in findings(source.encode())] == [(RL101_LINE, "RL101")]


@pytest.mark.parametrize("constant", [
    "10 ** 10 ** 10",  # folding it would never finish
    "2 ** 2 ** 2 ** 2 ** 2 ** 2",
    "1" + "0" * 5_000,  # past int()'s 4,300-digit limit for decimal strings
    "1e999 ** 2",
])
def test_huge_constants_are_not_folded(constant):
    source = f"SIZE = {constant}\n" + MODEL.format(expression="self.ff(x) * SIZE")
    assert [(line, code) for line, code, _ in findings(source.encode())] == [(RL101_LINE + 1, "RL101")]


def test_a_string_cpython_rejects_in_a_file_only_libcst_parses():
    # `type` makes CPython 3.11 reject the file, so libcst parses it; the key is not a valid string.
    source = MODEL.format(expression="self.ff(x)").replace(
        "self.norm = nn.LayerNorm(d)", 'self.norm = nn.LayerNorm(d)\n        self.heads = nn.ModuleDict({"\\N{nonsense}": nn.Linear(d, d)})')
    source += "\n\ntype Alias = int\n"
    result = findings(source.encode())
    assert [code for _, code, _ in result] in (["RL101"], ["RL901"])  # RL901 from 3.12, where CPython judges the escape
