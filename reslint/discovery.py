"""Turn the paths given to `reslint check` into the sorted list of Python files to analyse."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Iterable

from reslint.errors import ReslintError

PYTHON_SUFFIXES = (".py", ".pyi")

SKIPPED_DIR_NAMES = frozenset({
    ".git", ".hg", ".svn", ".venv", "venv", "__pycache__", "build", "dist", "node_modules",
    ".tox", ".nox", ".eggs", "site-packages", ".mypy_cache", ".pytest_cache", ".ruff_cache",
    ".reslint_cache",
})
SKIPPED_DIR_GLOBS = ("*.egg-info",)


class DiscoveryError(ReslintError):
    """A path given on the command line does not exist (a usage error)."""


@dataclass(frozen=True)
class SourceFile:
    path: str  # absolute, as given (symlinks kept), OS separators
    display: str  # what findings show: relative to the cwd when under it, forward slashes
    relative: str  # relative to the project root (settings.root), forward slashes; for globs


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
    """Whether a project-relative path matches an exclude / per-file-ignores glob.

    Like ruff's `exclude`: a pattern without a slash (`generated`, `*_pb2.py`) matches any
    path component; a pattern with one (`legacy/*.py`, `src/old`) matches the path relative to
    the project root or one of its parent directories. `*` and `?` stay within one component,
    `**` spans any number of them.
    """
    pattern = pattern.strip().replace("\\", "/")
    while pattern.startswith("./"):
        pattern = pattern[2:]
    pattern = pattern.rstrip("/")
    if not pattern:
        return False
    parts = PurePosixPath(relative).parts
    if "/" not in pattern:
        return any(fnmatchcase(part, pattern) for part in parts)
    regex = glob_regex(pattern)
    return any(regex.fullmatch("/".join(parts[:end])) for end in range(len(parts), 0, -1))


@lru_cache(maxsize=256)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """Translate a path glob: `**/` any directories, `**` anything, `*`/`?` within a component."""
    out, index = [], 0
    while index < len(pattern):
        if pattern.startswith("**/", index):
            out.append("(?:.*/)?")
            index += 3
        elif pattern.startswith("**", index):
            out.append(".*")
            index += 2
        elif pattern[index] == "*":
            out.append("[^/]*")
            index += 1
        elif pattern[index] == "?":
            out.append("[^/]")
            index += 1
        elif pattern[index] == "[" and "]" in pattern[index + 2:]:
            end = pattern.index("]", index + 2)
            body = pattern[index + 1:end]
            negate = body.startswith("!")
            body = body[1:] if negate else body
            out.append("[" + ("^" if negate else "") + body.replace("\\", "\\\\") + "]")
            index = end + 1
        else:
            out.append(re.escape(pattern[index]))
            index += 1
    return re.compile("".join(out))


def is_excluded(relative: str, patterns: Iterable[str]) -> bool:
    return any(matches_glob(relative, pattern) for pattern in patterns)


def is_skipped_dir(directory: Path) -> bool:
    name = directory.name
    if name in SKIPPED_DIR_NAMES or any(fnmatchcase(name, glob) for glob in SKIPPED_DIR_GLOBS):
        return True
    return (directory / "pyvenv.cfg").is_file()


def walk_python_files(directory: Path, root: str, exclude: tuple[str, ...]) -> Iterable[Path]:
    for current, dirnames, filenames in os.walk(directory):
        current_path = Path(current)
        kept = []
        for name in sorted(dirnames):
            child = current_path / name
            if is_skipped_dir(child) or is_excluded(root_relative(str(child), root), exclude):
                continue
            kept.append(name)
        dirnames[:] = kept
        for name in sorted(filenames):
            if name.endswith(PYTHON_SUFFIXES):
                yield current_path / name


def discover(
    paths: Iterable[str],
    root: str,
    exclude: tuple[str, ...] = (),
    cwd: str | None = None,
) -> list[SourceFile]:
    """Expand files and directories to the Python files to check, sorted by display path.

    Directories are walked, skipping VCS metadata, virtualenvs, caches and build outputs.
    A file named explicitly is checked whatever its suffix (pre-commit passes extensionless
    scripts with a python shebang), but the config's `exclude` applies to it too.
    Raises DiscoveryError for a path that does not exist.
    """
    base = os.path.abspath(cwd if cwd is not None else os.getcwd())
    found: dict[str, SourceFile] = {}
    for raw in paths:
        given = Path(base, raw)
        if not given.exists():
            raise DiscoveryError(f"path does not exist: {raw}")
        given_abs = os.path.abspath(given)
        if is_excluded(root_relative(given_abs, root), exclude):
            continue
        candidates = [Path(given_abs)] if given.is_file() else walk_python_files(Path(given_abs), root, exclude)
        for candidate in candidates:
            absolute = os.path.abspath(candidate)
            relative = root_relative(absolute, root)
            key = os.path.normcase(os.path.realpath(absolute))
            if key in found or is_excluded(relative, exclude):
                continue
            found[key] = SourceFile(path=absolute, display=display_path(absolute, base), relative=relative)
    return sorted(found.values(), key=lambda source: source.display)
