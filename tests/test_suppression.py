from __future__ import annotations

import json

import pytest

from cli_support import BATCHNORM, BATCHNORM_LINE, POST_LN, POST_LN_LINE, codes, run_reslint, write
from reslint.catalog import RULES
from reslint.findings import Finding
from reslint.suppression import filter_suppressed, parse_suppressions


def kept(source: str, *placed: tuple[str, int]) -> list[tuple[str, int]]:
    findings = [Finding(code, "message", "m.py", line) for code, line in placed]
    return [(finding.code, finding.line) for finding in filter_suppressed(findings, source)]


@pytest.mark.parametrize(
    ("comment", "suppressed"),
    [
        ("# noqa", {"RL101", "RL201"}),
        ("# NOQA", {"RL101", "RL201"}),
        ("#noqa:RL101", {"RL101"}),
        ("# noqa: RL101, RL201", {"RL101", "RL201"}),
        ("# noqa: RL101 RL201 -- reviewed", {"RL101", "RL201"}),
        ("# noqa: E501", set()),
        ("# noqa: E501,RL201", {"RL201"}),
        ("# noqa: because reasons", {"RL101", "RL201"}),  # no codes: a blanket noqa, as in flake8
        ("# type: ignore  # noqa: RL201", {"RL201"}),
        ("# reslint: ignore", {"RL101", "RL201"}),
        ("# reslint: ignore[RL101]", {"RL101"}),
        ("# reslint: ignore[RL1, RL3]", {"RL101"}),
        ("# Reslint: Ignore[rl2]", {"RL201"}),
        ("# reslint: ignore[]", set()),
        ("# reslint: ignore[RL999]", set()),
        ("# a comment", set()),
    ],
)
def test_line_suppressions(comment, suppressed):
    source = f"x = 1  {comment}\ny = 2  {comment}\n"
    remaining = kept(source, ("RL101", 1), ("RL201", 1), ("RL101", 3), ("RL201", 3))
    assert set(remaining) == {(code, 1) for code in {"RL101", "RL201"} - suppressed} | {("RL101", 3), ("RL201", 3)}


def test_file_level_suppressions_anywhere_in_the_file():
    source = "x = 1\n\n\ndef f():\n    pass  # reslint: ignore-file[RL201]\n"
    assert kept(source, ("RL201", 1), ("RL201", 40), ("RL101", 2)) == [("RL101", 2)]
    blanket = "# reslint: ignore-file\nx = 1\n"
    assert kept(blanket, ("RL201", 2), ("RL901", 9)) == []


def test_markers_inside_strings_are_not_comments():
    source = 'x = "# noqa"  \ny = """\n# reslint: ignore-file\n"""\n'
    assert kept(source, ("RL101", 1), ("RL201", 2)) == [("RL101", 1), ("RL201", 2)]


def test_falls_back_to_a_line_regex_when_tokenize_fails():
    source = "x = (1,  # noqa: RL901\n"  # unclosed bracket: tokenize raises at EOF
    assert kept(source, ("RL901", 1), ("RL101", 1)) == [("RL101", 1)]


def test_bare_suppressions_cover_every_catalog_code():
    suppressions = parse_suppressions("x = 1  # noqa\n")
    assert suppressions.line_codes[1] == frozenset(RULES)


def test_undecodable_files_have_no_suppressions():
    finding = Finding("RL901", "cannot decode", "m.py", 1)
    assert filter_suppressed([finding], None) == [finding]


@pytest.mark.parametrize(("source", "unknown"), [
    ("x = 1  # noqa: E501\nworld_rl = 2  # noqa\n", []),  # other tools' codes, `rl` inside a word: no tokenizing
    ("x = 1  # noqa: RL101, RL2\ny = 2  # reslint: ignore[RL1]\n", []),  # codes and prefixes of ours
    ("rl_loss = 1  # noqa: E501\n", []),  # a word that could be a code list's (after a newline): tokenized
    ("x = 1  # noqa: RL999\n", [(1, 8)]),
    ("x = 1  # noqa:RL101,rl99\n", [(1, 8)]),
    ("x = 1  # reslint: ignore[rl-typo]\n", [(1, 8)]),
    ('x = "# noqa: RL999"\n', []),  # in a string: tokenized, and not a comment
])
def test_unknown_codes_are_looked_for_only_in_files_that_name_one(source, unknown, monkeypatch):
    """RL905 tokenizes a file only when a word of it could be an unknown code of ours (`RL` and what follows, up to a
    space or a comma, naming no rule): a file whose `# noqa` comments name other tools' codes is not tokenized."""
    import tokenize

    from reslint import suppression

    tokenized = []
    real = tokenize.generate_tokens
    monkeypatch.setattr(tokenize, "generate_tokens", lambda readline: tokenized.append(1) or real(readline))
    monkeypatch.setattr(suppression, "_last_comments", None)
    found = suppression.unused_noqa_findings(source, "m.py")
    assert [(finding.line, finding.column) for finding in found] == unknown
    assert all(finding.code == "RL905" for finding in found)
    assert len(tokenized) == (1 if unknown or "RL999" in source or "rl_loss" in source else 0)


def test_a_file_is_tokenized_once_for_its_unknown_codes_and_its_suppressions(monkeypatch):
    import tokenize

    from reslint import suppression

    tokenized = []
    real = tokenize.generate_tokens
    monkeypatch.setattr(tokenize, "generate_tokens", lambda readline: tokenized.append(1) or real(readline))
    source = "x = 1  # noqa: RL999\ny = 2  # noqa: RL101\n"
    found = suppression.unused_noqa_findings(source, "m.py")
    assert kept(source, ("RL101", 2), ("RL201", 2), (found[0].code, found[0].line)) == [("RL201", 2), ("RL905", 1)]
    assert len(tokenized) == 1
    assert kept(source.replace("RL999", "RL998"), ("RL101", 2)) == []  # another text: tokenized for itself
    assert len(tokenized) == 2


# End to end through the CLI.

def test_noqa_forms_in_a_real_check(tmp_path):
    lines = POST_LN.splitlines()
    lines[POST_LN_LINE - 1] += "  # noqa: RL101"
    bn_lines = BATCHNORM.splitlines()
    bn_lines[BATCHNORM_LINE - 1] += "  # reslint: ignore[RL2]"
    write(tmp_path, {
        "suppressed_post.py": "\n".join(lines) + "\n",
        "suppressed_bn.py": "\n".join(bn_lines) + "\n",
        "file_level.py": "# reslint: ignore-file[RL201]\n" + BATCHNORM,
        "other_tool.py": BATCHNORM.replace("BatchNorm1d(16)", "BatchNorm1d(16)  # noqa: E501"),
        "post.py": POST_LN,
    })
    result = run_reslint("check", "--static", "--no-cache", "--output-format", "json", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert codes(result.stdout) == [("other_tool.py", "RL201", BATCHNORM_LINE), ("post.py", "RL101", POST_LN_LINE)]
    assert json.loads(result.stdout)["summary"]["files"] == 5


def test_ignore_file_on_a_syntax_error_file_silences_rl901(tmp_path):
    write(tmp_path, {"broken.py": "# reslint: ignore-file[RL901]\ndef f(:\n"})
    result = run_reslint("check", "--static", "--no-cache", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "All checks passed! (1 file)" in result.stdout
