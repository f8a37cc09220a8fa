"""Output that the checked tree cannot forge: messages quote source text and file names verbatim.

A string literal holding `\\n::error file=x::...`, an ESC sequence clearing the screen, or a file
name with a newline, CR or a bidi override would otherwise reach a terminal or a CI log raw (fake
workflow commands, a fake "All checks passed!"). A file name that is not UTF-8 (kept by Python as
lone surrogates) would make JSON invalid and SARIF's URIs fail to encode.
"""

from __future__ import annotations

import re

# C0 and C1 controls but tab, DEL, the bidi controls, line/paragraph separators, and lone surrogates.
UNSAFE = "\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
UNSAFE_CHARACTER = re.compile(f"[{UNSAFE}]")


def escaped(character: str) -> str:
    code = ord(character)
    if 0xDC80 <= code <= 0xDCFF:  # a byte of a non-UTF-8 file name (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def terminal_safe(line: str, keep: tuple[str, ...] = ()) -> str:
    """`line` with every control, bidi and surrogate character written as an escape (`\\x1b`,
    `\\u202e`), but for the sequences in `keep` (reslint's own colour codes)."""
    if not keep:
        return UNSAFE_CHARACTER.sub(lambda match: escaped(match.group()), line)
    styled_or_unsafe = re.compile("(" + "|".join(map(re.escape, keep)) + f")|([{UNSAFE}])")
    return styled_or_unsafe.sub(lambda match: match.group(1) or escaped(match.group(2)), line)


def valid_unicode(value):
    """A JSON-able value with every string made valid Unicode: the undecodable bytes of a file name
    (lone surrogates) become `\\xff` text, as in `terminal_safe`."""
    if isinstance(value, str):
        return SURROGATE.sub(lambda match: escaped(match.group()), value)
    if isinstance(value, dict):
        return {valid_unicode(key): valid_unicode(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [valid_unicode(item) for item in value]
    return value


SURROGATE = re.compile("[\ud800-\udfff]")
