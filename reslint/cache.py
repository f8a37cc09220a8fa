"""Per-file result cache under `<root>/.reslint_cache/`.

One entry per (display path, settings, version), overwritten when the file changes, so the
cache does not grow with every edit. The entry stores the full key (a sha256 of the file bytes,
the version, the settings and the path) and is used only when that key matches. The cached value
is the FileResult before suppressions and filters, which are cheap and re-applied each run.
Any I/O or decoding problem is treated as a miss: the cache must never break a check.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import reslint
from reslint.findings import FileResult
from reslint.settings import Settings

CACHE_DIR_NAME = ".reslint_cache"
CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by reslint.\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)
FORMAT = 2


def content_key(data: bytes, display: str, settings: Settings) -> str:
    digest = hashlib.sha256()
    for part in (reslint.__version__.encode(), settings.cache_key().encode(), display.encode(), data):
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part)
    return digest.hexdigest()


def slot_name(display: str, settings: Settings) -> str:
    digest = hashlib.sha256(f"{reslint.__version__}\0{settings.cache_key()}\0{display}".encode())
    return digest.hexdigest()


class FileCache:
    def __init__(self, root: str | os.PathLike, settings: Settings):
        self.directory = Path(root) / CACHE_DIR_NAME
        self.settings = settings

    def entry_path(self, display: str) -> Path:
        slot = slot_name(display, self.settings)
        return self.directory / "files" / slot[:2] / f"{slot}.json"

    def load(self, display: str, data: bytes) -> FileResult | None:
        try:
            with open(self.entry_path(display), encoding="utf-8") as handle:
                entry = json.load(handle)
            if entry.get("format") != FORMAT or entry.get("key") != content_key(data, display, self.settings):
                return None
            return FileResult.from_dict(entry["result"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def store(self, display: str, data: bytes, result: FileResult) -> None:
        entry = {"format": FORMAT, "key": content_key(data, display, self.settings), "result": result.to_dict()}
        try:
            self.prepare()
            write_atomically(self.entry_path(display), json.dumps(entry, separators=(",", ":")))
        except (OSError, ValueError, TypeError):
            pass

    def prepare(self) -> None:
        """Create the cache directory with its .gitignore and CACHEDIR.TAG (once)."""
        if (self.directory / "CACHEDIR.TAG").is_file():
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        write_atomically(self.directory / ".gitignore", "# Automatically created by reslint.\n*\n")
        write_atomically(self.directory / "CACHEDIR.TAG", CACHEDIR_TAG)


def current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.chmod(temporary, 0o666 & ~current_umask())  # mkstemp's 0600 would differ from other files
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
