"""The other project files a result was read from, where no return value carries them up to the result.

The static engine hands its cross-file reads up explicitly (`FileFacts.reads`). The trace engine asks the
same helpers from deep inside a build (a required flag's default up the chain of constructors, asked again
when a constructor raises; the stacks of other files that build a block) and from its graph facts (whether
other files' blocks hold the traced model): those helpers `note` the files they read, and the trace engine
collects them for the file's result while `recorded` is open (reslint.analysis). A cached result goes stale
when one of them changes (reslint.cache). The helpers are memoised per run, so the files are noted on every
answer, not only when a file is first read.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator

_open: list[dict[str, None]] = []


@contextlib.contextmanager
def recorded() -> Iterator[dict[str, None]]:
    """The files noted while the block runs, in order, each once (absolute paths)."""
    reads: dict[str, None] = {}
    _open.append(reads)
    try:
        yield reads
    finally:
        _open.remove(reads)


def note(paths: Iterable[str | os.PathLike]) -> None:
    """The files a cross-file fact was read from, for every open `recorded` block (none: nothing to do)."""
    if not _open:
        return
    found = [os.path.abspath(path) for path in paths]
    for reads in _open:
        for path in found:
            reads.setdefault(path, None)
