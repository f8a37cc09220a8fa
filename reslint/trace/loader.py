"""Import a checked file by path, under a unique module name, and undo the import's side effects.

`sys.path` is set the way the project runs (`reslint.project_index.search_path`, the one resolver
the static engine and the cache use too): the directory above the file's package, the file's
directory, the project root (pyproject.toml/setup.cfg/.git) and the configured root, and their
`src/`, so a model file in a subfolder can `from utils import ...` a package at the repository
root. They are on `sys.path` only while the file is loaded, built and traced; the modules the file
pulled in from the project are dropped from `sys.modules` afterwards, so two checked files with a
sibling `config.py` each see their own.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.abc
import importlib.util
import os
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType, TracebackType

from reslint.file_gate import overlay
from reslint.project_index import INSTALL_DIRECTORIES, module_name, project_root, search_path


class TraceTimeout(BaseException):
    """Raised by the alarm handler when building or tracing one model takes too long.

    A BaseException so that user code's `except Exception` cannot swallow it.
    """


@dataclass(frozen=True)
class UserError:
    """An exception from the user's code, located in the checked file."""

    line: int
    message: str  # "ValueError: bad width" (one line)
    raised_here: bool  # the exception was raised by a frame of the checked file itself


def same_file(first: str, second: str) -> bool:
    return os.path.normcase(os.path.abspath(first)) == os.path.normcase(os.path.abspath(second))


def one_line(error: BaseException, limit: int = 300) -> str:
    """`Type: first line of the message`, short enough for a finding."""
    text = str(error).strip()
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if len(first) > limit:
        first = first[: limit - 3] + "..."
    name = type(error).__name__
    return f"{name}: {first}" if first else name


def frames(tb: TracebackType | None) -> list[traceback.FrameSummary]:
    return list(traceback.extract_tb(tb)) if tb is not None else []


def exception_chain(error: BaseException) -> list[BaseException]:
    chain, seen = [], set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def locate(error: BaseException, path: str) -> UserError | None:
    """The deepest frame of `path` in the traceback of `error` or of the exceptions it wraps."""
    best: UserError | None = None
    for link in exception_chain(error):
        stack = frames(link.__traceback__)
        if isinstance(link, SyntaxError) and link.filename and same_file(link.filename, path):
            return UserError(link.lineno or 1, one_line(link), True)
        for index in range(len(stack) - 1, -1, -1):
            if same_file(stack[index].filename, path):
                found = UserError(stack[index].lineno or 1, one_line(link), index == len(stack) - 1)
                if best is None or (found.raised_here and not best.raised_here):
                    best = found
                break
    return best


def module_name_for(path: str) -> str:
    digest = hashlib.sha1(os.path.abspath(path).encode("utf-8", "surrogatepass")).hexdigest()[:12]
    stem = "".join(ch if ch.isalnum() else "_" for ch in os.path.splitext(os.path.basename(path))[0])
    return f"_reslint_trace_{digest}_{stem}"


RESLINT_DIR = os.path.normcase(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ImportFailed(Exception):
    def __init__(self, line: int, message: str):
        super().__init__(message)
        self.line = line
        self.message = message


def is_project_module(module: object, directories: tuple[str, ...]) -> bool:
    filename = getattr(module, "__file__", None)
    if not filename:
        return False
    absolute = os.path.normcase(os.path.abspath(filename))
    if "site-packages" in absolute or "dist-packages" in absolute or absolute.startswith(RESLINT_DIR + os.sep):
        return False
    return any(absolute.startswith(directory + os.sep) for directory in directories)


class TextLoader(importlib.abc.SourceLoader):
    """Loads a module from the text given, as the file `path` (its frames, `__file__` and relative
    imports are the file's); no bytecode is read or written."""

    def __init__(self, path: str, data: bytes):
        self.path = path
        self.data = data

    def get_filename(self, fullname: str) -> str:
        return self.path

    def get_data(self, path: str) -> bytes:
        return self.data


def module_from_text(name: str, path: str, data: bytes) -> ModuleType:
    """Import `data` as the module `name` at `path`: its package is imported first, as an import would."""
    parent = name.rpartition(".")[0]
    if parent:
        importlib.import_module(parent)
    spec = importlib.util.spec_from_file_location(name, path, loader=TextLoader(path, data))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    if parent:  # as the import system does: the package knows its submodule
        setattr(sys.modules[parent], name.rpartition(".")[2], module)
    return module


def inside_installed_package(entry: os.PathLike) -> bool:
    """A folder inside an installed package (`site-packages/torch_geometric`): on sys.path its subpackages would
    shadow the standard library (torch_geometric's `profile` package hid the `profile` module cProfile imports);
    an installed package imports itself by dotted names from site-packages."""
    parts = os.path.normcase(os.path.abspath(entry)).split(os.sep)
    return any(part in INSTALL_DIRECTORIES for part in parts[:-1])


@contextlib.contextmanager
def loaded_module(path: str, root: str) -> Iterator[ModuleType]:
    """Import `path` for the duration of the block; raises ImportFailed (line, one-line message).

    sys.path and sys.modules are restored when the block ends, whatever happens in it.
    """
    path = os.path.abspath(path)
    directory = os.path.dirname(path)
    entries = [str(entry) for entry in search_path(path, root) if not inside_installed_package(entry)]
    roots = tuple(dict.fromkeys(os.path.normcase(entry) for entry in
                                (directory, os.path.abspath(root), str(project_root(path, root)))))
    saved_path = list(sys.path)
    saved_modules = set(sys.modules)
    saved_argv = list(sys.argv)
    package = module_name(path)
    name = package[0] if package else module_name_for(path)
    try:
        # In the resolver's order, ahead of what is there already: a package's parent directory that is
        # on sys.path anyway must still come before the file's own folder, or `pkg/pkg.py` shadows `pkg`.
        sys.path[:] = entries + [entry for entry in sys.path if entry not in entries]
        sys.argv = [path]
        try:
            text = overlay(path)
            if text is not None:  # a fix being checked: its text, as the file, never written (file_gate.overlaid)
                module = module_from_text(name, path, text)
            elif package:
                # A module of a package: its relative imports need its real dotted name.
                module = importlib.import_module(name)
                if not same_file(getattr(module, "__file__", "") or "", path):
                    raise ImportError(f"{name} resolves to {module.__file__}, not the checked file")
            else:
                spec = importlib.util.spec_from_file_location(name, path)
                if spec is None or spec.loader is None:
                    raise ImportFailed(1, f"cannot import {os.path.basename(path)}")
                module = importlib.util.module_from_spec(spec)
                sys.modules[name] = module  # dataclasses and pickling look the module up while it runs
                spec.loader.exec_module(module)
        except (TraceTimeout, KeyboardInterrupt, ImportFailed):
            raise
        except BaseException as error:  # noqa: BLE001 - SystemExit too: a script's exit must not end the run
            where = locate(error, path)
            line = where.line if where else 1
            raise ImportFailed(line, f"importing the file failed: {one_line(error)}") from None
        finally:
            sys.argv = saved_argv
        yield module
    finally:
        sys.path[:] = saved_path
        for added in set(sys.modules) - saved_modules:
            if added == name or is_project_module(sys.modules.get(added), roots):
                sys.modules.pop(added, None)
