"""A fix's re-check analyses the fixed text's libcst module built from the original's unchanged statements
(Source.fixed_module): it must be the module libcst parses from that text, for each candidate of a file."""

from __future__ import annotations

import json

import libcst as cst
import pytest

from cli_support import run_reslint, write
from reslint.fixes.source import Source

TWO_BLOCKS = '''\
import torch.nn as nn


class First(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ff = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(x + self.ff(x))


# the second block, with a comment above it

class Second(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ff = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(x + self.ff(x))  # a comment at its end
    # and one inside its body, after its last statement
'''

PRE_LN = "return x + self.ff(self.norm(x))"


def pre_ln(statement: cst.ClassDef, comment: bool) -> cst.ClassDef:
    """The class made Pre-LN as a fixer makes it (its own lines above it kept); `comment`: one more line above it."""
    code = cst.Module([statement.with_changes(leading_lines=[])]).code
    fixed = cst.parse_module(code.replace("return self.norm(x + self.ff(x))", PRE_LN)).body[0]
    added = [cst.EmptyLine(comment=cst.Comment("# made Pre-LN"))] if comment else []
    return fixed.with_changes(leading_lines=[*statement.leading_lines, *added])


@pytest.mark.parametrize("comment", [False, True])
@pytest.mark.parametrize("header", ["", "# a module header comment\n\n", "\n\n# a comment above the first statement\n"])
@pytest.mark.parametrize("name", ["First", "Second", "both"])
def test_a_fixed_text_module_is_the_one_libcst_parses_from_it(header, name, comment):
    text = header + TWO_BLOCKS
    if header.startswith("\n"):  # the class statement first, below the comment
        text = header + TWO_BLOCKS.split("\n\n\n", 1)[1]
    source = Source(text)
    classes = [statement for statement in source.module.body if isinstance(statement, cst.ClassDef)
               and name in (statement.name.value, "both")]
    fixed = source.replaced_statements({statement: pre_ln(statement, comment) for statement in classes})
    assert fixed is not None and fixed.count(PRE_LN) == len(classes)
    module = source.fixed_module(fixed)
    if module is not None:
        assert module.code == fixed
        assert module.deep_equals(cst.parse_module(fixed))
    assert source.fixed_module(text) is None  # a text it did not make


def test_each_of_two_fixes_in_one_file_is_rechecked_on_its_own_text(tmp_path):
    write(tmp_path, {"blocks.py": TWO_BLOCKS})
    result = run_reslint("check", "--static", "--no-cache", "--output-format", "json", "blocks.py", cwd=tmp_path)
    findings = json.loads(result.stdout)["findings"]
    assert [(finding["code"], finding["line"], finding["symbol"]) for finding in findings] == [
        ("RL101", 11, "First"), ("RL101", 23, "Second")]
    branch = "        h = self.norm(x)\n        return x + self.ff(h)"
    assert [[edit["content"] for edit in finding["fix"]["edits"]] for finding in findings] == [
        [branch + "\n"], [branch + "  # a comment at its end\n"]]
    diff = run_reslint("check", "--static", "--no-cache", "--unsafe-fixes", "--diff", "blocks.py", cwd=tmp_path)
    assert diff.stdout.count("+        return x + self.ff(h)") == 2 and "Would fix 2 findings" in diff.stderr + diff.stdout
