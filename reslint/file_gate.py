"""The one way reslint reads a file the checked tree controls (cache entries, configs, sources).

A committed symlink can point anywhere: at `/dev/zero` (read until memory runs out), at a FIFO or
`/dev/stdin` (blocks forever), or at a file outside the repository. Every such read goes through
`read_project_file`: a regular file, inside the project root when one is given, of bounded size.
"""

from __future__ import annotations

import os
import stat

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
