"""Per-file result cache under `<root>/.reslint_cache/`.

One entry per (display path, settings, version), overwritten when the file changes, so the
cache does not grow with every edit. The entry stores the full key and is used only when that
key matches. The key covers everything a file's result depends on:

- the file's bytes and its display path (findings name it);
- reslint itself: its version, and the size and mtime of its own source files, so that a
  development checkout never reuses results of older code;
- the settings that change results (Settings.cache_key: rule selection, policies, `train`
  globs, and in the full check the model specs, inputs and timeout);
- in the full check, the torch version, and, when the trace engine imported the file, the
  bytes of every project file it imports (reslint.project_index), checked again at each load.

The cached value is the FileResult before suppressions and filters, which are cheap and
re-applied each run. Any I/O or decoding problem is treated as a miss: the cache must never
break a check.

The cache lies in the checked tree, which may come from a stranger: an entry is trusted only
when it carries an HMAC made with a secret kept in the user's own cache directory
(`$XDG_CACHE_HOME/reslint/cache-key`), so a committed or forged entry is a miss. A cache
directory that is a symlink, or resolves outside the project, is neither read nor written,
and entries are read through the file gate (a regular file of bounded size).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
import sys
import tempfile
from pathlib import Path

from reslint.findings import FileResult
from reslint.settings import Settings
from reslint.version import __version__

CACHE_DIR_NAME = ".reslint_cache"
CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by reslint.\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)
FORMAT = 4  # 3: file results carry their cross-file links (RL301); 4: entries carry an HMAC
SECRET_BYTES = 32


def content_key(data: bytes, display: str, settings: Settings) -> str:
    return digest_of(engine_fingerprint(settings), settings.cache_key(), display, data)


def slot_name(display: str, settings: Settings) -> str:
    return digest_of(__version__, settings.cache_key(), display)


def digest_of(*parts: str | bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        raw = part.encode("utf-8", "surrogatepass") if isinstance(part, str) else part
        digest.update(len(raw).to_bytes(8, "little"))
        digest.update(raw)
    return digest.hexdigest()


@functools.lru_cache(maxsize=None)
def reslint_fingerprint() -> str:
    """reslint's version and the size and mtime of each of its source files."""
    package = Path(__file__).parent
    stats = []
    for path in sorted(package.rglob("*.py")):
        try:
            stat = path.stat()
        except OSError:
            continue
        stats.append(f"{path.relative_to(package).as_posix()}:{stat.st_size}:{stat.st_mtime_ns}")
    return digest_of(__version__, *stats)


def engine_fingerprint(settings: Settings) -> str:
    if settings.static:
        return reslint_fingerprint()
    torch = sys.modules.get("torch")  # the full check imported it before any file was analysed
    return reslint_fingerprint() + " torch " + str(getattr(torch, "__version__", None))


def imports_digest(path: str, root: str | os.PathLike) -> str:
    """A digest of the project files `path` imports: their paths and bytes."""
    from reslint.file_gate import MAX_SOURCE_BYTES, read_project_file
    from reslint.project_index import ProjectIndex

    parts: list[str | bytes] = []
    for dependency in ProjectIndex.for_file(path, root).dependencies(path):
        try:
            contents = read_project_file(dependency, root, MAX_SOURCE_BYTES)
        except OSError:
            contents = b"<unreadable>"
        parts += [str(dependency), contents]
    return digest_of(*parts)


def reads_digest(paths: list[str]) -> str:
    """A digest of the other files the static engine read for a result: their paths and bytes."""
    from reslint.file_gate import MAX_SOURCE_BYTES, read_project_file

    parts: list[str | bytes] = []
    for path in paths:
        try:
            contents = read_project_file(path, None, MAX_SOURCE_BYTES)
        except OSError:
            contents = b"<unreadable>"
        parts += [path, contents]
    return digest_of(*parts)


class FileCache:
    def __init__(self, root: str | os.PathLike, settings: Settings, section: str = "files"):
        self.root = os.fspath(root)
        self.directory = Path(root) / CACHE_DIR_NAME
        self.settings = settings
        self.section = section  # "files": the checked files' results; "fixes": re-checks of candidate fixes

    def entry_path(self, display: str) -> Path:
        slot = slot_name(display, self.settings)
        return self.directory / self.section / slot[:2] / f"{slot}.json"

    def load(self, display: str, data: bytes, path: str) -> FileResult | None:
        """The stored result of the file `path` (shown as `display`) with these bytes, if still valid."""
        from reslint.file_gate import MAX_CACHE_ENTRY_BYTES, read_project_file

        secret = cache_secret()
        entry_path = self.entry_path(display)
        if secret is None or not self.stays_inside(entry_path):
            return None
        try:
            entry = json.loads(read_project_file(entry_path, self.root, MAX_CACHE_ENTRY_BYTES))
            payload = entry["payload"]
            if entry.get("format") != FORMAT or not hmac.compare_digest(str(entry["mac"]), sign(secret, payload)):
                return None
            body = json.loads(payload)
            if body.get("key") != content_key(data, display, self.settings):
                return None
            imports = body.get("imports")
            if imports is not None and imports != imports_digest(path, self.root):
                return None
            reads = body.get("reads") or {}
            if reads and reads.get("digest") != reads_digest(reads.get("paths", [])):
                return None
            result = FileResult.from_dict(body["result"])
            result.imported = imports is not None
            result.reads = list(reads.get("paths", []))
            return result
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def store(self, display: str, data: bytes, path: str, result: FileResult) -> None:
        secret = cache_secret()
        entry_path = self.entry_path(display)
        if secret is None or not self.stays_inside(entry_path):
            return
        try:
            payload = json.dumps({
                "key": content_key(data, display, self.settings),
                "imports": imports_digest(path, self.root) if result.imported else None,
                "reads": {"paths": result.reads, "digest": reads_digest(result.reads)} if result.reads else None,
                "result": result.to_dict(),
            }, separators=(",", ":"))
            entry = {"format": FORMAT, "mac": sign(secret, payload), "payload": payload}
            self.prepare()
            if self.stays_inside(entry_path):  # checked again: prepare created the directories
                write_atomically(entry_path, json.dumps(entry, separators=(",", ":")))
        except (OSError, ValueError, TypeError):
            pass

    def stays_inside(self, path: Path) -> bool:
        """Whether `path` (in the cache directory) resolves to itself: no component of it below the
        project root is a symlink, so a committed `.reslint_cache -> ..` cannot send writes elsewhere."""
        root = os.path.realpath(self.root)
        relative = path.relative_to(self.directory)
        return os.path.realpath(path.parent) == os.path.join(root, CACHE_DIR_NAME, *relative.parts[:-1]) \
            and not os.path.islink(path)

    def prepare(self) -> None:
        """Create the cache directory with its .gitignore and CACHEDIR.TAG (once)."""
        if not self.stays_inside(self.directory / "CACHEDIR.TAG"):
            raise OSError("the cache directory leaves the project")
        if (self.directory / "CACHEDIR.TAG").is_file():
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        write_atomically(self.directory / ".gitignore", "# Automatically created by reslint.\n*\n")
        write_atomically(self.directory / "CACHEDIR.TAG", CACHEDIR_TAG)


def sign(secret: bytes, payload: str) -> str:
    return hmac.new(secret, payload.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def user_cache_home() -> Path:
    configured = os.environ.get("XDG_CACHE_HOME")
    if configured and os.path.isabs(configured):
        return Path(configured) / "reslint"
    return Path.home() / ".cache" / "reslint"


@functools.lru_cache(maxsize=None)
def cache_secret() -> bytes | None:
    """This installation's cache secret, created on first use; None (no caching) when it cannot be."""
    path = user_cache_home() / "cache-key"
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(os.urandom(SECRET_BYTES))
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(descriptor, "rb") as handle:
            secret = handle.read(SECRET_BYTES + 1)
    except (OSError, RuntimeError):  # RuntimeError: Path.home() without a home directory
        return None
    return secret if len(secret) == SECRET_BYTES else None


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


def cache_directories(cwd: str | os.PathLike) -> list[Path]:
    """The caches `reslint clean` removes: the project root's (where `reslint check` run here writes)
    and any below `cwd`, where checks run from subdirectories without a config wrote theirs."""
    from reslint.config import ConfigError, find_config
    from reslint.discovery import is_skipped_dir

    start = Path(os.path.abspath(cwd))
    try:
        config = find_config(start)
    except ConfigError:  # a broken pyproject.toml must not keep a cache from being removed
        config = None
    found = [(config.parent if config is not None else start) / CACHE_DIR_NAME]
    for current, dirnames, _ in os.walk(start):
        here = Path(current)
        if CACHE_DIR_NAME in dirnames:
            found.append(here / CACHE_DIR_NAME)
        dirnames[:] = sorted(name for name in dirnames if not is_skipped_dir(here / name))
    return [directory for directory in dict.fromkeys(found) if directory.is_dir() and not directory.is_symlink()]
