"""What a full check's trace children hand back of their files' fix checks, for the checking process's
`with_fixes` (see fixes.checked_in_trace_child, which runs them).

The checking process opens a table for one check (`for_this_check`); each trace child it forks itself
(not a process pool's workers, whose children's results would not reach it) records every analysis and
fixer candidate its `with_fixes` computed (`recording`), and the parent keeps those of the child's own file
(`take`). `analysis_of` and `candidate_of` serve them to `fixes.apply`, which computes whatever is not there
exactly as before. A module of its own, importing neither the engines nor the fixes: both sides use it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
from collections.abc import Callable, Iterator

from reslint.findings import FileResult
from reslint.settings import Settings

_owner: int | None = None  # the process whose check wants its fixes checked in trace children
_check: Callable | None = None  # what its trace children run after delivering their trace
_handed: dict[tuple, object] = {}  # (display, text digest, engine settings) -> FileResult document; candidates
_recording: list[dict] | None = None  # in a trace child: the analyses and candidates with_fixes computed there
_done: dict[tuple, object] | None = None  # while a check runs: what this process computed, by the same keys


@contextlib.contextmanager
def for_this_check(check: Callable | None) -> Iterator[None]:
    """While a check and its `with_fixes` run: its trace children run `check` (None: they do not)."""
    global _owner, _check, _handed, _done
    outer = _owner, _check, _handed, _done
    _owner, _check, _handed, _done = (os.getpid() if check is not None else None), check, {}, {}
    try:
        yield
    finally:
        _owner, _check, _handed, _done = outer


def wanted() -> Callable | None:
    """What the trace child this process is about to fork should run for its file's fixes, if anything."""
    return _check if _owner == os.getpid() else None


@contextlib.contextmanager
def recording() -> Iterator[list[dict]]:
    """In a trace child: what analysis_of and candidate_of compute is recorded (and no child of its own is
    asked to check fixes: without fork the "child" is the checking process itself)."""
    global _owner, _recording
    outer = _owner, _recording
    _owner, _recording = None, []
    try:
        yield _recording
    finally:
        _owner, _recording = outer


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
    the file's trace child handed it back already or this process computed it earlier in the check (`with_fixes`
    re-checks a fix's text once for the fix, again when it applies them all: `fix_file`)."""
    key = (display, hashlib.sha1(data).hexdigest(), engine.cache_key())
    for known in (_handed, _done or {}):
        document = known.get(key)
        if isinstance(document, dict):
            try:
                return from_document(document)
            except (KeyError, TypeError, ValueError, AttributeError):
                pass
    result = analyse()
    if _done is None and _recording is None:
        return result
    document = to_document(result)
    if _done is not None:
        _done[key] = document
    if _recording is not None:
        _recording.append({"display": key[0], "digest": key[1], "engine": key[2], "result": document})
    return result


def candidate_of(text: str, asked: tuple, make: Callable[[], str | None]) -> str | None:
    """`make()`, a fixer's candidate text for the finding `asked` (apply.candidate) in `text`, unless the
    file's trace child handed it back already or this process made it earlier in the check."""
    key = ("candidate", asked[0], hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest(), repr(asked))
    for known in (_handed, _done or {}):
        if key in known:
            candidate = known[key]
            if candidate is None or isinstance(candidate, str):
                return candidate
    candidate = make()
    if _done is not None:
        _done[key] = candidate
    if _recording is not None:
        _recording.append({"display": asked[0], "candidate": list(key[2:]), "text": candidate})
    return candidate


def remember_static(display: str, data: bytes, settings: Settings, result: FileResult) -> None:
    """In the checking process: its own static analysis of a file (`result`, before tracing) is what a fix's
    static re-check of the unchanged file computes (apply.static_recheck: the same settings but static; the
    static engine reads none of what differs, and without a `--model` naming the file the re-check does not
    skip it either); the file's trace child and `with_fixes` find it here."""
    if _owner != os.getpid() or settings.models:
        return
    engine = dataclasses.replace(settings, static=True)  # its cache_key is apply.static_recheck's
    _handed[(display, hashlib.sha1(data).hexdigest(), engine.cache_key())] = to_document(result)


def to_document(result: FileResult) -> dict:
    return {**result.to_dict(), "cacheable": result.cacheable, "imported": result.imported, "reads": list(result.reads)}


def from_document(document: dict) -> FileResult:
    result = FileResult.from_dict(document)
    result.cacheable = bool(document["cacheable"])
    result.imported = bool(document["imported"])
    result.reads = [str(path) for path in document["reads"]]
    return result
