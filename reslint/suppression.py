"""Inline suppressions: `# noqa`, `# reslint: ignore[...]` and `# reslint: ignore-file[...]`.

Forms (case-insensitive, anywhere inside a comment, so `# type: ignore  # noqa: RL101` works):

- `# noqa` (bare) suppresses every finding on its line; `# noqa: RL101, RL102` only those codes.
  Codes of other tools (`# noqa: E501`) suppress nothing of ours.
- `# reslint: ignore` (bare) or `# reslint: ignore[RL101, RL3]` (codes or prefixes) on the line.
- `# reslint: ignore-file` or `# reslint: ignore-file[RL201]` anywhere in the file, for the whole file.

Only real comments count: the source is tokenized, so `"# noqa"` inside a string is ignored.
When tokenize fails (an unterminated string or bracket, i.e. a file that also gets RL901),
each line is searched with a regex instead, which may also see `#` inside strings. A file that
cannot be decoded has no suppressions at all, so its RL901 can only be silenced by config.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from reslint.catalog import RULES, codes_matching
from reslint.findings import Finding

ALL_CODES = frozenset(RULES)

CODE_LIST = r"[A-Za-z]+[0-9]+(?:\s*,\s*[A-Za-z]+[0-9]+|\s+[A-Za-z]+[0-9]+)*"
NOQA = re.compile(rf"#\s*noqa(?::\s*(?P<codes>{CODE_LIST})?)?", re.IGNORECASE)
RESLINT = re.compile(r"#\s*reslint\s*:\s*ignore(?P<file>-file)?\b(?:\[(?P<codes>[^\]]*)\])?", re.IGNORECASE)
MARKERS = ("noqa", "reslint")


def expand_comment_codes(text: str) -> frozenset[str]:
    """Our codes named by `text`: full codes or prefixes, read as `--ignore` reads them (`RL` names every
    rule); other tools' codes and typos match nothing."""
    codes: set[str] = set()
    for raw in re.split(r"[\s,]+", text.strip()):
        if raw.upper().startswith("RL"):
            codes |= codes_matching(raw)
    return frozenset(codes)


@dataclass
class Suppressions:
    file_codes: frozenset[str] = frozenset()
    line_codes: dict[int, frozenset[str]] = field(default_factory=dict)

    def suppresses(self, finding: Finding) -> bool:
        return finding.code in self.file_codes or finding.code in self.line_codes.get(finding.line, ())

    def add_line(self, line: int, codes: frozenset[str]) -> None:
        self.line_codes[line] = self.line_codes.get(line, frozenset()) | codes

    def add_comment(self, line: int, comment: str) -> None:
        for match in NOQA.finditer(comment):
            codes = match.group("codes")
            self.add_line(line, ALL_CODES if codes is None else expand_comment_codes(codes))
        for match in RESLINT.finditer(comment):
            codes = match.group("codes")
            named = ALL_CODES if codes is None else expand_comment_codes(codes)
            if match.group("file"):
                self.file_codes |= named
            else:
                self.add_line(line, named)


def comments(text: str) -> Iterator[tuple[int, str]]:
    """(line, comment text) for every comment; a line regex when the source cannot be tokenized."""
    for line, _, comment in located_comments(text):
        yield line, comment


def located_comments(text: str) -> list[tuple[int, int, str]]:
    """(line, 0-based column, comment text) for every comment; see `comments`. The last text's are kept: a
    file's unknown codes and its suppressions are read one after the other."""
    global _last_comments
    last = _last_comments
    if last is not None and last[0] is text:
        return last[1]
    try:
        found = [
            (token.start[0], token.start[1], token.string)
            for token in tokenize.generate_tokens(io.StringIO(text).readline)
            if token.type == tokenize.COMMENT
        ]
    except (tokenize.TokenError, SyntaxError):
        found = [(number, line.index("#"), line[line.index("#"):])
                 for number, line in enumerate(text.splitlines(), 1) if "#" in line]
    _last_comments = (text, found)  # one assignment: a check in another thread sees the old pair or the new
    return found


_last_comments: tuple[str, list[tuple[int, int, str]]] | None = None  # the last text and its located_comments

# A word starting with `RL` up to the next space, comma or `]`: every code a comment's code list names is the start
# of one (it follows a `:`, a `[`, a space or a comma), so a text where each of them names a rule names no unknown one.
_RL_WORD = re.compile(r"(?<![A-Za-z0-9_])[Rr][Ll][^\s,\]]*")


def unknown_codes(text: str) -> list[str]:
    """The `RL` codes of a comment's code list that match no rule, neither as a code nor as a prefix."""
    unknown = []
    for raw in re.split(r"[\s,]+", text.strip()):
        if raw.upper().startswith("RL") and not codes_matching(raw):
            unknown.append(raw)
    return unknown


def unused_noqa_findings(text: str | None, path: str) -> list[Finding]:
    """RL905 for each suppression comment naming a code of ours that does not exist (`# noqa: RL999`)."""
    if text is None:
        return []
    lowered = text.lower()
    if not any(marker in lowered for marker in MARKERS):
        return []
    if all(codes_matching(word) for word in set(_RL_WORD.findall(text))):  # no comment to tokenize the file for
        return []
    findings = []
    for line, column, comment in located_comments(text):
        for pattern in (NOQA, RESLINT):
            for match in pattern.finditer(comment):
                named = unknown_codes(match.group("codes") or "")
                if named:
                    findings.append(Finding(
                        "RL905", f"`{match.group(0).strip()}` names no reslint rule ({', '.join(named)}), so it suppresses "
                        "nothing; `reslint rules` lists the codes", path, line, column + match.start() + 1))
    return findings


def parse_suppressions(text: str) -> Suppressions:
    suppressions = Suppressions()
    lowered = text.lower()
    if not any(marker in lowered for marker in MARKERS):
        return suppressions
    for line, comment in comments(text):
        suppressions.add_comment(line, comment)
    return suppressions


def filter_suppressed(findings: Iterable[Finding], text: str | None) -> list[Finding]:
    """The findings not silenced by a comment in `text` (None: an undecodable file)."""
    findings = list(findings)
    if not findings or text is None:
        return findings
    suppressions = parse_suppressions(text)
    return [finding for finding in findings if not suppressions.suppresses(finding)]
