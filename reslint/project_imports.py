"""Which files of the project a Python file imports, found by reading the code (nothing is run).

`project_dependencies(path, root)` follows `import a.b`, `from a.b import c` (where `c` may be a
module), relative imports (`from .x import y`, `from .. import z`) and a script's imports of its
neighbours (`from model import GPT` next to `train.py`), transitively, and keeps the files under
`root`. Names resolve the way `reslint check` imports a file for tracing (reslint.trace.loader):
against, in order, the directory above the file's package when it lies in one, the file's own
directory, and the project root. Importing a module of a package runs the package's
`__init__.py` files, so they count too.

Uses: the trace cache (a traced result is stale when the file or anything it imports from the
project changes) and linking training scripts to the model files they build.

Like every static reading it over-approximates and cannot see dynamic imports: every import
statement counts wherever it is (inside a function, under `if TYPE_CHECKING:`, in a `try:`),
and `importlib.import_module(name)` or `__import__` with a computed name is not followed.
"""

from __future__ import annotations

import ast
import os
import warnings
from collections import deque
from dataclasses import dataclass
from pathlib import Path

__all__ = ["project_dependencies"]


def project_dependencies(path: str | os.PathLike, root: str | os.PathLike) -> list[Path]:
    """The project files `path` imports, directly or through other project files.

    Returns absolute paths of existing files under `root`, sorted, without `path` itself. A file
    that cannot be read or parsed is listed (when it is imported) but its own imports are not
    followed. Never raises for problems of the code being read.
    """
    entry = Path(os.path.abspath(path))
    project = Path(os.path.abspath(root))
    resolver = _Resolver(_search_path(entry, project), project)
    found: set[Path] = set()
    queue: deque[Path] = deque([entry])
    queue.extend(_enclosing_package_inits(entry))
    seen: set[Path] = {entry}
    while queue:
        current = queue.popleft()
        if current != entry:
            found.add(current)
        for dependency in resolver.imports_of(current):
            if dependency not in seen:
                seen.add(dependency)
                queue.append(dependency)
    return sorted(dependency for dependency in found if _is_under(dependency, project))


@dataclass(frozen=True)
class _Import:
    module: str  # dotted name, "" for `from . import x`
    level: int  # 0 absolute, 1 for `.`, 2 for `..`
    names: tuple[str, ...]  # the names of `from module import a, b` (possible submodules); () for `import`


def _search_path(entry: Path, root: Path) -> list[Path]:
    directory = entry.parent
    entries = []
    base = _package_base(directory)
    if base is not None:
        entries.append(base)
    entries += [directory, root]
    return list(dict.fromkeys(entries))


def _package_base(directory: Path) -> Path | None:
    """The directory above the outermost package containing `directory`, or None outside packages."""
    if not (directory / "__init__.py").is_file():
        return None
    while (directory / "__init__.py").is_file() and directory.parent != directory:
        directory = directory.parent
    return directory


def _enclosing_package_inits(entry: Path) -> list[Path]:
    inits = []
    directory = entry.parent
    while (directory / "__init__.py").is_file() and directory.parent != directory:
        init = directory / "__init__.py"
        if init != entry:
            inits.append(init)
        directory = directory.parent
    return inits


def _is_under(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
    except ValueError:
        return False
    return True


def _read_imports(path: Path) -> list[_Import]:
    from reslint.file_gate import MAX_SOURCE_BYTES, read_project_file

    try:
        source = read_project_file(path, None, MAX_SOURCE_BYTES)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarnings of the code read are not ours to show
            tree = ast.parse(source, filename=str(path))
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    imports = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imports.extend(_Import(alias.name, 0, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names = tuple(alias.name for alias in node.names if alias.name != "*")
            imports.append(_Import(node.module or "", node.level or 0, names))
    return imports


class _Resolver:
    def __init__(self, search_path: list[Path], root: Path):
        self.search_path = search_path
        self.root = root
        self._imports: dict[Path, list[Path]] = {}

    def imports_of(self, path: Path) -> list[Path]:
        if path not in self._imports:
            files: list[Path] = []
            if _is_under(path, self.root):  # a file outside the project is listed by nobody, nor followed
                for item in _read_imports(path):
                    files.extend(self._files_for(item, path))
            self._imports[path] = list(dict.fromkeys(files))
        return self._imports[path]

    def _files_for(self, item: _Import, importer: Path) -> list[Path]:
        if item.level:
            base = importer.parent
            for _ in range(item.level - 1):
                base = base.parent
            resolved = _walk(base, item.module.split(".") if item.module else [])
        else:
            resolved = next((found for directory in self.search_path
                             if (found := _walk(directory, item.module.split("."))) is not None), None)
        if resolved is None:
            return []
        files, package = resolved
        if package is not None:
            for name in item.names:  # `from package import submodule`
                module = _module_file(package, name)
                if module is not None:
                    files.append(module)
        return files


def _walk(directory: Path, parts: list[str]) -> tuple[list[Path], Path | None] | None:
    """What importing the dotted `parts` from `directory` runs: the package __init__ files on the way
    and the module itself, and the package directory when the name is a package (None for a module).
    None when the name does not resolve there."""
    files: list[Path] = []
    for index, part in enumerate(parts):
        if not part.isidentifier():
            return None
        package = directory / part
        if (package / "__init__.py").is_file():
            files.append(package / "__init__.py")
            directory = package
        elif index == len(parts) - 1 and (directory / f"{part}.py").is_file():
            files.append(directory / f"{part}.py")
            return files, None
        elif package.is_dir():
            directory = package  # a namespace package: nothing runs
        else:
            return None
    return files, directory


def _module_file(directory: Path, name: str) -> Path | None:
    if not name.isidentifier():
        return None
    if (directory / name / "__init__.py").is_file():
        return directory / name / "__init__.py"
    if (directory / f"{name}.py").is_file():
        return directory / f"{name}.py"
    return None
