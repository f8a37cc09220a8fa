"""Turn the paths given to `reslint check` into the sorted list of Python files to analyse."""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath
from typing import Iterable

from reslint.errors import ReslintError
from reslint.globs import GlobError, glob_matches

PYTHON_SUFFIXES = (".py", ".pyi")

SKIPPED_DIR_NAMES = frozenset({
    ".git", ".hg", ".svn", ".venv", "venv", "__pycache__", "build", "dist", "node_modules",
    ".tox", ".nox", ".eggs", "site-packages", ".mypy_cache", ".pytest_cache", ".ruff_cache",
    ".reslint_cache",
})
SKIPPED_DIR_GLOBS = ("*.egg-info",)
# Skipped without a word: they never hold source to check.
NO_SOURCE_DIR_NAMES = frozenset({
    ".git", ".hg", ".svn", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".reslint_cache",
})

# Why a path was not checked; the summary counts them, so that no file is skipped silently.
EXCLUDED = "excluded"
TOOL_DIRECTORY = "virtualenv or build directory"
SYMLINKED_DIRECTORY = "symlinked directory"
UNREADABLE_DIRECTORY = "unreadable directory"
SPECIAL_FILE = "not a regular file"  # a FIFO or device named *.py: reading it could block forever
# `--fix` traces the fixed text in a sibling file; a run killed meanwhile (a CI timeout) leaves it behind.
FIX_TEMPORARY = "reslint's temporary file, left by an interrupted --fix"
FIX_TEMPORARY_PREFIX = ".reslint-fix-"


class DiscoveryError(ReslintError):
    """A path given on the command line does not exist (a usage error)."""


@dataclass(frozen=True)
class SourceFile:
    path: str  # absolute, as given (symlinks kept), OS separators
    display: str  # what findings show: relative to the cwd when under it, forward slashes
    relative: str  # relative to the project root (settings.root), forward slashes; for globs


@dataclass(frozen=True)
class Skipped:
    display: str  # as SourceFile.display
    reason: str  # one of the reasons above
    directory: bool


@dataclass
class Discovery:
    sources: list[SourceFile] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


def display_path(path: str | os.PathLike, cwd: str | os.PathLike | None = None) -> str:
    """`path` relative to `cwd` when it lies under it, else absolute; always with forward slashes."""
    absolute = os.path.abspath(path)
    base = os.path.abspath(cwd if cwd is not None else os.getcwd())
    try:
        relative = os.path.relpath(absolute, base)
    except ValueError:  # another drive on Windows
        return Path(absolute).as_posix()
    if relative == os.curdir:
        return "."
    if relative == os.pardir or relative.startswith(os.pardir + os.sep):
        return Path(absolute).as_posix()
    return Path(relative).as_posix()


def root_relative(path: str, root: str) -> str:
    try:
        return Path(os.path.relpath(os.path.abspath(path), os.path.abspath(root))).as_posix()
    except ValueError:
        return Path(os.path.abspath(path)).as_posix()


def matches_glob(relative: str, pattern: str) -> bool:
    """Whether a project-relative path matches an exclude / per-file-ignores glob (in linear time).

    Like ruff's `exclude`: a pattern without a slash (`generated`, `*_pb2.py`) matches any
    path component; a pattern with one (`legacy/*.py`, `src/old`) matches the path relative to
    the project root or one of its parent directories. `*` and `?` stay within one component,
    `**` spans any number of them. An invalid pattern (`[z-a]`) matches nothing; the config
    rejects it when it is read.
    """
    pattern = pattern.strip().replace("\\", "/")
    while pattern.startswith("./"):
        pattern = pattern[2:]
    pattern = pattern.rstrip("/")
    if not pattern:
        return False
    parts = PurePosixPath(relative).parts
    try:
        if "/" not in pattern:
            return any(glob_matches(pattern, part) for part in parts)
        return any(glob_matches(pattern, "/".join(parts[:end])) for end in range(len(parts), 0, -1))
    except GlobError:
        return False


def is_excluded(relative: str, patterns: Iterable[str]) -> bool:
    return any(matches_glob(relative, pattern) for pattern in patterns)


def is_skipped_dir(directory: Path) -> bool:
    name = directory.name
    if name in SKIPPED_DIR_NAMES or any(fnmatchcase(name, glob) for glob in SKIPPED_DIR_GLOBS):
        return True
    return os.path.isfile(directory / "pyvenv.cfg")  # os.path: False, not PermissionError, when unreadable


def walk_python_files(directory: Path, root: str, exclude: tuple[str, ...], skip) -> Iterable[Path]:
    """The Python files under `directory`; `skip(path, reason)` hears of every directory not entered."""

    def unreadable(error: OSError) -> None:
        skip(error.filename or directory, UNREADABLE_DIRECTORY)

    for current, dirnames, filenames in os.walk(directory, onerror=unreadable):
        current_path = Path(current)
        kept = []
        for name in sorted(dirnames):
            child = current_path / name
            if name in NO_SOURCE_DIR_NAMES:
                continue
            if is_skipped_dir(child):
                skip(child, TOOL_DIRECTORY)
            elif is_excluded(root_relative(str(child), root), exclude):
                skip(child, EXCLUDED)
            elif os.path.islink(child):  # os.walk does not follow them: no loops, no file seen twice
                skip(child, SYMLINKED_DIRECTORY)
            else:
                kept.append(name)
        dirnames[:] = kept
        for name in sorted(filenames):
            if not name.endswith(PYTHON_SUFFIXES):
                continue
            if is_fix_temporary(name):
                skip(current_path / name, FIX_TEMPORARY, False)
            elif is_special_file(current_path / name):
                skip(current_path / name, SPECIAL_FILE, False)
            else:
                yield current_path / name


def is_fix_temporary(name: str) -> bool:
    return name.startswith(FIX_TEMPORARY_PREFIX)


def is_special_file(path: Path) -> bool:
    """Neither a regular file nor a broken symlink (which is reported as unreadable when read)."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def discover(
    paths: Iterable[str],
    root: str,
    exclude: tuple[str, ...] = (),
    cwd: str | None = None,
) -> list[SourceFile]:
    """The Python files to check, sorted by display path (see `find_sources`)."""
    return find_sources(paths, root, exclude, cwd).sources


def find_sources(
    paths: Iterable[str],
    root: str,
    exclude: tuple[str, ...] = (),
    cwd: str | None = None,
) -> Discovery:
    """Expand files and directories to the Python files to check, sorted by display path,
    and the paths skipped on the way, with the reason.

    Directories are walked, skipping VCS metadata, virtualenvs, caches and build outputs;
    symlinked directories are not followed. A file named explicitly is checked whatever its
    suffix (pre-commit passes extensionless scripts with a python shebang), but the config's
    `exclude` applies to it too. Raises DiscoveryError for a path that does not exist.
    """
    base = os.path.abspath(cwd if cwd is not None else os.getcwd())
    found: dict[str, SourceFile] = {}
    skipped: dict[str, Skipped] = {}

    def skip(path: str | os.PathLike, reason: str, directory: bool = True) -> None:
        shown = display_path(path, base)
        skipped.setdefault(shown, Skipped(shown, reason, directory))

    for raw in paths:
        given = Path(base, raw)
        check_exists(given, raw)
        given_abs = os.path.abspath(given)
        if is_excluded(root_relative(given_abs, root), exclude):
            skip(given_abs, EXCLUDED, os.path.isdir(given))
            continue
        candidates = walk_python_files(Path(given_abs), root, exclude, skip) if os.path.isdir(given) else [Path(given_abs)]
        for candidate in candidates:
            absolute = os.path.abspath(candidate)
            relative = root_relative(absolute, root)
            key = os.path.normcase(os.path.realpath(absolute))
            if key in found:
                continue
            if is_excluded(relative, exclude):
                skip(absolute, EXCLUDED, False)
                continue
            found[key] = SourceFile(path=absolute, display=display_path(absolute, base), relative=relative)
    return Discovery(
        sources=sorted(found.values(), key=lambda source: source.display),
        skipped=sorted(skipped.values(), key=lambda entry: entry.display),
    )


def check_exists(given: Path, raw: str) -> None:
    """Raise DiscoveryError, with the reason in words, for a path that cannot be checked."""
    try:
        os.stat(given)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise DiscoveryError(f"symbolic link loop: {raw}") from None
        if os.path.islink(given):
            raise DiscoveryError(f"broken symbolic link: {raw} (its target does not exist)") from None
        if error.errno in (errno.ENOENT, errno.ENOTDIR):
            raise DiscoveryError(f"path does not exist: {raw}") from None
        raise DiscoveryError(f"cannot access {raw}: {error.strerror or error}") from None
    if not (os.path.isdir(given) or os.path.isfile(given)):
        raise DiscoveryError(f"not a regular file or directory: {raw}")
