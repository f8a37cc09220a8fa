"""The project index: the files of the checked project, read once, and the one import resolver.

Every place that needs another file of the project asks here: the static engine (a config
class's defaults, whether a class is built by a sequence model elsewhere), the project stage
(`reslint.project`: which file a training script's model import names), the trace cache (which
files a traced result depends on) and the trace loader (what goes on `sys.path` while a file
is imported). So they cannot disagree about where `from utils import clones` leads.

Resolution follows how the project runs, never by importing it:

- the project root is the nearest directory above the file with pyproject.toml, setup.cfg,
  setup.py or .git (else the configured root);
- a file's search path is, in order, the directory above the outermost package holding the
  file (`python -m pkg.model`), the file's own directory (`python sub/train.py`), the project
  root and the configured root (`pip install -e .` or running from the root), and their `src/`;
- relative imports start from the importing file's package; `from pkg import Name` follows a
  package `__init__`'s re-exports to the file that defines `Name`.

Files are read lazily and kept per content: an edited file is read again, an unchanged one never.
Nothing here imports or runs the project's code.

Interface: `ProjectIndex.for_file(path, root)` (one index per project root, shared),
`index.resolve(importer, dotted)` -> (file, name), `index.module_file(importer, module, level)`,
`index.file_index(path, FileIndex)` (the libcst `FileIndex` of a file; the static engine passes its classes in, as it sits above this index), `index.dependencies(path)` (the
project files importing `path` runs) and `index.construction_sites(path, class_name)` (where the
project builds a class: for model discovery and for facts that need the classes around a class).
A pool's workers adopt the project-wide scan of import words that construction sites search from a helper
process (`reslint.prebuilt_index`) instead of each reading the whole project.
"""

from __future__ import annotations

import ast
import codecs
import contextlib
import dataclasses
import hashlib
import os
import re
import warnings
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from reslint.static.literals import literal_eval

PROJECT_MARKERS = ("pyproject.toml", "setup.cfg", "setup.py", ".git")
INSTALL_DIRECTORIES = ("site-packages", "dist-packages")
MAX_SCANNED_FILES = 5000  # bound on a project walk (callers of a class): a model project is far smaller
MAX_REEXPORT_HOPS = 8
MAX_FIELD_SEARCH_FILES = 1500  # a config field is searched for across a project this size at most
# What the caches of project files' trees may hold, in bytes of the files' source: an `ast` tree takes some 25
# times its source, a libcst index several times more. Kept for the whole run, the trees of every file a
# construction-site search read grew a static check of transformers' models/ by about 1 MB a file; 4 MB of
# trees still took that check to 330 MB, 2 MB keeps it at 280 MB for 151 more parses (1.2 of its 136 CPU-s).
MAX_CACHED_TREE_SOURCE = 2_000_000
MAX_CACHED_INDEX_SOURCE = 1_500_000
# Outlines and function facts (a few names each) are kept by content for the whole run, and across runs in a
# process that checks again (a library caller, an editor): emptied past this many, far more than one run holds.
MAX_KEPT_BY_CONTENT = 20_000
# Imported classes read for their defaults: configuration objects, by the names they go by.
CONFIG_SUFFIXES = ("Config", "Configuration", "Args", "Arguments", "Options", "Params", "HParams", "Hparams",
                   "Settings")
IMPORT_CLAUSE = re.compile(rb"import[ \t]+(\([^)]*\)|[^\n]*)")  # matched where `import` starts a word
WORD_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
WORD = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")
CODING = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")  # PEP 263's encoding declaration


@dataclass(frozen=True)
class ImportStatement:
    module: str  # dotted, "" for `from . import x`
    level: int  # 0 absolute, 1 for `.`, 2 for `..`
    names: tuple[str, ...]  # `from module import a, b` (a name may be a submodule); () for `import module`
    local_names: tuple[str, ...] = ()  # what each of `names` is called in the file (`import a as b`: "b")


@dataclass(frozen=True)
class Outline:
    """What resolving an imported name needs of a file: the names it defines at its top level, each with the kind
    of its definition (`top_level_definitions`' node type), and its imports. Kept for the run by the file's
    content, after its tree leaves the tree cache: resolving the names of every checked file's classes parsed the
    same few shared modules again and again (340 of the 1,155 parses a static check of transformers' models/
    made)."""

    defined: dict[str, type]
    imports: tuple[ImportStatement, ...]


@dataclass
class ContentStore:
    """What the shared indexes of one project root (`ProjectIndex.for_file`) keep by the content of its files, in
    one place for them all: an index made for another configured root (the training reader's, which resolves against
    the configured root too) reads the same files. Each kept its own before: over transformers' models/ the second
    held 25 trees of 1.3 MB of source to the end (`modeling_utils.py` among them, which the first reads for every
    modeling file), a second budget of trees: the check's peak was 30 MB higher."""

    # tree key -> (the tree, its source's size), the least recently asked first
    trees: OrderedDict[tuple[Path, str], tuple[ast.Module | None, int]] = dataclasses.field(default_factory=OrderedDict)
    tree_source: int = 0  # the bytes of source of the trees held
    tree_keys: dict[Path, tuple[tuple, tuple[Path, str]]] = dataclasses.field(default_factory=dict)  # _unchanged_key
    outlines: dict[tuple[Path, str], Outline] = dataclasses.field(default_factory=dict)  # tree key -> its outline
    function_facts: dict[tuple, object] = dataclasses.field(default_factory=dict)  # see _function_fact


@dataclass(frozen=True)
class ConstructionSite:
    """A call that builds a class: `ConvModule(dim)` in `path`, inside `scope` (a class or function name)."""

    path: Path
    line: int
    scope: str  # the enclosing top-level class or function ("" at module level)
    scope_is_class: bool


def project_root(path: str | os.PathLike, fallback: str | os.PathLike | None = None) -> Path:
    """The nearest directory above `path` that marks a project; `fallback` (or the file's directory) if none."""
    return directory_root(Path(os.path.abspath(path)).parent,
                          Path(os.path.abspath(fallback)) if fallback is not None else None)


@lru_cache(maxsize=1024)
def directory_root(directory: Path, fallback: Path | None) -> Path:
    """`project_root` of the files of `directory` (kept per directory: asked for every file)."""
    for parent in (directory, *directory.parents):
        if parent.parent.name in INSTALL_DIRECTORIES:  # an installed package is its own project
            return parent
    marked = marked_directory(directory)
    if marked is not None:
        return marked
    if fallback is not None:
        return fallback
    base = package_base(directory)  # an installed package: the package itself, not all of site-packages
    return base / directory.relative_to(base).parts[0] if base is not None else directory


@lru_cache(maxsize=1024)
def marked_directory(directory: Path) -> Path | None:
    """`directory` or its nearest parent holding a project marker."""
    if any((directory / marker).exists() for marker in PROJECT_MARKERS):
        return directory
    return None if directory.parent == directory else marked_directory(directory.parent)


def package_base(directory: Path) -> Path | None:
    """The directory above the outermost package containing `directory`, or None outside packages."""
    if not is_package_directory(directory):
        return None
    while is_package_directory(directory) and directory.parent != directory:
        directory = directory.parent
    return directory


def is_package_directory(directory: Path) -> bool:
    """A regular package, or a namespace subpackage of one: a folder without `__init__.py` directly inside a
    regular package imports as its subpackage (fair-esm's `esm/model/`, whose files import `from ..modules`).
    A folder without one elsewhere is no package (every folder would be a namespace package)."""
    return (directory / "__init__.py").is_file() or (directory.parent / "__init__.py").is_file()


def search_path(path: str | os.PathLike, root: str | os.PathLike | None = None) -> list[Path]:
    """Where an absolute import in `path` is looked for, in order (see the module docstring)."""
    file = Path(os.path.abspath(path))
    marked = project_root(file, root)
    entries = []
    base = package_base(file.parent)
    if base is not None:
        entries.append(base)
    roots = [marked] + ([Path(os.path.abspath(root))] if root is not None else [])
    entries += [file.parent, *roots]
    entries += [entry / "src" for entry in roots if (entry / "src").is_dir()]
    return list(dict.fromkeys(entries))


def module_name(path: str | os.PathLike) -> tuple[str, Path] | None:
    """(dotted name, directory to import it from) for a file inside a package; None outside packages."""
    file = Path(os.path.abspath(path))
    base = package_base(file.parent)
    if base is None:
        return None
    parts = list(file.relative_to(base).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    if not parts or not all(part.isidentifier() for part in parts):
        return None
    return ".".join(parts), base


def project_path(path: str | os.PathLike) -> Path:
    """The absolute path the index keys a file by."""
    return Path(os.path.abspath(path))


def is_under(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
    except ValueError:
        return False
    return True


_NOT_WALKED = object()


class ProjectIndex:
    """The files of one project (see the module docstring)."""

    _shared: dict[tuple[Path, Path | None], ProjectIndex] = {}
    _run = 0  # see new_run
    prebuilt = None  # a pool's helper scanning the project for the workers (reslint.prebuilt_index), while it runs

    def __init__(self, root: str | os.PathLike, configured_root: str | os.PathLike | None = None,
                 store: ContentStore | None = None):
        self.root = Path(os.path.abspath(root))
        self.configured_root = configured_root
        store = self._store = store if store is not None else ContentStore()
        self._trees = store.trees  # -> (tree, size)
        # path -> (run, mtime, size, import words or None, whether it spells `add_argument`): see _scanned
        self._import_words: dict[Path, tuple[int, int, int, frozenset[str] | None, bool]] = {}
        self._indexes: OrderedDict[tuple[Path, str], tuple[object, int]] = OrderedDict()  # -> (index, size)
        self._index_source = 0
        self._facts: dict[tuple, object] = {}
        self._files: list[Path] | None = None
        self._positions: dict[Path, int] | None = None  # python_files' file -> its place in the list
        self._importing: tuple[int, dict[str, list[int]]] | None = None  # (run, import word -> places of its files)
        self._importing_among: tuple[tuple, dict[str, list[int]]] | None = None  # see _files_importing_among
        self._lent: tuple[tuple[Path, str], ast.Module] | None = None  # see lent_tree
        self._tree_keys = store.tree_keys  # path -> (what it was when read, tree key)
        self._outlines = store.outlines  # tree key -> the file's outline
        self._function_facts = store.function_facts  # (tree key, function name, reader) -> what the reader found
        # (tree key, name, evaluator class) -> norm_kind's answer: a file whose libcst index left its cache is not
        # parsed again for it
        self._norm_kinds: dict[tuple, str | None] = {}
        self._walks: dict[tuple, tuple[tuple[Path, ...], Path | None] | None] = {}  # see _walk_from
        self._walks_run = ProjectIndex._run

    @classmethod
    def for_file(cls, path: str | os.PathLike, root: str | os.PathLike | None = None) -> ProjectIndex:
        """The shared index of the project `path` belongs to."""
        key = (project_root(path, root), Path(os.path.abspath(root)) if root is not None else None)
        if key not in cls._shared:
            if len(cls._shared) > 64:
                cls._shared.clear()
            store = next((index._store for index in cls._shared.values() if index.root == key[0]), None)
            cls._shared[key] = cls(key[0], root, store)
        return cls._shared[key]

    # ----- reading files (cached per content) ------------------------------------------------

    def source(self, path: Path) -> bytes | None:
        from reslint.file_gate import MAX_SOURCE_BYTES, read_project_file

        try:
            return read_project_file(path, None, MAX_SOURCE_BYTES)
        except (OSError, ValueError):
            return None

    def syntax_tree(self, path: Path) -> ast.Module | None:
        """The file's `ast` tree (cheap next to libcst's): for imports and call sites. A file whose status (times,
        size) has not changed since it was read in this run (`new_run`), under the same overlays, is not read and
        hashed again: the classes of a checked file ask for the same few files a thousand times."""
        seen, key = self._unchanged_key(path)
        if key is not None:
            known = self._trees.get(key)
            if known is not None:
                self._trees.move_to_end(key)
                return known[0]
        key, source = self._read_key(path, seen)
        return self._tree_of(key, source, path) if key is not None else None

    def _read_key(self, path: Path, seen: tuple | None) -> tuple[tuple[Path, str] | None, bytes | None]:
        """(the file's tree key, its source) read from the file now, remembered under its status `seen`."""
        source = self.source(path)
        if source is None:
            return None, None
        key = (path, hashlib.sha1(source).hexdigest())
        if seen is not None:
            self._tree_keys[path] = (seen, key)
        return key, source

    def _tree_of(self, key: tuple[Path, str], source: bytes, path: Path) -> ast.Module | None:
        known = self._trees.get(key)
        if known is not None:
            self._trees.move_to_end(key)
            return known[0]
        lent = self._lent
        tree = lent[1] if lent is not None and lent[0] == key else parse_quietly(source, path)
        self._trees[key] = (tree, len(source))
        store = self._store
        store.tree_source += len(source)
        while store.tree_source > MAX_CACHED_TREE_SOURCE and len(self._trees) > 1:  # the least recently asked go
            dropped, size = self._trees.popitem(last=False)[1]
            store.tree_source -= size
            _named_calls.pop(id(dropped), None)  # they hold the tree too
            _definitions_of.pop(id(dropped), None)
        return tree

    def _unchanged_key(self, path: Path) -> tuple[tuple | None, tuple[Path, str] | None]:
        """(the file's status now, the tree key it was read under when its status is unchanged since, in this run
        and under the same overlays, else None); the status is None when the file cannot be looked at."""
        from reslint.file_gate import overlay_generation

        try:
            status = os.stat(path)
        except OSError:
            return None, None
        seen = (ProjectIndex._run, overlay_generation(), status.st_mtime_ns, status.st_ctime_ns, status.st_size,
                status.st_ino)
        remembered = self._tree_keys.get(path)
        return seen, remembered[1] if remembered is not None and remembered[0] == seen else None

    def outline(self, path: Path) -> Outline | None:
        """The file's top-level names and imports (see `Outline`), None when it does not parse. A file checked
        earlier in the run left its outline (`lent_tree`): it is not parsed again for it."""
        seen, key = self._unchanged_key(path)
        source = None
        if key is None:
            key, source = self._read_key(path, seen)
            if key is None:
                return None
        known = self._outlines.get(key)
        if known is not None:
            return known
        tree = self._tree_of(key, source, path) if source is not None else self.syntax_tree(path)
        if tree is None:
            return None
        return self._keep_outline(key, tree)

    def _keep_outline(self, key: tuple[Path, str], tree: ast.Module) -> Outline:
        # not top_level_definitions: its memo would hold every checked file's tree
        outline = Outline({name: type(node) for name, node in _top_level_definitions(tree).items()},
                          tuple(read_imports(tree)))
        if len(self._outlines) >= MAX_KEPT_BY_CONTENT:
            self._outlines.clear()
        self._outlines[key] = outline
        return outline

    @staticmethod
    def content_key(path: str | os.PathLike, source: bytes) -> tuple[Path, str]:
        """The key the trees, outlines and facts of the file `path` holding `source` are kept under."""
        return Path(os.path.abspath(path)), hashlib.sha1(source).hexdigest()

    def kept_tree(self, key: tuple[Path, str], source: bytes) -> ast.Module | None:
        """The `ast` tree of `source` (its `content_key`), when another file's analysis had it parsed and it is still
        in the tree cache: a file imported by the files checked before it is not parsed again for its own check."""
        if not parses_as_utf8_text(source):
            return None
        known = self._trees.get(key)
        return known[0] if known is not None else None

    @contextlib.contextmanager
    def lent_tree(self, path: str | os.PathLike, source: bytes, tree: ast.Module,
                  key: tuple[Path, str] | None = None) -> Iterator[None]:
        """While the analysis of a file runs: its CPython AST, parsed already, is `syntax_tree`'s for that file
        while the file holds `source` (`key`: its `content_key`, when known). Kept after only if it was asked for,
        as a tree parsed here would be (a construction-site search reads the checked file's own calls); its outline
        is kept (by content) in any case: the files checked after it resolve their imports through it (a tenth of
        the other files' parses)."""
        key = key or self.content_key(path, source)
        self._lent = (key, tree)
        try:
            yield
        finally:
            self._lent = None
            if key not in self._outlines and parses_as_utf8_text(source):
                self._keep_outline(key, tree)

    def imported_words(self, path: Path) -> frozenset[str]:
        """The words of the file's import statements, from its text (a superset of the names it imports;
        cheap enough to ask of every file of a large project, and kept while the file is unchanged)."""
        return self._scanned(path, words=True)[3]

    def _scanned(self, path: Path, words: bool) -> tuple[int, int, int, frozenset[str] | None, bool]:
        """(run, mtime, size, the file's import words or None when not asked for yet, whether it spells
        `add_argument`). A file is looked at once per run (`new_run`): every class of every checked file asks of
        every project file, and a `stat` each time was a tenth of a whole-tree check. Its words are read only when
        asked for: a search for the files declaring arguments reads every file of the project for that alone."""
        known = self._import_words.get(path)
        enough = known is not None and (known[3] is not None or not words)  # it holds what is asked for
        if enough and known[0] == ProjectIndex._run:
            return known
        try:
            status = os.stat(path)
        except OSError:
            return (ProjectIndex._run, 0, 0, frozenset(), False)
        if enough and known[1:3] == (status.st_mtime_ns, status.st_size):
            found, arguments = known[3], known[4]
        else:
            source = self.source(path) or b""
            found = frozenset(word.decode() for clause in import_clauses(source) for word in WORD.findall(clause)) \
                if words else None
            arguments = b"add_argument" in source
        entry = self._import_words[path] = (ProjectIndex._run, status.st_mtime_ns, status.st_size, found, arguments)
        return entry

    @classmethod
    def new_run(cls) -> None:
        """A check starts: files read in an earlier one are looked at again (they may have changed since)."""
        cls._run += 1

    @classmethod
    def current_run(cls) -> int:
        return cls._run

    def shareable_scan(self) -> tuple[list[str], dict[str, tuple], dict[str, list[int]]]:
        """The project's files and their import words, as `files_importing` reads them, for `adopt_scan` in
        another process: (files, file -> (mtime, size, import words, spells `add_argument`), word -> places). Files
        are named by strings, and each file and each word is one object, pickled once: a pickled Path loads several
        times slower than its string and a Path made from it (transformers' 2,951 files: a worker loaded and adopted
        the scan in 42 ms, 29 ms so)."""
        files = self.python_files()
        importing = self.files_importing(files)
        names = {path: str(path) for path in files}
        words: dict[str, str] = {}
        scanned = {}
        for path, (_, mtime, size, found, arguments) in self._import_words.items():
            if found is not None:
                found = frozenset(words.setdefault(word, word) for word in found)
            scanned[names.get(path) or str(path)] = (mtime, size, found, arguments)
        return list(names.values()), scanned, importing

    def adopt_scan(self, files: list[str], scanned: dict[str, tuple], importing: dict[str, list[int]]) -> None:
        """`shareable_scan`'s result, made in this run: as if this index had read the files itself. A file this
        index has already read in this run keeps what it read."""
        run, known = ProjectIndex._run, self._import_words
        paths = {name: Path(name) for name in files}
        for name, (mtime, size, words, arguments) in scanned.items():
            path = paths.get(name) or Path(name)
            entry = known.get(path)
            if entry is None or entry[0] != run or entry[3] is None:
                known[path] = (run, mtime, size, words, arguments)
        self._files = list(paths.values())
        self._importing = (run, importing)

    def imports(self, path: Path) -> list[ImportStatement]:
        """Every import statement of the file, wherever it is (a function, `if TYPE_CHECKING:`, a `try:`)."""
        outline = self.outline(path)  # asked once per class a file may build
        return list(outline.imports) if outline is not None else []

    def imported_configs(self, index, path: str | os.PathLike) -> tuple[list[tuple[str, object]], bool]:
        """(path, index) of each project file defining a config class `index` (the file at `path`) imports
        (`XConfig`, `TrainingArguments`, `LayerOptions`: not a module), whose fields' and `__init__`
        arguments' defaults the file reads; and whether a config class it imports could not be read (from
        outside the project, or a missing file: then its defaults are not guessed from elsewhere)."""
        importer = Path(os.path.abspath(path))
        found = {}
        unread = False
        for local, dotted in index.aliases.items():
            if not local.endswith(CONFIG_SUFFIXES) or "." not in dotted.lstrip(".") and not dotted.startswith("."):
                continue
            resolved = self.resolve(importer, dotted)
            if resolved is None or resolved[0] == importer or not is_under(resolved[0], self.root):
                unread = True
                continue
            other = self.config_index(resolved[0], type(index))
            info = other.classes.get(resolved[1]) if other is not None else None
            if info is not None and not other.is_module_class(info):
                found[str(resolved[0])] = other
            else:
                unread = True
        return sorted(found.items()), unread

    def config_index(self, path: Path, index_class):
        """What `imported_configs` reads of a config module (its classes' defaults) and `is_module_class` of any
        file (its classes' bases and methods), read with `ast` (`index_class.config_module`: the static engine's
        ConfigIndex), or with libcst (`file_index`) when CPython does not parse it."""
        source = self.source(path)
        if source is None:
            return None
        key = (path, hashlib.sha1(source).hexdigest(), "config")
        known = self._indexes.get(key)
        if known is not None:
            self._indexes.move_to_end(key)
            return known[0]
        # the tree resolving the config's import parsed already serves, where it is the UTF-8 text's
        index = index_class.config_module(source, self.syntax_tree(path) if parses_as_utf8_text(source) else None)
        if index is None:
            return self.file_index(path, index_class)
        self._keep_index(key, index, len(source))
        return index

    def file_index(self, path: str | os.PathLike, index_class):
        """The static index (`index_class`: `reslint.static.index.FileIndex`, passed in because the static
        engine sits above this index) of a project file; None when it does not parse."""
        import libcst as cst

        from reslint.static.unvalidated_parse import parse_module

        path = Path(os.path.abspath(path))
        source = self.source(path)
        if source is None:
            return None
        key = (path, hashlib.sha1(source).hexdigest())
        known = self._indexes.get(key)
        if known is not None:
            self._indexes.move_to_end(key)
            return known[0]
        try:
            index = index_class(parse_module(source.decode("utf-8")))
        except (UnicodeDecodeError, cst.ParserSyntaxError, RecursionError, ValueError, MemoryError):
            index = None
        self._keep_index(key, index, len(source))
        return index

    def _keep_index(self, key: tuple, index, size: int) -> None:
        self._indexes[key] = (index, size)
        self._index_source += size
        while self._index_source > MAX_CACHED_INDEX_SOURCE and len(self._indexes) > 1:
            dropped, dropped_size = self._indexes.popitem(last=False)[1]
            self._index_source -= dropped_size
            if dropped is not None:  # facts keyed by the identity of an index: another may get its id
                gone = id(dropped)
                for fact in [fact for fact in self._facts if gone in fact]:
                    del self._facts[fact]

    def norm_kind(self, importer: str | os.PathLike, dotted: str, evaluator_class,
                  through: list[Path] | None = None) -> str | None:
        """The norm kind of the project class or function `dotted` names in `importer`, when it is a norm: a
        torch norm's subclass, or one that normalises its (first) input by hand; else None. `evaluator_class`
        is the static engine's dataflow `Evaluator`, passed in: the engine sits above this index. `through`
        gets the files read (see `resolve`)."""
        resolved = self.resolve(importer, dotted, through)
        if resolved is None or resolved[0] == Path(os.path.abspath(importer)):
            return None
        outline = self.outline(resolved[0])
        if outline is None or not issubclass(outline.defined.get(resolved[1], type(None)), (ast.ClassDef, ast.FunctionDef)):
            return None  # read with libcst only what is a class or a function there
        content = self._unchanged_key(resolved[0])[1]  # known once the outline is: kept by the file's content
        kept = (content, resolved[1], evaluator_class)
        if content is not None and kept in self._norm_kinds:
            return self._norm_kinds[kept]
        index = self.file_index(resolved[0], evaluator_class.index_class)
        function = index.functions.get(resolved[1]) if index is not None else None
        cls = index.classes.get(resolved[1]) if index is not None else None
        key = (resolved[0], resolved[1], id(index))
        if (function or cls) is not None and key not in self._facts:
            from reslint.static.norms import classify_norm_class, normalised_input_kind
            from reslint.static.positions import SourceMap

            self._facts[key] = None  # recursion guard: a function calling itself through imports
            try:
                evaluator = evaluator_class(index, SourceMap(index.module), str(resolved[0]))
                self._facts[key] = (normalised_input_kind(evaluator.evaluate_function(function)) if function
                                    else classify_norm_class(index, cls, evaluator.class_graph))
            except Exception:  # noqa: BLE001 - what the engine cannot follow is simply not a norm
                self._facts[key] = None
        found = self._facts.get(key)
        if content is not None:  # (a recursive ask under way keeps the guard's None: the answer replaces it)
            if len(self._norm_kinds) >= MAX_KEPT_BY_CONTENT:
                self._norm_kinds.clear()
            self._norm_kinds[kept] = found
        return found

    def builder_indexes(self, path: str | os.PathLike, index) -> list[tuple[Path, object]]:
        """(path, index) of the other project files that build a module class of `index` (the file at `path`):
        the training scripts whose command-line defaults the model reads (`Model(args)`)."""
        target = project_path(path)
        key = (target, "builders", id(index))
        if key not in self._facts:
            names = [name for name, info in index.classes.items() if index.is_module_class(info)]
            # What a builder gives is its command-line defaults (`argument_defaults`: `add_argument` calls), so a
            # file that never spells `add_argument` is not searched for sites (nor parsed, nor its imports resolved).
            files = {site.path for sites in self.construction_sites_of(target, names, among=self.declares_arguments)
                     .values() for site in sites if site.path != target}
            self._facts[key] = [(file, other) for file in sorted(files) if (other := self.file_index(file, type(index))) is not None]
        return self._facts[key]

    def config_defaults(self, field: str) -> list[tuple[Path, object]]:
        """The defaults the project's config classes give a field of this name, wherever they are (a layer
        reading `args.decoder_normalize_before` is handed a config built elsewhere): class attributes and
        dataclass fields, `__init__` arguments, `self.field = kwargs.pop("field", default)`. Literal values
        only, with the file each is in; nothing when the project is too large to search this way."""
        key = ("config field", field)
        if key not in self._facts:
            values: list[tuple[Path, object]] = []
            files = self.python_files()
            for path in files if len(files) <= MAX_FIELD_SEARCH_FILES else ():
                source = self.source(path)
                tree = self.syntax_tree(path) if source is not None and field.encode() in source else None
                try:
                    values.extend((path, value) for value in (field_defaults(tree, field) if tree is not None else ()))
                except RecursionError:  # a class nested too deep to read: its defaults are not known
                    continue
            self._facts[key] = values
        return self._facts[key]

    def memo(self, key: tuple, compute):
        """A fact computed once per `key` (whose parts name what it read, e.g. a file's content hash); None
        while it is being computed, so a fact that reaches itself through imports ends there."""
        if key not in self._facts:
            self._facts[key] = None
            self._facts[key] = compute()
        return self._facts[key]

    def is_module_class(self, path: Path, name: str, index_class) -> bool:
        """Whether the class `name` of the file is an nn.Module: its bases and methods, read with `ast` (a libcst
        parse of a large caller such as modular_rt_detr.py only to ask this: 0.3 CPU-s of a 325-file check)."""
        index = self.config_index(path, index_class)
        info = index.classes.get(name) if index is not None else None
        return info is not None and index.is_module_class(info)

    def static_facts(self, path: Path, extract_facts, index_class):
        """The static engine's facts of another project file (not looking further at who builds its classes),
        by `extract_facts` (`reslint.static.engine.extract_facts`, passed in: the engine sits above this index)."""
        index = self.file_index(path, index_class)
        if index is None:
            return None
        key = (path, "facts", id(index))
        if key not in self._facts:
            try:
                self._facts[key] = extract_facts(str(path), index.module, str(path), builders=False)
            except Exception:  # noqa: BLE001 - a neighbour the engine cannot read only means fewer facts
                self._facts[key] = None
        return self._facts[key]

    def python_files(self) -> list[Path]:
        """The project's Python files (skipped directories left out), walked once."""
        from reslint.discovery import is_fix_temporary, is_skipped_dir

        if self._files is None and ProjectIndex.prebuilt is not None:
            ProjectIndex.prebuilt.adopt(self)
        if self._files is None:
            found: list[Path] = []
            for current, dirnames, filenames in os.walk(self.root):
                dirnames[:] = sorted(name for name in dirnames if not is_skipped_dir(Path(current, name)))
                found.extend(Path(current, name) for name in sorted(filenames)
                             if name.endswith(".py") and not is_fix_temporary(name))
                if len(found) > MAX_SCANNED_FILES:
                    break
            self._files = found[:MAX_SCANNED_FILES]
        return self._files

    # ----- resolution --------------------------------------------------------------------------

    def module_file(self, importer: str | os.PathLike, module: str, level: int = 0) -> Path | None:
        """The file `import module` (or `from .module`, with `level` dots) names from `importer`:
        `a/b.py` or `a/b/__init__.py`. None when it is not a project file."""
        found = self._walk_from(Path(os.path.abspath(importer)), module, level)
        if found is None:
            return None
        files, package = found
        if package is None:
            return files[-1]
        init = package / "__init__.py"
        return init if init.is_file() else None  # a namespace package has no file

    def resolve(self, importer: str | os.PathLike, dotted: str,
                through: list[Path] | None = None) -> tuple[Path, str] | None:
        """`model.GPT` / `.layers.Block` / `pkg.GPT` as imported in `importer` -> (file defining it, name).

        Follows a package `__init__`'s re-exports; a name no file defines resolves to the module that
        should hold it (a class of an unreadable file still names its file). `through` gets the files read
        on the way, the defining one last: a fact read there goes stale when one of them changes."""
        level = len(dotted) - len(dotted.lstrip("."))
        if not level and "." not in dotted:
            return Path(os.path.abspath(importer)), dotted
        module, _, name = dotted[level:].rpartition(".")
        target = self.module_file(importer, module, level)
        if target is None:
            return None
        submodule = self._submodule(target, name)
        if submodule is not None:
            return submodule, ""
        return self._defining(target, name, through=through)

    def _defining(self, path: Path, name: str, hops: int = 0, through: list[Path] | None = None) -> tuple[Path, str]:
        if through is not None:
            through.append(path)
        outline = self.outline(path)
        if outline is None or hops >= MAX_REEXPORT_HOPS or name in outline.defined:
            return path, name
        source = next((("." * statement.level + statement.module, original) for statement in outline.imports
                       if statement.names for original, local in zip(statement.names, statement.local_names)
                       if local == name), None)
        if source is None:
            return path, name
        prefix, original = source
        level = len(prefix) - len(prefix.lstrip("."))
        target = self.module_file(path, prefix[level:], level)
        if target is None or target == path:
            return path, name
        submodule = self._submodule(target, original)
        if submodule is not None:
            return submodule, ""
        return self._defining(target, original, hops + 1, through)

    def copies_first_argument(self, importer: str | os.PathLike, dotted: str, through: list[Path] | None = None) -> bool:
        """Whether the function `dotted` names in `importer` (its own or another project file's) returns a
        ModuleList/Sequential of deep copies of its first argument, as `clones(layer, n)` does. `through` gets
        the files read (see `resolve`)."""
        return self._function_fact(importer, dotted, through, returns_copies) or False

    def residual_wrapper(self, importer: str | os.PathLike, dotted: str,
                         through: list[Path] | None = None) -> ResidualWrapper | None:
        """How the function `dotted` names in `importer` (another project file's) adds a callable argument's
        output to its data argument, as `apply(f, x, residual=True)` does; None when it does not. `through`
        gets the files read (see `resolve`)."""
        return self._function_fact(importer, dotted, through, residual_wrapper_of)

    def _function_at(self, resolved: tuple[Path, str]) -> ast.FunctionDef | None:
        """The top-level function `name` of the file `path` (`resolved`), else None; a file whose outline shows
        no such function is not parsed again (the model-output classes of transformers are asked about for every
        call that builds one)."""
        outline = self.outline(resolved[0])
        if outline is None or not issubclass(outline.defined.get(resolved[1], type(None)), ast.FunctionDef):
            return None
        tree = self.syntax_tree(resolved[0])
        function = top_level_definitions(tree).get(resolved[1]) if tree is not None else None
        return function if isinstance(function, ast.FunctionDef) else None

    def _function_fact(self, importer: str | os.PathLike, dotted: str, through: list[Path] | None, read):
        """`read(function)` of the function `dotted` names in `importer`, None when it names none; kept by the
        defining file's content (each checked file asks of the same helpers)."""
        resolved = self.resolve(importer, dotted, through)
        if resolved is None:
            return None
        key = self._unchanged_key(resolved[0])[1]
        if key is not None and (key, resolved[1], read) in self._function_facts:
            return self._function_facts[(key, resolved[1], read)]
        function = self._function_at(resolved)
        found = read(function) if function is not None else None
        key = self._unchanged_key(resolved[0])[1]
        if key is not None:
            if len(self._function_facts) >= MAX_KEPT_BY_CONTENT:
                self._function_facts.clear()
            self._function_facts[(key, resolved[1], read)] = found
        return found

    def _submodule(self, module_path: Path, name: str) -> Path | None:
        if module_path.name != "__init__.py" or not name.isidentifier():
            return None
        for candidate in (module_path.parent / name / "__init__.py", module_path.parent / f"{name}.py"):
            if candidate.is_file():
                return candidate
        return None

    def _walk_from(self, importer: Path, module: str, level: int) -> tuple[tuple[Path, ...], Path | None] | None:
        """`walk` from where `importer` looks for `module` (`level` dots: relative), once per run and directory:
        the classes of every checked file resolve the same imports, each a handful of `stat`s."""
        if self._walks_run != ProjectIndex._run or len(self._walks) >= MAX_KEPT_BY_CONTENT:
            self._walks.clear()
            self._walks_run = ProjectIndex._run
        key = (importer.parent, module, level)
        known = self._walks.get(key, _NOT_WALKED)
        if known is _NOT_WALKED:
            found = self._walked_from(importer, module, level)
            known = self._walks[key] = (tuple(found[0]), found[1]) if found is not None else None
        return known

    def _walked_from(self, importer: Path, module: str, level: int) -> tuple[list[Path], Path | None] | None:
        parts = module.split(".") if module else []
        if level:
            base = importer.parent
            for _ in range(level - 1):
                base = base.parent
            return walk(base, parts)
        for directory in search_path(importer, self.configured_root):
            found = walk(directory, parts)
            if found is not None:
                return found
        return None

    # ----- what a file depends on, and who builds a class -----------------------------------------

    def dependencies(self, path: str | os.PathLike) -> list[Path]:
        """The project files importing `path` runs, directly or through other project files: sorted
        absolute paths under the project root, `path` itself left out. A file that cannot be read or
        parsed is listed (when imported) but its own imports are not followed."""
        entry = Path(os.path.abspath(path))
        found: set[Path] = set()
        queue: deque[Path] = deque([entry, *enclosing_package_inits(entry)])
        seen: set[Path] = set(queue)
        while queue:
            current = queue.popleft()
            if current != entry:
                found.add(current)
            if not is_under(current, self.root):
                continue  # a file outside the project is listed by nobody, nor followed
            for dependency in self._files_imported(current, entry):
                if dependency not in seen:
                    seen.add(dependency)
                    queue.append(dependency)
        return sorted(dependency for dependency in found if is_under(dependency, self.root))

    def _files_imported(self, path: Path, entry: Path) -> list[Path]:
        files: list[Path] = []
        for statement in self.imports(path):
            # Absolute imports resolve against the entry file's search path: the one sys.path of the run.
            found = self._walk_from(path if statement.level else entry, statement.module, statement.level)
            if found is None:
                continue
            files.extend(found[0])
            if found[1] is not None:
                files.extend(module for name in statement.names
                             if (module := self._submodule(found[1] / "__init__.py", name)) is not None)
        return list(dict.fromkeys(files))

    def construction_sites(self, path: str | os.PathLike, class_name: str,
                           references: bool = False) -> list[ConstructionSite]:
        """Every call in the project of the class (or function) `class_name` defined in `path`, in its own
        file too (`__main__` blocks, factories): `Name(...)` after `from module import Name [as Alias]`,
        `module.Name(...)` after `import module` or `from package import module`. Found by name, then
        confirmed through the caller's imports (a same-named class elsewhere does not count).
        `references`: also where a class's `__init__` or a function names it without calling it
        (`layer = ConvolutionModule`, called later through `layer`): see `references_of`."""
        return self.construction_sites_of(path, (class_name,), references)[class_name]

    def construction_sites_of(self, path: str | os.PathLike, class_names, references: bool = False,
                              among: Callable[[Path], bool] | None = None) -> dict[str, list[ConstructionSite]]:
        """`construction_sites` of several classes of one file, in one pass over the project's files (only the
        files `among` accepts, when given)."""
        target = Path(os.path.abspath(path))
        stem = target.stem
        collect = references_of if references else calls_of
        sites: dict[str, list[ConstructionSite]] = {name: [] for name in class_names}
        files = self.python_files()
        if self._positions is None or len(self._positions) != len(files):
            self._positions = {file: position for position, file in enumerate(files)}
        target_position = self._positions.get(target, -1)
        importing = self.files_importing(files) if among is None else self._files_importing_among(files, among)
        places = {target_position} if target_position >= 0 else set()
        for word in (*sites, stem):
            places.update(importing.get(word, ()))
        for position in sorted(places):
            candidate = files[position]
            if position == target_position:  # a Path comparison per project file and class was a cost too
                tree = self.syntax_tree(target) if among is None or among(target) else None
                for class_name in sites:
                    sites[class_name].extend(collect(target, tree, {class_name}, set(), class_name)
                                             if tree is not None else ())
                continue
            words = self.imported_words(candidate)
            wanted = [class_name for class_name in sites if class_name in words or stem in words]
            if not wanted or among is not None and not among(candidate):
                continue
            for class_name in wanted:
                names, modules = self._bindings(candidate, target, class_name)
                tree = self.syntax_tree(candidate) if names or modules else None
                if tree is not None:
                    sites[class_name].extend(collect(candidate, tree, names, modules, class_name))
        return sites

    def declares_arguments(self, path: Path) -> bool:
        """Whether the file's text spells `add_argument` (a command-line parser's arguments may be there)."""
        from reslint.file_gate import overlay

        overlaid = overlay(path)
        if overlaid is not None:  # a fix's re-check: the text it reads as now
            return b"add_argument" in overlaid
        return self._scanned(path, words=False)[4]

    def files_importing(self, files: list[Path]) -> dict[str, list[int]]:
        """Each word of the project files' import statements -> the places (in `files`) of the files whose
        `imported_words` hold it, once per run: a construction-site search then looks only at the files that
        may import the class or its module, not at every file of the project for every class asked."""
        if self._importing is None or self._importing[0] != ProjectIndex._run:
            self._importing = (ProjectIndex._run, self._words_of(files, None))
        return self._importing[1]

    def _files_importing_among(self, files: list[Path], among: Callable[[Path], bool]) -> dict[str, list[int]]:
        """`files_importing` of the files `among` accepts, once per run and set of overlays: the search for the
        training scripts that build a model (`declares_arguments`) reads the import words of those few only (3 of
        transformers' 2,951 files), not of every file of the project, as a check of one model file did."""
        from reslint.file_gate import overlay_generation

        key = (ProjectIndex._run, overlay_generation(), getattr(among, "__func__", among))
        if self._importing_among is None or self._importing_among[0] != key:
            self._importing_among = (key, self._words_of(files, among))
        return self._importing_among[1]

    def _words_of(self, files: list[Path], among: Callable[[Path], bool] | None) -> dict[str, list[int]]:
        importing: dict[str, list[int]] = {}
        for position, candidate in enumerate(files):
            if among is None or among(candidate):
                for word in self.imported_words(candidate):
                    importing.setdefault(word, []).append(position)
        return importing

    def _bindings(self, candidate: Path, target: Path, class_name: str) -> tuple[set[str], set[str]]:
        """The local names `candidate` binds to the class, and to the module defining it."""
        names, modules = set(), set()
        for statement in self.imports(candidate):
            prefix = "." * statement.level + statement.module
            if not statement.local_names:  # `from module import *` binds no name we can follow
                continue
            if not statement.names:  # `import a.b as m` binds m to a.b; `import a.b` binds only a
                if statement.local_names[0] != statement.module.split(".")[0] or "." not in statement.module:
                    if self.module_file(candidate, statement.module) == target:
                        modules.add(statement.local_names[0])
                continue
            for name, local in zip(statement.names, statement.local_names):
                dotted = f"{prefix}.{name}" if prefix and not prefix.endswith(".") else prefix + name
                resolved = self.resolve(candidate, dotted) if name in (class_name, target.stem) else None
                if resolved == (target, class_name):
                    names.add(local)
                elif resolved == (target, ""):
                    modules.add(local)
        return names, modules


def import_clauses(source: bytes) -> list[bytes]:
    """What follows each word `import` of the text (`\\bimport[ \\t]+(...)` as `re.findall` finds it): the
    literal found by `bytes.find` first, which is several times faster than the regex's scan of a
    large project's every file."""
    clauses, at = [], source.find(b"import")
    while at >= 0:
        match = IMPORT_CLAUSE.match(source, at) if at == 0 or source[at - 1] not in WORD_BYTES else None
        if match is not None:
            clauses.append(match.group(1))
            at = source.find(b"import", match.end())
        else:
            at = source.find(b"import", at + 1)
    return clauses


def calls_of(path: Path, tree: ast.Module, names: set[str], modules: set[str],
             attribute: str) -> list[ConstructionSite]:
    """The calls `Name(...)` of `names` and `module.attribute(...)` of `modules`, with the top-level class or
    function each is in."""
    sites = []
    for func, line, scope, in_class in named_calls(tree):
        if isinstance(func, ast.Name) and func.id in names or (
                isinstance(func, ast.Attribute) and func.attr == attribute and isinstance(func.value, ast.Name)
                and func.value.id in modules):
            sites.append(ConstructionSite(path, line, scope, in_class))
    return sites


_named_calls: dict[int, tuple[ast.Module, list[tuple[ast.expr, int, str, bool]]]] = {}
_definitions_of: dict[int, tuple[ast.Module, dict[str, ast.AST]]] = {}  # id(tree) -> (tree, top_level_definitions)
# Fields that hold no statement or expression (`ctx`, operators): not walked.
_SKIPPED_FIELDS = frozenset({"ctx", "op", "ops"})
# The fields of a statement (an except clause, a match case) that hold statements: imports are only there.
_STATEMENT_FIELDS = frozenset({"body", "orelse", "finalbody", "handlers", "cases"})
_statement_fields: dict[type, tuple[str, ...]] = {}
_node_fields: dict[type, tuple[str, ...]] = {}


def named_calls(tree: ast.Module) -> list[tuple[ast.expr, int, str, bool]]:
    """(func, line, top-level scope, whether that scope is a class) of every call `f(...)` or `m.f(...)` of a
    module, in `ast.walk` order per top-level statement: found once per tree, asked once per class built."""
    return kept_with_tree(_named_calls, tree, _named_calls_of)


def _named_calls_of(tree: ast.Module) -> list[tuple[ast.expr, int, str, bool]]:
    found = []
    for statement, calls in zip(tree.body, calls_by_statement(tree)):
        scope = statement.name if isinstance(statement, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) else ""
        in_class = isinstance(statement, ast.ClassDef)
        found.extend((func, line, scope, in_class) for func, line in calls)
    return found


def kept_with_tree(memo: dict, tree: ast.Module, read):
    """`read(tree)`, computed once per tree and kept in `memo` by the tree's id with the tree itself (so that the
    id is not reused while the entry lives); the memo is emptied past 4,096 trees."""
    known = memo.get(id(tree))
    if known is None or known[0] is not tree:
        if len(memo) > 4096:
            memo.clear()
        known = memo[id(tree)] = (tree, read(tree))
    return known[1]


def code_nodes(tree: ast.AST) -> list[ast.AST]:
    """`list(ast.walk(tree))` without the contexts and operators (_SKIPPED_FIELDS: leaves), in its order: a queue
    over each node's fields instead of ast.walk's generators over ast.iter_fields' generators."""
    nodes, node_type = [tree], ast.AST
    for node in nodes:  # grows while read: a queue
        kind = type(node)
        fields = _node_fields.get(kind)
        if fields is None:
            fields = _node_fields[kind] = tuple(field for field in kind._fields if field not in _SKIPPED_FIELDS)
        for field in fields:
            value = getattr(node, field, None)
            if isinstance(value, node_type):
                nodes.append(value)
            elif isinstance(value, list):
                nodes.extend(item for item in value if isinstance(item, node_type))
    return nodes


def calls_by_statement(tree: ast.Module) -> list[list[tuple[ast.expr, int]]]:
    """(func, line) of the named calls of each top-level statement, in `ast.walk(statement)`'s order (code_nodes)."""
    call, named = ast.Call, (ast.Name, ast.Attribute)
    return [[(node.func, node.lineno) for node in code_nodes(statement) if type(node) is call
             and isinstance(node.func, named)] for statement in tree.body]


def references_of(path: Path, tree: ast.Module, names: set[str], modules: set[str],
                  attribute: str) -> list[ConstructionSite]:
    """`calls_of`, and the places a class's `__init__` or a top-level function names `names` (or
    `module.attribute`) without calling them: espnet's Conformer encoder picks
    `convolution_layer = ConvolutionModule` and calls `convolution_layer(*args)` in a lambda."""
    sites = calls_of(path, tree, names, modules, attribute)
    called = {(site.line, site.scope) for site in sites}
    for statement in tree.body:
        if isinstance(statement, ast.ClassDef):
            bodies = [item for item in statement.body if isinstance(item, ast.FunctionDef) and item.name == "__init__"]
        elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            bodies = [statement]
        else:
            continue
        for node in (node for body in bodies for node in ast.walk(body)):
            named = isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in names
            if named or (isinstance(node, ast.Attribute) and node.attr == attribute and isinstance(node.value, ast.Name)
                         and node.value.id in modules):
                if (node.lineno, statement.name) not in called:
                    called.add((node.lineno, statement.name))
                    sites.append(ConstructionSite(path, node.lineno, statement.name,
                                                  isinstance(statement, ast.ClassDef)))
    return sites


def field_defaults(tree: ast.Module, field: str) -> list[object]:
    """The literal defaults of `field` in the config classes (no `forward`, no `...Module` base) of a module."""
    values = []
    for cls in (node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)):
        methods = {item.name: item for item in cls.body if isinstance(item, ast.FunctionDef)}
        bases = [ast.unparse(base) for base in cls.bases]
        if "forward" in methods or any(base.endswith(("Module", "Layer", "Model")) for base in bases):
            continue
        expressions = [item.value for item in cls.body if isinstance(item, (ast.Assign, ast.AnnAssign)) and item.value
                       and field in [target.id for target in (item.targets if isinstance(item, ast.Assign)
                                                               else [item.target]) if isinstance(target, ast.Name)]]
        init = methods.get("__init__")
        if init is not None:
            arguments = init.args.posonlyargs + init.args.args
            defaults = dict(zip([arg.arg for arg in arguments[len(arguments) - len(init.args.defaults):]],
                                init.args.defaults))
            defaults.update((arg.arg, default) for arg, default in zip(init.args.kwonlyargs, init.args.kw_defaults)
                            if default is not None)
            if field in defaults:
                expressions.append(defaults[field])
            for node in ast.walk(init):
                if (isinstance(node, ast.Assign) and len(node.targets) == 1
                        and isinstance(node.targets[0], ast.Attribute)
                        and node.targets[0].attr == field and isinstance(node.value, ast.Call)
                        and isinstance(node.value.func, ast.Attribute) and node.value.func.attr in ("pop", "get")
                        and len(node.value.args) == 2):
                    expressions.append(node.value.args[1])
        for expression in expressions:
            try:
                values.append(literal_eval(expression))
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue
    return values


def top_level_definitions(tree: ast.Module) -> dict[str, ast.AST]:
    """The classes, functions and assigned names a module defines at its top level (under `if`/`try` too);
    read once per tree (each class of a checked file resolves its names through the same few files)."""
    return kept_with_tree(_definitions_of, tree, _top_level_definitions)


def _top_level_definitions(tree: ast.Module) -> dict[str, ast.AST]:
    found: dict[str, ast.AST] = {}
    pending = list(tree.body)
    while pending:
        statement = pending.pop(0)
        if isinstance(statement, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            found.setdefault(statement.name, statement)
        elif isinstance(statement, (ast.Assign, ast.AnnAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            found.update((target.id, statement) for target in targets if isinstance(target, ast.Name))
        elif isinstance(statement, (ast.If, ast.Try)):
            pending.extend(statement.body + statement.orelse)
    return found


def returns_copies(function: ast.FunctionDef) -> bool:
    """`return nn.ModuleList([copy.deepcopy(module) for _ in range(n)])` (or Sequential), `module` the first
    parameter."""
    params = function.args.posonlyargs + function.args.args
    if not params:
        return False
    for statement in function.body:
        value = statement.value if isinstance(statement, ast.Return) else None
        if not isinstance(value, ast.Call) or called_name(value) not in ("ModuleList", "Sequential"):
            continue
        for arg in value.args:
            inner = arg.value if isinstance(arg, ast.Starred) else arg
            element = inner.elt if isinstance(inner, (ast.ListComp, ast.GeneratorExp)) else None
            if (isinstance(element, ast.Call) and called_name(element) == "deepcopy" and element.args
                    and isinstance(element.args[0], ast.Name) and element.args[0].id == params[0].arg):
                return True
    return False


@dataclass(frozen=True)
class ResidualWrapper:
    """A helper that returns `x + f(x, ...)` (when its flag parameter is true, else `f(x, ...)`)."""
    callable_param: str
    data_param: str
    params: tuple[str, ...]  # the positional parameters, in order, to bind a call's arguments
    flag_param: str | None  # None: the add is unconditional


def residual_wrapper_of(function: ast.FunctionDef) -> ResidualWrapper | None:
    """`result = f(x.flatten(0, 1), *args).view(x.shape); return x + result if residual else result` (or
    `return x + f(x)`), `f`, `x` and `residual` parameters: the add the helper makes around the callable."""
    params = tuple(arg.arg for arg in function.args.posonlyargs + function.args.args)
    results: dict[str, str] = {}  # a local assigned from a call of a parameter -> that parameter
    for statement in ast.walk(function):
        if (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name)):
            called = _called_parameter(statement.value, params)
            if called is not None:
                results[statement.targets[0].id] = called
        if not isinstance(statement, ast.Return) or statement.value is None:
            continue
        value, flag = statement.value, None
        if isinstance(value, ast.IfExp) and isinstance(value.test, ast.Name) and value.test.id in params:
            value, flag = value.body, value.test.id
        if not (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add)):
            continue
        for skip, branch in ((value.left, value.right), (value.right, value.left)):
            called = results.get(branch.id) if isinstance(branch, ast.Name) else _called_parameter(branch, params)
            if isinstance(skip, ast.Name) and skip.id in params and called is not None and called != skip.id:
                return ResidualWrapper(called, skip.id, params, flag)
    return None


def _called_parameter(expr: ast.expr, params: tuple[str, ...]) -> str | None:
    """The parameter called in `f(...)` or `f(...).view(...)` (a shape method after the call), else None."""
    while (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute)
           and expr.func.attr in ("view", "reshape", "contiguous")):
        expr = expr.func.value
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in params:
        return expr.func.id
    return None


def called_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def parses_as_utf8_text(source: bytes) -> bool:
    """Whether CPython's parse of the source's bytes is that of its UTF-8 text: no byte-order mark and no
    encoding declared (PEP 263) other than UTF-8, in the first two lines."""
    if source.startswith(codecs.BOM_UTF8):
        return False
    for line in source.split(b"\n", 2)[:2]:
        declared = CODING.match(line)
        if declared is not None:
            return declared.group(1).lower().replace(b"_", b"-") in (b"utf-8", b"utf8")
    return True


def parse_quietly(source: bytes, path: Path) -> ast.Module | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarnings of the code read are not ours to show
            return ast.parse(source, filename=str(path))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def read_imports(tree: ast.Module) -> list[ImportStatement]:
    """Every import statement of the tree, in `ast.walk` order: a breadth-first walk of the statements alone (an
    import is a statement, and only statements hold statements; the path to it and its depth are the same)."""
    found, pending, at, imported = [], [tree], 0, (ast.Import, ast.ImportFrom)
    while at < len(pending):
        node = pending[at]
        at += 1
        if isinstance(node, imported):
            found.append(node)
            continue
        kind = type(node)
        fields = _statement_fields.get(kind)
        if fields is None:
            fields = _statement_fields[kind] = tuple(field for field in kind._fields if field in _STATEMENT_FIELDS)
        for field in fields:  # in the node's own order of fields (a `try`'s handlers before its `else`)
            value = getattr(node, field, None)
            if type(value) is list:
                pending.extend(value)
    return import_statements(found)


def import_statements(nodes: list[ast.stmt]) -> list[ImportStatement]:
    imports = []
    for node in nodes:
        if isinstance(node, ast.Import):
            imports.extend(ImportStatement(alias.name, 0, (), (alias.asname or alias.name.split(".")[0],))
                           for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            aliases = [alias for alias in node.names if alias.name != "*"]
            imports.append(ImportStatement(node.module or "", node.level or 0, tuple(alias.name for alias in aliases),
                                           tuple(alias.asname or alias.name for alias in aliases)))
    return imports


def enclosing_package_inits(entry: Path) -> list[Path]:
    """The `__init__.py` files importing `entry` as a package module runs."""
    inits = []
    directory = entry.parent
    while is_package_directory(directory) and directory.parent != directory:
        if directory / "__init__.py" != entry and (directory / "__init__.py").is_file():
            inits.append(directory / "__init__.py")
        directory = directory.parent
    return inits


def walk(directory: Path, parts: list[str]) -> tuple[list[Path], Path | None] | None:
    """What importing the dotted `parts` from `directory` runs: the package `__init__` files on the way and
    the module itself, and the package directory when the name is a package (None for a module).
    None when the name does not resolve there; skipped directories (virtualenvs, caches) never resolve."""
    from reslint.discovery import is_skipped_dir

    files: list[Path] = []
    for position, part in enumerate(parts):
        if not part.isidentifier():
            return None
        package = directory / part
        if package.is_dir() and is_skipped_dir(package):
            return None
        if (package / "__init__.py").is_file():
            files.append(package / "__init__.py")
            directory = package
        elif position == len(parts) - 1 and (directory / f"{part}.py").is_file():
            files.append(directory / f"{part}.py")
            return files, None
        elif package.is_dir():
            directory = package  # a namespace package: nothing runs
        else:
            return None
    return files, directory
