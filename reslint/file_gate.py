"""The one way reslint reads a file the checked tree controls (cache entries, configs, sources).

A committed symlink can point anywhere: at `/dev/zero` (read until memory runs out), at a FIFO or
`/dev/stdin` (blocks forever), or at a file outside the repository. Every such read goes through
`read_project_file`: a regular file, inside the project root when one is given, of bounded size.

A fix is checked by analysing and tracing the fixed text as the file itself, without writing it
anywhere: while `overlaid(path, data)` is active, every read of `path` (this gate's, Python's
`linecache`, the import of the checked file) sees `data` instead of the file on disk.
"""

from __future__ import annotations

import contextlib
import functools
import linecache
import os
import stat
from collections.abc import Callable, Iterator
from typing import TypeVar

T = TypeVar("T")

MAX_CONFIG_BYTES = 1 << 20  # pyproject.toml, DeepSpeed JSON
MAX_CACHE_ENTRY_BYTES = 16 << 20
MAX_SOURCE_BYTES = 32 << 20


class RefusedFile(OSError):
    """A file the gate does not read; an OSError, so callers treat it as unreadable."""

    def __init__(self, path: str | os.PathLike, reason: str):
        super().__init__(reason)
        self.filename = os.fspath(path)
        self.strerror = reason


def is_inside(path: str | os.PathLike, root: str | os.PathLike) -> bool:
    """Whether `path`, with every symlink resolved, lies in `root` (resolved too)."""
    real = os.path.realpath(path)
    real_root = os.path.realpath(root)
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def read_project_file(path: str | os.PathLike, root: str | os.PathLike | None, limit: int) -> bytes:
    """The bytes of `path`; RefusedFile unless it is a regular file of at most `limit` bytes, inside `root`."""
    if root is not None and not is_inside(path, root):
        raise RefusedFile(path, "outside the project")
    data = overlay(path)
    if data is not None:
        if len(data) > limit:
            raise RefusedFile(path, f"larger than {limit} bytes")
        return data
    # O_NONBLOCK: opening a FIFO must not wait for a writer; regular files ignore the flag.
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    descriptor = os.open(path, flags)
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise RefusedFile(path, "not a regular file")
        if status.st_size > limit:
            raise RefusedFile(path, f"larger than {limit} bytes")
        chunks, total = [], 0
        while True:  # the size may have grown since fstat: never read past the limit
            chunk = os.read(descriptor, min(1 << 20, limit + 1 - total))
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise RefusedFile(path, f"larger than {limit} bytes")
    finally:
        os.close(descriptor)


def decode_source(data: bytes) -> str:
    """Decode like Python does: a BOM or coding cookie wins, else UTF-8. Raises UnicodeDecodeError/SyntaxError."""
    import io
    import tokenize

    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(encoding)
    return text.removeprefix("\ufeff")


_overlays: dict[str, bytes] = {}  # overlay_key(path) -> the text reads of the path see (see `overlaid`)
_generation = 0  # changes whenever an overlay starts or ends: caches of file contents by path key on it


def overlay_key(path: str | os.PathLike) -> str:
    return os.path.normcase(os.path.abspath(path))


def overlay(path: str | os.PathLike) -> bytes | None:
    """The text `path` reads as under an active `overlaid`, else None (read the file)."""
    return _overlays.get(overlay_key(path)) if _overlays else None


def overlay_generation() -> int:
    """Changes whenever an overlay starts or ends: what a cache of file contents by path keys on."""
    return _generation


def cached_as_read(function: Callable[[str], T]) -> Callable[[str], T]:
    """`functools.lru_cache` of a function of a file's path that reads the file, keyed also on the overlays
    active (an overlaid file reads differently, and again as before once the overlay ends)."""
    @functools.lru_cache(maxsize=64)
    def cached(path: str, generation: int) -> T:
        return function(path)

    @functools.wraps(function)
    def read(path: str) -> T:
        return cached(path, _generation)

    return read


@contextlib.contextmanager
def overlaid(path: str | os.PathLike, data: bytes) -> Iterator[None]:
    """Reads of `path` see `data` for the duration of the block (nothing is written)."""
    global _generation
    key, filename = overlay_key(path), os.path.abspath(path)
    previous, previous_lines = _overlays.get(key), linecache.cache.get(filename)
    _overlays[key] = data
    _generation += 1
    # inspect (class lines) and traceback (stack traces) read sources through linecache; an entry without
    # an mtime is never checked against the file on disk.
    lines = decoded_lines(data)
    linecache.cache[filename] = (len(data), None, lines, filename)
    try:
        yield
    finally:
        _generation += 1
        if previous is None:
            _overlays.pop(key, None)
        else:
            _overlays[key] = previous
        if previous_lines is None:
            linecache.cache.pop(filename, None)
        else:
            linecache.cache[filename] = previous_lines


def decoded_lines(data: bytes) -> list[str]:
    try:
        return decode_source(data).splitlines(True)
    except (UnicodeDecodeError, SyntaxError, LookupError):
        return []
