"""A full check's fix checks, done in the trace child of the file they fix.

`with_fixes` re-checks each candidate fix statically and traces the file with its fixes applied
(`still_traces`). Traced in a child of its own, the fixed file paid a fork, the trace engine's first
use and every op of its models again; the child that has just traced the original has all of that
warm (its models' ops are memoized: trace.meta_memo). So that child, once it has delivered its own
result (isolation.deliver), runs `with_fixes` for its file on the findings it knows, and hands back
every analysis `with_fixes` computed there (`cached_analysis`: the static re-checks, the traced
fixed file). The parent's `with_fixes` then decides exactly as before (with the project stage's
findings), finding those analyses here instead of computing them; one it does not find (a finding
the child did not know, a crash or timeout after the delivery) it computes as always.

Only for the files whose trace child the checking process forks itself (not a process pool's
workers, whose children's results would not reach it), and only for one check: `for_this_check`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Iterator

from reslint.findings import FileResult, Finding
from reslint.settings import Settings

_owner: int | None = None  # the process whose check wants its fixes checked in trace children
_handed: dict[tuple, object] = {}  # (display, text digest, engine settings) -> FileResult document; also fixer candidates
_recording: list[dict] | None = None  # in a trace child: the analyses with_fixes computed there


@contextlib.contextmanager
def for_this_check(wanted: bool) -> Iterator[None]:
    """While the check and its `with_fixes` run: the trace children check their files' fixes."""
    global _owner, _handed
    outer = _owner, _handed
    _owner, _handed = (os.getpid() if wanted else None), {}
    try:
        yield
    finally:
        _owner, _handed = outer


def wanted() -> bool:
    """Whether the trace child this process is about to fork should check its file's fixes."""
    return _owner == os.getpid()


def check_fixes_here(display: str, data: bytes, settings: Settings, findings: list[Finding]) -> dict:
    """In the trace child, after its result went out: with_fixes for this file (its unfiltered static and
    traced findings: `findings`), recording the analyses it computes; they are what is returned."""
    global _recording, _owner
    from reslint.fixes.apply import read_text, reported, with_fixes
    from reslint.isolation import inline

    text = read_text(display)
    if text is None or text.encode("utf-8") != data:
        return {"analyses": []}
    # Without fork the "child" is the checking process: its own with_fixes must not start this again.
    owner, _owner, _recording = _owner, None, []
    try:
        with inline():  # the fixed file is traced in this child: its parent's time limit covers it
            with_fixes(reported(display, findings, text, settings), settings)
        return {"analyses": _recording}
    finally:
        _owner, _recording = owner, None


def take(display: str, handed) -> None:
    """In the parent: keep what the trace child of `display` handed back (only analyses of that file)."""
    if _owner != os.getpid() or not isinstance(handed, dict) or not isinstance(handed.get("analyses"), list):
        return
    for analysis in handed["analyses"]:
        if not isinstance(analysis, dict) or analysis.get("display") != display:
            continue
        if isinstance(analysis.get("candidate"), list) and len(analysis["candidate"]) == 2:
            _handed[("candidate", display, *analysis["candidate"])] = analysis.get("text")
        else:
            _handed[(display, analysis.get("digest"), analysis.get("engine"))] = analysis.get("result")


def analysis_of(display: str, data: bytes, engine: Settings, analyse: Callable[[], FileResult]) -> FileResult:
    """`analyse()`, the engines' result for `data` as the file `display` under `engine`'s settings, unless
    the file's trace child handed it back already."""
    key = (display, hashlib.sha1(data).hexdigest(), engine.cache_key())
    document = _handed.get(key)
    if document is not None:
        try:
            return from_document(document)
        except (KeyError, TypeError, ValueError, AttributeError):
            pass
    result = analyse()
    if _recording is not None:
        _recording.append({"display": key[0], "digest": key[1], "engine": key[2], "result": to_document(result)})
    return result


def candidate_of(text: str, asked: tuple, make: Callable[[], str | None]) -> str | None:
    """`make()`, a fixer's candidate text for the finding `asked` (apply.candidate) in `text`, unless the
    file's trace child handed it back already."""
    key = ("candidate", asked[0], hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest(), repr(asked))
    if key in _handed:
        candidate = _handed[key]
        if candidate is None or isinstance(candidate, str):
            return candidate
    candidate = make()
    if _recording is not None:
        _recording.append({"display": asked[0], "candidate": key[2:], "text": candidate})
    return candidate


def remember_static(display: str, data: bytes, settings: Settings, result: FileResult) -> None:
    """In the checking process: its own static analysis of a file (`result`, before tracing) is what a fix's
    static re-check of the unchanged file computes (the static engine reads no setting the re-check changes;
    a `--model` naming the file would keep the re-check from skipping it); the file's trace child and
    `with_fixes` find it here."""
    if _owner != os.getpid() or settings.models:
        return
    from reslint.fixes.apply import static_recheck

    _handed[(display, hashlib.sha1(data).hexdigest(), static_recheck(settings).cache_key())] = to_document(result)


def to_document(result: FileResult) -> dict:
    return {**result.to_dict(), "cacheable": result.cacheable, "imported": result.imported, "reads": list(result.reads)}


def from_document(document: dict) -> FileResult:
    result = FileResult.from_dict(document)
    result.cacheable = bool(document["cacheable"])
    result.imported = bool(document["imported"])
    result.reads = [str(path) for path in document["reads"]]
    return result
