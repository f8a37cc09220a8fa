"""A full check's fix checks, done in the trace child of the file they fix.

`with_fixes` re-checks each candidate fix statically and traces the file with its fixes applied
(`still_traces`). Traced in a child of its own, the fixed file paid a fork, the trace engine's first
use and every op of its models again; the child that has just traced the original has all of that
warm (its models' ops are memoized: trace.meta_memo). So that child, once it has delivered its own
result (isolation.deliver), runs `with_fixes` for its file on the findings it knows, and hands back
every analysis and fixer candidate `with_fixes` computed there (fixes.handed_back). The parent's
`with_fixes` then decides exactly as before (with the project stage's findings), finding those instead
of computing them; one it does not find (a finding the child did not know, a crash or timeout after the
delivery) it computes as always.
"""

from __future__ import annotations

from reslint.findings import Finding
from reslint.fixes.handed_back import recording
from reslint.settings import Settings


def check_fixes_here(display: str, data: bytes, settings: Settings, findings: list[Finding]) -> dict:
    """In the trace child, after its result went out: with_fixes for this file (its unfiltered static and
    traced findings: `findings`); what it computed is returned, for `handed_back.take`."""
    from reslint.fixes.apply import read_text, reported, with_fixes
    from reslint.isolation import inline

    text = read_text(display)
    if text is None or text.encode("utf-8") != data:
        return {"analyses": []}
    with recording() as analyses, inline():  # the fixed file is traced in this child, under its parent's limit
        with_fixes(reported(display, findings, text, settings), settings)
    return {"analyses": analyses}
