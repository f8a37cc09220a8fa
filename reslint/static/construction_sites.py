"""Construction sites: where the checked project builds a model class with arguments, and those
arguments as an expression reslint can evaluate without running the project's scripts.

A site is a call of the class (`Transformer(d_model=512, nhead=8)`) in a training script, a test,
an `if __name__ == "__main__":` block or a factory function, found by reading the project's files
with `ast` (nothing runs, torch is not imported). Its arguments become a Python expression built
from what the source spells: literals and arithmetic, module constants, argparse defaults, the
defaults of dataclasses and config classes, values of the YAML/JSON/Hydra configs the script loads,
and a factory's parameters bound where the factory is called. Calls stay only where they build
something the model's module defines (`GPT(GPTConfig(n_layer=2))`), torch does (`nn.GELU()`), or a
layer of another project file the model is given (`mlp=FeedForward(...)`: an `nn.Module` class, or a
class with `__call__`, imported by its module's name when the expression is evaluated): evaluating the
expression runs the model's own constructors and those layers' and nothing else of the project. A list
filled by a loop (`layers = nn.ModuleList()`, then `for _ in range(n): layers.append(layer)`) is read
SHRUNK_DEPTH long, the site keeping the whole expression too in case a shallower model does not validate.

Files of other modules are found through the project index (`reslint/project_index.py`): its
list of the project's files and its import resolver.
"""

from __future__ import annotations

import ast
import math
import os
import re
import weakref
from dataclasses import dataclass
from pathlib import Path

from reslint.file_gate import read_project_file
from reslint.static.config_files import find_config, hydra_config, read_config
from reslint.static.instance_reads import instance_read

NAMESPACE = "_reslint_namespace"  # types.SimpleNamespace in the evaluation namespace (argparse args passed whole)
IMPORT = "_reslint_import"  # importlib.import_module there: a module class of another project file, built for real
MAX_FILES = 2000  # project files read for construction sites
MAX_FILE_BYTES = 2_000_000
MAX_DEPTH = 60  # nested evaluations (names, factories' callers)
# Values read for one site, all paths together: a builder called by many builders, each read through its own
# callers, branches out (torchtune's component builders); past this the site's arguments are not followed.
MAX_STEPS = 20_000
DICT_LOADERS = ("yaml.safe_load", "yaml.load", "yaml.full_load", "json.load")
ATTRIBUTE_LOADERS = ("OmegaConf.load",)
PURE_BUILTINS = {"int": int, "float": float, "str": str, "bool": bool, "len": len, "min": min, "max": max,
                 "abs": abs, "round": round, "tuple": tuple, "list": list, "sorted": sorted, "sum": sum}
# Keyword arguments that set a model's depth: a built model keeps 2 of them (placement and the
# stack are read from any depth; tracing time grows with it).
DEPTH_KEYWORDS = frozenset({"num_layers", "n_layers", "n_layer", "depth", "num_encoder_layers", "num_decoder_layers",
                            "num_hidden_layers", "layers", "nlayers", "n_blocks", "num_blocks", "enc_layers",
                            "dec_layers", "encoder_layers", "decoder_layers"})
SHRUNK_DEPTH = 2


class Unevaluable(Exception):
    """An argument whose value only running the project's code would give."""


class OutOfSteps(Unevaluable):
    """The site's MAX_STEPS are spent: no other caller of a factory is tried."""


@dataclass(frozen=True)
class Code:
    """A value kept as code: a constructor of the model's module, or a torch attribute."""

    text: str


@dataclass
class Namespace:
    """An object read by attribute: argparse's namespace, a config-class instance, an OmegaConf config."""

    values: dict


@dataclass(frozen=True)
class OpenFile:
    path: str


@dataclass(frozen=True)
class Site:
    """One construction site; `expr` is "" when its arguments cannot be evaluated (`reason` says why)."""

    path: str  # absolute path of the file holding the call
    line: int
    expr: str = ""
    reason: str = ""
    reads: tuple[str, ...] = ()  # the files the expression was read from (script, callers, configs)
    shrunk: str = ""  # "num_layers 12 -> 2"
    depth: int = 0  # the depth the site sets, where the model is built shallower (shrunk)
    full: str = ""  # where shrunk: the expression at the site's own depth (a shallower build may not validate)


def construction_sites(class_name: str, finder: Finder) -> list[Site]:
    """Every site of `class_name` (defined in the finder's model file) in the project, that file's first."""
    sites = []
    for reader, call in finder.calls_to(class_name, finder.model_path):
        if reader.inside_module_class(call, finder.module_classes):
            continue
        sites.append(reader.site(class_name, call))
    return sites


# ----- the project's files -----------------------------------------------------------------------


def project_index(path: str, root: str):
    """The project index every cross-file lookup here goes through (one resolver for all of reslint)."""
    from reslint.project_index import ProjectIndex

    return ProjectIndex.for_file(path, root)


class Finder:
    """The project's readers, parsed once, and where a class or function of one file is called."""

    def __init__(self, model_path: str, root: str, module_names: set[str], module_classes: set[str],
                 local_only: bool = False):
        self.local_only = local_only  # callers and sites in the model's own file only
        self.model_path = os.path.abspath(model_path)
        self.root = os.path.abspath(root)
        self.index = project_index(model_path, root)
        self.top = self.index.root
        self.module_names = module_names
        self.module_classes = module_classes
        self.readers: dict[str, FileReader | None] = {}
        self.files: list[str] | None = None
        self.texts: dict[str, str] = {}
        self.calls: dict[tuple[str, str], list] = {}  # (name, defining file) -> its (reader, call) pairs

    def mentioning(self, name: str, defining: str) -> list[str]:
        """The files that may call `name` of the file `defining`: the text calls it and, outside that file,
        names the module (or its package) an import would name."""
        if self.files is None:
            self.files = [str(path) for path in self.index.python_files()[:MAX_FILES]]
        called = re.compile(rf"\b{re.escape(name)}\s*\(")
        module = Path(defining)
        hints = (module.parent.name,) if module.stem == "__init__" else (module.stem, module.parent.name)
        # Another file calls it only through an import naming it or its module (see FileReader.names_for):
        # the project index's import words (kept from the static pass) spare reading every project file.
        importing = self.index.files_importing(self.index.python_files())
        places = {position for word in (name, *hints) for position in importing.get(word, ())}
        found = []
        for position, path in enumerate(self.files):
            if path != defining and position not in places:
                continue
            text = self.text(path)
            if name in text and called.search(text) and (path == defining or any(hint in text for hint in hints)):
                found.append(path)
        return found

    def text(self, path: str) -> str:
        """A project file's text through the file gate (a regular file of bounded size): "" if refused."""
        if path not in self.texts:
            try:
                self.texts[path] = read_project_file(path, None, MAX_FILE_BYTES).decode("utf-8", errors="replace")
            except OSError:
                self.texts[path] = ""
        return self.texts[path]

    def reader(self, path: str) -> FileReader | None:
        path = os.path.abspath(path)
        if path not in self.readers:
            try:
                tree = ast.parse(self.text(path)) if self.text(path) else None
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                tree = None
            self.readers[path] = FileReader(path, tree, weakref.ref(self)) if tree is not None else None
        return self.readers[path]

    def calls_to(self, name: str, defining: str) -> list:
        """(reader, call) for every call of `name` (defined in `defining`), the defining file's first."""
        defining = os.path.abspath(defining)
        if (name, defining) not in self.calls:
            self.calls[name, defining] = list(self._calls_to(name, defining))
        return self.calls[name, defining]

    def _calls_to(self, name: str, defining: str):
        paths = [defining] if self.local_only else self.mentioning(name, defining)
        paths.sort(key=lambda path: (path != defining, path))
        for path in paths:
            reader = self.reader(path)
            if reader is None:
                continue
            local, modules = reader.names_for(name, defining)
            for node in reader.calls:
                func = node.func
                if isinstance(func, ast.Name) and func.id in local or \
                        isinstance(func, ast.Attribute) and func.attr == name and \
                        isinstance(func.value, ast.Name) and func.value.id in modules:
                    yield reader, node


class FileReader:
    """One project file's tree, imports and bindings, and the values its expressions spell."""

    def __init__(self, path: str, tree: ast.Module, finder: Finder | weakref.ref):
        """`finder`: a weak reference to it for a reader the finder keeps (Finder.reader): a reference cycle
        would outlive the file in a static check, which frees its garbage without the cyclic collector."""
        self.path = path
        self.tree = tree
        self._finder = finder
        nodes, self.parents = walk_with_parents(tree)
        self.calls = [node for node in nodes if type(node) is ast.Call]  # in `ast.walk`'s order, as every look reads them
        self.imports: dict[str, tuple[str, int, str]] = {}  # local -> (module, level, name; "" for a module)
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        self.arguments: dict[str, ast.Call] = {}  # argparse dest -> its add_argument call
        self.bound: dict[ast.AST, dict[str, list[tuple[int, ast.AST]]]] = {}
        self.module_files: dict[tuple[str, int], str | None] = {}
        for statement in tree.body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions[statement.name] = statement
            elif isinstance(statement, ast.ClassDef):
                self.classes[statement.name] = statement
        for node in nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.imports[alias.asname] = (alias.name, 0, "")
                    else:
                        self.imports[alias.name.split(".")[0]] = (alias.name.split(".")[0], 0, "")
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.name != "*":
                        self.imports[alias.asname or alias.name] = (node.module or "", node.level, alias.name)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr == "add_argument":
                dest = argparse_dest(node)
                if dest:
                    self.arguments.setdefault(dest, node)

    @property
    def finder(self) -> Finder:
        finder = self._finder
        return finder() if type(finder) is weakref.ref else finder

    # ----- names -------------------------------------------------------------------------------

    def module_file(self, module: str, level: int) -> str | None:
        if (module, level) not in self.module_files:
            found = self.finder.index.module_file(self.path, module, level)
            self.module_files[module, level] = os.path.abspath(found) if found is not None else None
        return self.module_files[module, level]

    def names_for(self, name: str, defining: str) -> tuple[set[str], set[str]]:
        """Local names bound to `name` of the file `defining`, and local names of that module."""
        local = {name} if self.path == defining else set()
        modules = set()
        for alias, (module, level, imported) in self.imports.items():
            if imported == name and self.exports(self.module_file(module, level), name, defining):
                local.add(alias)
            elif not imported and self.module_file(module, level) == defining:
                modules.add(alias)
            elif imported and self.module_file(f"{module}.{imported}" if module else imported, level) == defining:
                modules.add(alias)  # `from package import model`
        return local, modules

    def exports(self, path: str | None, name: str, defining: str) -> bool:
        """Whether importing `name` from the file `path` gives the class of `defining`: it is that file, or a
        package `__init__` that imports the name from it (one level of re-export)."""
        if path is None or path == defining:
            return path is not None
        if not path.endswith("__init__.py"):
            return False
        package = self.finder.reader(path)
        if package is None:
            return False
        module, level, imported = package.imports.get(name, ("", 0, ""))
        return imported == name and package.module_file(module, level) == defining

    def qualified(self, node: ast.AST) -> str:
        """`yaml.safe_load`, `torch.nn.GELU`: a name with its import resolved ("" for other expressions)."""
        if isinstance(node, ast.Name):
            module, level, imported = self.imports.get(node.id, ("", 0, ""))
            if node.id in self.imports and not level:
                return f"{module}.{imported}" if imported and module else (imported or module)
            return node.id
        if isinstance(node, ast.Attribute):
            base = self.qualified(node.value)
            return f"{base}.{node.attr}" if base else ""
        return ""

    def is_module_class(self, name: str, hops: int = 0) -> bool:
        """Whether the class `name` of this file is an `nn.Module`: it has a `forward`, or a base that is one."""
        cls = self.classes.get(name)
        if cls is None or hops > 8:
            return False
        if self.defines(name, "forward"):
            return True
        for base in cls.bases:
            qualified = self.qualified(base)
            if qualified.endswith("Module") and qualified.split(".")[0] in ("torch", "nn", "Module"):
                return True
            if isinstance(base, ast.Name) and base.id in self.classes and base.id != name:
                if self.is_module_class(base.id, hops + 1):
                    return True
            elif isinstance(base, ast.Name) and base.id in self.imports:
                module, level, imported = self.imports[base.id]
                path = self.module_file(module, level) if imported else None
                other = self.finder.reader(path) if path else None
                if other is not None and other.is_module_class(imported, hops + 1):
                    return True
        return False

    def defines(self, class_name: str, method: str) -> bool:
        cls = self.classes.get(class_name)
        return cls is not None and any(isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and
                                       item.name == method for item in cls.body)

    def importable_name(self) -> str:
        """The dotted name this file is imported by while the model's file is loaded (the loader's `sys.path`)."""
        from reslint.project_index import module_name, search_path

        package = module_name(self.path)
        if package is not None:
            return package[0]
        for entry in search_path(self.finder.model_path, self.finder.root):
            try:
                parts = Path(self.path).relative_to(entry).with_suffix("").parts
            except ValueError:
                continue
            if parts and all(part.isidentifier() for part in parts):
                return ".".join(parts)
        raise Unevaluable(f"`{Path(self.path).name}` is not importable from the model's file")

    def scope_of(self, node: ast.AST) -> ast.AST:
        parent = self.parents.get(node)
        while parent is not None and not isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            parent = self.parents.get(parent)
        return parent if parent is not None else self.tree

    def inside_module_class(self, node: ast.AST, module_classes: set[str]) -> bool:
        """A call inside a model class builds a part of that model, not a model."""
        parent = self.parents.get(node)
        while parent is not None:
            if isinstance(parent, ast.ClassDef):
                bases = [self.qualified(base).rsplit(".", 1)[-1] for base in parent.bases]
                if any(base.endswith("Module") and base != "LightningModule" or base in module_classes
                       for base in bases):
                    return True
            parent = self.parents.get(parent)
        return False

    def bindings(self, scope: ast.AST) -> dict[str, list[tuple[int, ast.AST]]]:
        """Name -> [(line, the expression assigned)] in one function or the module (not nested functions)."""
        if scope in self.bound:
            return self.bound[scope]
        found: dict[str, list[tuple[int, ast.AST]]] = {}
        self._bind_statements(found, list(getattr(scope, "body", [])) if not isinstance(scope, ast.Lambda) else [])
        self.bound[scope] = found
        return found

    # bindings' walks: methods, not closures calling themselves (reference cycles left to the cyclic collector)
    def _bind(self, found: dict, target: ast.AST, value: ast.AST, line: int) -> None:
        if isinstance(target, ast.Name):
            found.setdefault(target.id, []).append((line, value))
        elif isinstance(target, (ast.Tuple, ast.List)):
            for index, element in enumerate(target.elts):
                first = index == 0 and isinstance(value, ast.Call) and \
                    self.qualified(value.func).endswith("parse_known_args")
                self._bind(found, element, value if first else ast.Name(id="<unpacked>", ctx=ast.Load()), line)

    def _bind_statements(self, found: dict, statements: list[ast.stmt]) -> None:
        for statement in statements:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(statement, ast.Assign):
                for target in statement.targets:
                    self._bind(found, target, statement.value, statement.lineno)
            elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
                self._bind(found, statement.target, statement.value, statement.lineno)
            elif isinstance(statement, (ast.With, ast.AsyncWith)):
                for item in statement.items:
                    if item.optional_vars is not None:
                        self._bind(found, item.optional_vars, item.context_expr, statement.lineno)
            elif isinstance(statement, (ast.For, ast.AsyncFor)):
                self._bind(found, statement.target, ast.Name(id="<loop>", ctx=ast.Load()), statement.lineno)
            for field in ("body", "orelse", "finalbody"):
                self._bind_statements(found, getattr(statement, field, None) or [])
            for handler in getattr(statement, "handlers", None) or []:
                self._bind_statements(found, handler.body)

    # ----- a site ------------------------------------------------------------------------------

    def site(self, class_name: str, call: ast.Call) -> Site:
        evaluator = Evaluator(self)
        try:
            args, keywords = evaluator.arguments(call, self.scope_of(call), site=True)
            parameters = constructor_parameters(self.finder.reader(self.finder.model_path), class_name)
            full = render_call(class_name, list(args), dict(keywords)) if not evaluator.stacks else ""
            shrunk, depth = shrink(args, keywords, parameters)
            depths = {count for _, count in evaluator.stacks} | ({depth} if shrunk else set())
            if evaluator.stacks:
                deep = Evaluator(self, shallow=False)
                full = render_call(class_name, *deep.arguments(call, self.scope_of(call)))
                if len(depths) == 1:
                    depth = depths.pop()
                    shrunk = shrunk or ", ".join(f"{name} {count} -> {SHRUNK_DEPTH}" for name, count in evaluator.stacks)
                else:  # stacks of different depths: which is which is not known, so none is shrunk
                    return Site(self.path, call.lineno, full, reads=tuple(sorted(evaluator.reads)))
            expr = render_call(class_name, args, keywords)
        except Unevaluable as error:
            return Site(self.path, call.lineno, reason=str(error), reads=tuple(sorted(evaluator.reads)))
        except RecursionError:
            return Site(self.path, call.lineno, reason="its arguments nest too deeply to read")
        return Site(self.path, call.lineno, expr, reads=tuple(sorted(evaluator.reads)), shrunk=shrunk,
                    depth=depth, full=full if shrunk else "")


def walk_with_parents(tree: ast.AST) -> tuple[list[ast.AST], dict[ast.AST, ast.AST]]:
    """The nodes of the tree in `ast.walk`'s order (breadth first, a shared `Load` each time it is reached), and
    each node's parent as `ast.iter_child_nodes` from every node finds it (the last one for a shared node): one
    pass, for what three walks of every project file read before."""
    nodes, parents, node_type = [tree], {}, ast.AST
    for node in nodes:  # grows while read: a queue
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, node_type):
                parents[value] = node
                nodes.append(value)
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, node_type):
                        parents[item] = node
                        nodes.append(item)
    return nodes, parents


def argparse_dest(call: ast.Call) -> str:
    for item in call.keywords:
        if item.arg == "dest" and isinstance(item.value, ast.Constant) and isinstance(item.value.value, str):
            return item.value.value
    names = [arg.value for arg in call.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
    longs = [name for name in names if name.startswith("--")]
    chosen = longs[0] if longs else (names[0] if names else "")
    return chosen.lstrip("-").replace("-", "_")


class Evaluator:
    """The value of an expression of one file, from what the source spells (never running it)."""

    def __init__(self, reader: FileReader, depth: int = 0, reads: set[str] | None = None, shallow: bool = True,
                 steps: list[int] | None = None):
        self.reader = reader
        self.shallow = shallow  # a list of layers filled by a loop keeps SHRUNK_DEPTH of them
        self.depth = depth
        self.steps = steps if steps is not None else [0]  # values read so far, shared by the site's evaluators
        self.reads = reads if reads is not None else set()
        self.reads.add(reader.path)
        self.stacks: list[tuple[str, int]] = []  # (the list's name, its length) of layer lists built shallower

    def other(self, reader: FileReader) -> Evaluator:
        if self.depth > MAX_DEPTH:
            raise Unevaluable("it is built through too many steps to follow")
        evaluator = Evaluator(reader, self.depth + 1, self.reads, self.shallow, self.steps)
        evaluator.stacks = self.stacks
        return evaluator

    def arguments(self, call: ast.Call, scope: ast.AST, site: bool = False) -> tuple[list, dict]:
        """A call's positional and keyword values; at a `site`, an unreadable one is named in the reason."""
        if site:
            try:
                return self.arguments(call, scope)
            except Unevaluable as error:
                for node in [*call.args, *(item.value for item in call.keywords)]:
                    try:
                        self.value(node.value if isinstance(node, ast.Starred) else node, scope)
                    except Unevaluable:
                        raise Unevaluable(f"`{ast.unparse(node)}`: {error}") from None
                raise
        args: list = []
        keywords: dict = {}
        for arg in call.args:
            if isinstance(arg, ast.Starred):
                value = self.value(arg.value, scope)
                if not isinstance(value, (list, tuple)):
                    raise Unevaluable(f"`*{ast.unparse(arg.value)}` is not a list")
                args.extend(value)
            else:
                args.append(self.value(arg, scope))
        for item in call.keywords:
            if item.arg is None:
                value = self.value(item.value, scope)
                mapping = value.values if isinstance(value, Namespace) else value
                if not isinstance(mapping, dict) or not all(isinstance(key, str) for key in mapping):
                    raise Unevaluable(f"`**{ast.unparse(item.value)}` is not a mapping of names")
                keywords.update(mapping)
            else:
                keywords[item.arg] = self.value(item.value, scope)
        return args, keywords

    def value(self, node: ast.AST, scope: ast.AST):
        self.steps[0] += 1
        if self.steps[0] > MAX_STEPS:
            raise OutOfSteps(f"`{ast.unparse(node)}` is built through too many steps to follow")
        if self.depth > MAX_DEPTH:
            raise Unevaluable(f"`{ast.unparse(node)}` is built through too many steps to follow")
        self.depth += 1
        try:
            return self._value(node, scope)
        finally:
            self.depth -= 1

    def _value(self, node: ast.AST, scope: ast.AST):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)) and not any(isinstance(e, ast.Starred) for e in node.elts):
            values = [self.value(element, scope) for element in node.elts]
            return tuple(values) if isinstance(node, ast.Tuple) else values
        if isinstance(node, ast.Dict):
            result = {}
            for key, item in zip(node.keys, node.values):
                value = self.value(item, scope)
                if key is None:
                    result.update(value.values if isinstance(value, Namespace) else value)
                else:
                    result[self.value(key, scope)] = value
            return result
        if isinstance(node, ast.JoinedStr):
            return "".join(str(self.value(part.value, scope)) if isinstance(part, ast.FormattedValue)
                           else str(part.value) for part in node.values)
        if isinstance(node, (ast.UnaryOp, ast.BinOp, ast.BoolOp, ast.Compare, ast.IfExp)):
            return self.operation(node, scope)
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            held = instance_read(node, scope, self.reader.parents)
            if held is not None:  # `self.hparams.width`, `self.out_dim`: what the class set before
                return self.value(held.node, held.function)
        if isinstance(node, ast.ListComp):
            return self.repeated(node, scope)
        if isinstance(node, ast.Name):
            return self.name(node, scope)
        if isinstance(node, ast.Attribute):
            return self.attribute(node, scope)
        if isinstance(node, ast.Subscript):
            base = self.value(node.value, scope)
            key = self.value(node.slice, scope)
            return member(base, key, node)
        if isinstance(node, ast.Call):
            return self.call(node, scope)
        raise Unevaluable(f"`{ast.unparse(node)}` is not a value reslint reads without running the code")

    def operation(self, node: ast.AST, scope: ast.AST):
        try:
            if isinstance(node, ast.IfExp):
                return self.value(node.body if self.value(node.test, scope) else node.orelse, scope)
            if isinstance(node, ast.UnaryOp):
                operand = self.value(node.operand, scope)
                return {ast.USub: lambda v: -v, ast.UAdd: lambda v: +v, ast.Not: lambda v: not v,
                        ast.Invert: lambda v: ~v}[type(node.op)](operand)
            if isinstance(node, ast.BoolOp):
                value = None
                for item in node.values:
                    value = self.value(item, scope)
                    if bool(value) == isinstance(node.op, ast.Or):
                        return value
                return value
            if isinstance(node, ast.Compare):
                left = self.value(node.left, scope)
                for op, right_node in zip(node.ops, node.comparators):
                    right = self.value(right_node, scope)
                    if not COMPARISONS[type(op)](left, right):
                        return False
                    left = right
                return True
            left, right = self.value(node.left, scope), self.value(node.right, scope)
            if isinstance(node.op, ast.Pow) and isinstance(right, (int, float)) and abs(right) > 64:
                raise Unevaluable(f"`{ast.unparse(node)}` is too large")
            if isinstance(node.op, ast.Mult) and isinstance(left, (str, list, tuple)) and len(left) * right > 10_000:
                raise Unevaluable(f"`{ast.unparse(node)}` is too large")
            return BINARY[type(node.op)](left, right)
        except Unevaluable:
            raise
        except Exception as error:  # noqa: BLE001 - values of the wrong kind: 1 / 0, "a" - 1, a Code in arithmetic
            raise Unevaluable(f"`{ast.unparse(node)}` cannot be computed ({type(error).__name__})") from None

    # ----- names -------------------------------------------------------------------------------

    def name(self, node: ast.Name, scope: ast.AST, line: int | None = None):
        name = node.id
        line = node.lineno if line is None and hasattr(node, "lineno") else line
        current: ast.AST | None = scope
        while current is not None:
            assigned = self.reader.bindings(current).get(name)
            parameter = parameter_of(current, name) if isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                else None
            before = [value for at, value in assigned or () if line is None or at < line]
            if not before and parameter is not None:
                # `num_kv_heads = num_kv_heads if num_kv_heads else num_heads`: the name read on the right is
                # the parameter, not the assignment being evaluated
                return self.parameter(current, parameter)
            if assigned:
                before = before or [value for _, value in assigned]
                value = before[-1]
                if isinstance(value, ast.Name) and value.id in ("<loop>", "<unpacked>"):
                    raise Unevaluable(f"`{name}` is set by a {value.id[1:-1]} statement")
                if self.empty_list(value) and line is not None:
                    return self.appended(name, value, current, line)
                return self.value(value, current)
            current = self.reader.scope_of(current) if current is not self.reader.tree else None
        if name in self.reader.imports:
            return self.imported(name)
        if name in self.reader.functions or name in self.reader.classes:
            return Code(name) if name in self.reader.finder.module_names else Reference(self.reader, name)
        if name in ("None", "True", "False"):
            return {"None": None, "True": True, "False": False}[name]
        raise Unevaluable(f"`{name}` is not defined where reslint can read it")

    def empty_list(self, node: ast.AST) -> bool:
        """`[]`, `list()` or `nn.ModuleList()`: a list the code fills after it (`layers.append(layer)`)."""
        if isinstance(node, ast.List):
            return not node.elts
        return isinstance(node, ast.Call) and not node.args and not node.keywords and \
            self.reader.qualified(node.func).rsplit(".", 1)[-1] in ("list", "ModuleList")

    def appended(self, name: str, empty: ast.AST, scope: ast.AST, line: int):
        """The list `name` as the statements of `scope` before `line` fill it: `name.append(x)`, and
        `for _ in range(n): ... name.append(x)` (kept SHRUNK_DEPTH long; the stack's depth is n)."""
        items: list = []
        for statement in getattr(scope, "body", []):
            if statement.lineno <= empty.lineno or (statement.end_lineno or statement.lineno) >= line:
                continue
            mentions = any(isinstance(node, ast.Name) and node.id == name for node in ast.walk(statement))
            if not mentions:
                continue
            if appended_value(statement, name) is not None:
                items.append(self.value(appended_value(statement, name), scope))
                continue
            looped = appended_value(statement.body[-1], name) if isinstance(statement, ast.For) and \
                statement.body and not statement.orelse else None
            count_node = range_count(statement, self.reader) if looped is not None else None
            if count_node is None or sum(isinstance(node, ast.Name) and node.id == name
                                         for node in ast.walk(statement)) != 1:
                raise Unevaluable(f"`{name}` is filled by code reslint does not follow")
            items += self.copies(looped, count_node, scope, name)
        if isinstance(empty, ast.Call) and self.reader.qualified(empty.func).rsplit(".", 1)[-1] == "ModuleList":
            return Code(f"torch.nn.ModuleList({render(items)})")
        return items

    def repeated(self, node: ast.ListComp, scope: ast.AST) -> list:
        """`[layer for _ in range(n)]`: n copies of an element that does not read the loop's variable (kept
        SHRUNK_DEPTH long, like a list filled by a loop)."""
        loop = node.generators[0] if len(node.generators) == 1 else None
        count_node = range_count(loop, self.reader) if loop is not None and not loop.ifs else None
        names = {item.id for item in ast.walk(loop.target) if isinstance(item, ast.Name)} if loop is not None else set()
        if count_node is None or any(isinstance(item, ast.Name) and item.id in names for item in ast.walk(node.elt)):
            raise Unevaluable(f"`{ast.unparse(node)}` is filled by code reslint does not follow")
        return self.copies(node.elt, count_node, scope, ast.unparse(count_node))

    def copies(self, element: ast.expr, count_node: ast.expr, scope: ast.AST, name: str) -> list:
        """`element` as many times as `count_node` says, SHRUNK_DEPTH at most where shallow (the stack `name` keeps
        its depth)."""
        count = self.value(count_node, scope)
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise Unevaluable(f"`{name}` is filled {ast.unparse(count_node)} times, not a count")
        kept = min(count, SHRUNK_DEPTH) if self.shallow else count
        if kept < count:
            self.stacks.append((name, count))
        return [self.value(element, scope) for _ in range(kept)]

    def imported(self, local: str):
        module, level, name = self.reader.imports[local]
        if not level and module.split(".")[0] == "torch":
            return Code(f"{module}.{name}" if name else module)
        if not level and module == "math" and not name:
            return Module("math")
        path = self.reader.module_file(module, level)
        other = self.reader.finder.reader(path) if path else None
        if name and name in self.reader.finder.module_names and (other is None or name in other.classes):
            return Code(name)  # a class the model's module has too: built for real
        if other is not None and not name:
            return ModuleRef(other)
        if other is not None:
            if name in other.functions or name in other.classes:
                return Reference(other, name)
            return self.other(other).name(ast.Name(id=name, ctx=ast.Load()), other.tree, line=None)
        if not level and name:
            raise Unevaluable(f"`{local}` comes from the package `{module}`, whose code reslint does not run")
        if not level:
            raise Unevaluable(f"`{local}` is the module `{module}`, whose code reslint does not run")
        raise Unevaluable(f"`{local}` comes from `{'.' * level}{module}`, which reslint does not find")

    def attribute(self, node: ast.Attribute, scope: ast.AST):
        base = self.value(node.value, scope)
        if isinstance(base, Code):
            return Code(f"{base.text}.{node.attr}")
        if isinstance(base, Module) and hasattr(math, node.attr):
            return getattr(math, node.attr)
        if isinstance(base, ModuleRef):
            other = base.reader
            if node.attr in other.functions or node.attr in other.classes:
                return Reference(other, node.attr)
            return self.other(other).name(ast.Name(id=node.attr, ctx=ast.Load()), other.tree, line=None)
        return member(base, node.attr, node)

    def parameter(self, function: ast.FunctionDef | ast.AsyncFunctionDef, parameter: ast.arg):
        """A function parameter's value: Hydra's config, else what the function's first readable caller passes,
        else its default."""
        hydra = self.hydra(function)
        if hydra is not None and parameter is function.args.args[0]:
            return hydra
        for reader, call in self.reader.finder.calls_to(function.name, self.reader.path):
            if reader.scope_of(call) is function:
                continue
            argument = bound_argument(function, parameter, call)
            if argument is None:
                continue
            try:
                return self.other(reader).value(argument, reader.scope_of(call))
            except OutOfSteps:
                raise
            except Unevaluable:
                continue
        default = parameter_default(function, parameter)
        if default is not None:
            return self.value(default, self.reader.scope_of(function))
        raise Unevaluable(f"the parameter `{parameter.arg}` of `{function.name}()` gets no value reslint can read")

    def hydra(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> Namespace | None:
        for decorator in function.decorator_list:
            if isinstance(decorator, ast.Call) and self.reader.qualified(decorator.func).endswith("hydra.main"):
                keywords = {item.arg: item.value for item in decorator.keywords}
                path = keywords.get("config_path")
                name = keywords.get("config_name")
                path_value = self.value(path, self.reader.tree) if path is not None else "."
                name_value = self.value(name, self.reader.tree) if name is not None else "config"
                if not isinstance(path_value, str) or not isinstance(name_value, str):
                    return None
                data, reads = hydra_config(path_value, name_value, self.reader.path, str(self.reader.finder.top))
                if data is None:
                    raise Unevaluable(f"the Hydra config `{name_value}` in `{path_value}` is not found")
                self.reads.update(reads)
                return Namespace(data)
        return None

    # ----- calls -------------------------------------------------------------------------------

    def call(self, node: ast.Call, scope: ast.AST):
        qualified = self.reader.qualified(node.func)
        last = qualified.rsplit(".", 1)[-1]
        if qualified.endswith(("parse_args", "parse_known_args")) and isinstance(node.func, ast.Attribute):
            return self.argparse_defaults()
        if qualified == "open" or qualified.endswith("io.open"):
            path = self.value(node.args[0], scope) if node.args else None
            if not isinstance(path, str):
                raise Unevaluable(f"`{ast.unparse(node)}` opens a file reslint cannot name")
            return OpenFile(path)
        if qualified.endswith(DICT_LOADERS) or qualified.endswith(ATTRIBUTE_LOADERS):
            source = self.value(node.args[0], scope) if node.args else None
            name = source.path if isinstance(source, OpenFile) else source
            if not isinstance(name, str):
                raise Unevaluable(f"`{ast.unparse(node)}` reads a config reslint cannot name")
            data = self.config(name, node)
            return Namespace(data) if qualified.endswith(ATTRIBUTE_LOADERS) else data
        if qualified in ("os.path.join", "posixpath.join"):
            parts = [self.value(arg, scope) for arg in node.args]
            if not all(isinstance(part, str) for part in parts):
                raise Unevaluable(f"`{ast.unparse(node)}` joins values that are not strings")
            return os.path.join(*parts)
        if qualified in ("vars", "dict", "OmegaConf.to_container", "omegaconf.OmegaConf.to_container") and \
                len(node.args) <= 1:
            args, keywords = self.arguments(node, scope)
            base = args[0] if args else {}
            base = base.values if isinstance(base, Namespace) else base
            if not isinstance(base, dict):
                raise Unevaluable(f"`{ast.unparse(node)}` is not a mapping")
            return {**base, **keywords}
        if isinstance(node.func, ast.Attribute) and node.func.attr == "get" and len(node.args) in (1, 2):
            base = self.value(node.func.value, scope)
            mapping = base.values if isinstance(base, Namespace) else base
            if isinstance(mapping, dict):
                key = self.value(node.args[0], scope)
                if key in mapping:
                    return wrap(mapping[key], base)
                return self.value(node.args[1], scope) if len(node.args) == 2 else None
        if qualified in PURE_BUILTINS and qualified not in self.reader.functions:
            args, keywords = self.arguments(node, scope)
            try:
                return PURE_BUILTINS[qualified](*args, **keywords)
            except Exception as error:  # noqa: BLE001 - int("x"), min() of nothing
                raise Unevaluable(f"`{ast.unparse(node)}` cannot be computed ({type(error).__name__})") from None
        callee = self.value(node.func, scope) if isinstance(node.func, (ast.Name, ast.Attribute)) else None
        if isinstance(callee, Code):
            if callee.text.startswith("torch") and not callee.text.rsplit(".", 1)[-1][:1].isupper():
                raise Unevaluable(f"`{ast.unparse(node)}` runs a torch function, not a constructor")
            args, keywords = self.arguments(node, scope)
            return Code(render_call(callee.text, args, keywords))
        if isinstance(callee, Reference):
            return self.reference_call(callee, node, scope)
        raise Unevaluable(f"`{ast.unparse(node)}` runs code ({last or 'a call'}) that reslint does not run")

    def reference_call(self, callee: Reference, node: ast.Call, scope: ast.AST):
        """A config class of the project (its defaults and the call's keywords), or a helper function
        of the project (its return expression, with the call's arguments bound)."""
        reader = callee.reader
        args, keywords = self.arguments(node, scope)
        if callee.name in reader.classes and (reader.is_module_class(callee.name) or
                                              reader.defines(callee.name, "__call__")):
            # a layer built for the model (`mlp=FeedForward(...)`, `output=TiedLinear(embedding)`): the model
            # calls it, so a stand-in namespace would not do
            return Code(render_call(f"{IMPORT}({reader.importable_name()!r}).{callee.name}", args, keywords))
        if callee.name in reader.classes:
            return Namespace(self.other(reader).instance(reader.classes[callee.name], args, keywords))
        function = reader.functions[callee.name]
        returns = [item.value for item in ast.walk(function) if isinstance(item, ast.Return) and item.value is not None]
        if len(returns) != 1:
            raise Unevaluable(f"`{callee.name}()` returns through more than one path")
        bound = bind_arguments(function, args, keywords)
        return self.other(reader).with_bound(function, bound).value(returns[0], function)

    def with_bound(self, function: ast.AST, bound: dict) -> Evaluator:
        evaluator = BoundEvaluator(self.reader, self.depth, self.reads, self.shallow, self.steps)
        evaluator.stacks = self.stacks
        evaluator.bound_values = {function: bound}
        return evaluator

    def instance(self, cls: ast.ClassDef, args: list, keywords: dict) -> dict:
        """The attribute values of a config-class instance: class-level defaults, then `__init__`'s
        `self.x = parameter` with the call's arguments and the parameters' defaults."""
        values: dict = {}
        fields: list[str] = []
        for statement in cls.body:
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                fields.append(statement.target.id)
                if statement.value is not None:
                    values[statement.target.id] = self.value(statement.value, self.reader.tree)
            elif isinstance(statement, ast.Assign) and len(statement.targets) == 1 and \
                    isinstance(statement.targets[0], ast.Name):
                values[statement.targets[0].id] = self.value(statement.value, self.reader.tree)
        init = next((item for item in cls.body if isinstance(item, ast.FunctionDef) and item.name == "__init__"), None)
        if init is None:
            for name, value in zip(fields, args):
                values[name] = value
            values.update(keywords)
            return values
        bound = bind_arguments(init, [None, *args], keywords)
        for statement in ast.walk(init):
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                target = statement.targets[0]
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and \
                        target.value.id == "self" and isinstance(statement.value, ast.Name):
                    name = statement.value.id
                    if name in bound:
                        values[target.attr] = bound[name]
                    else:
                        parameter = parameter_of(init, name)
                        default = parameter_default(init, parameter) if parameter is not None else None
                        if default is not None:
                            values[target.attr] = self.value(default, self.reader.tree)
        return values

    def argparse_defaults(self) -> Namespace:
        values = {}
        for dest, call in self.reader.arguments.items():
            keywords = {item.arg: item.value for item in call.keywords}
            if "default" in keywords:
                value = self.value(keywords["default"], self.reader.scope_of(call))
                kind = self.reader.qualified(keywords["type"]) if "type" in keywords else ""
                if isinstance(value, str) and kind in ("int", "float"):
                    try:
                        value = PURE_BUILTINS[kind](value)
                    except ValueError:
                        pass
                values[dest] = value
            else:
                action = keywords.get("action")
                action_name = action.value if isinstance(action, ast.Constant) else ""
                if action_name == "store_true":
                    values[dest] = False
                elif action_name == "store_false":
                    values[dest] = True
                elif isinstance(keywords.get("required"), ast.Constant) and keywords["required"].value is True or \
                        not any(isinstance(arg, ast.Constant) and str(arg.value).startswith("-") for arg in call.args):
                    values[dest] = Missing(f"the command-line argument `{dest}` has no default")
                else:
                    values[dest] = None
        return Namespace(values)

    def config(self, name: str, node: ast.AST) -> dict:
        path = find_config(name, self.reader.path, self.reader.finder.root)
        # Read only inside the project the script belongs to (a symlink or `../..` out of it is refused).
        data = read_config(path, str(self.reader.finder.top)) if path else None
        if data is None:
            raise Unevaluable(f"`{ast.unparse(node)}`: the config {name!r} is not found or not read")
        self.reads.add(path)
        return data


class BoundEvaluator(Evaluator):
    """An evaluator inside a helper function whose parameters the call bound."""

    bound_values: dict

    def parameter(self, function, parameter):
        bound = self.bound_values.get(function, {})
        if parameter.arg in bound:
            return bound[parameter.arg]
        return super().parameter(function, parameter)


@dataclass(frozen=True)
class Reference:
    """A class or function of a project file that the expression may read but not run."""

    reader: FileReader
    name: str


@dataclass(frozen=True)
class ModuleRef:
    reader: FileReader


@dataclass(frozen=True)
class Module:
    name: str


@dataclass(frozen=True)
class Missing:
    why: str


def member(base, key, node: ast.AST):
    mapping = base.values if isinstance(base, Namespace) else base
    try:
        value = mapping[key]
    except (KeyError, IndexError, TypeError):
        raise Unevaluable(f"`{ast.unparse(node)}` is not set in what reslint read") from None
    if isinstance(value, Missing):
        raise Unevaluable(f"`{ast.unparse(node)}`: {value.why}")
    return wrap(value, base)


def wrap(value, base):
    """A nested mapping read by attribute (OmegaConf, Hydra) stays readable by attribute."""
    return Namespace(value) if isinstance(base, Namespace) and isinstance(value, dict) else value


def parameter_of(function: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, name: str) -> ast.arg | None:
    arguments = function.args
    for parameter in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs):
        if parameter.arg == name:
            return parameter
    return None


def parameter_default(function, parameter: ast.arg) -> ast.expr | None:
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    if parameter in positional:
        offset = len(positional) - len(arguments.defaults)
        index = positional.index(parameter)
        return arguments.defaults[index - offset] if index >= offset else None
    index = arguments.kwonlyargs.index(parameter)
    return arguments.kw_defaults[index]


def appended_value(statement: ast.stmt, name: str) -> ast.expr | None:
    """`x` of the statement `name.append(x)`, else None."""
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        call = statement.value
        if isinstance(call.func, ast.Attribute) and call.func.attr == "append" and \
                isinstance(call.func.value, ast.Name) and call.func.value.id == name and \
                len(call.args) == 1 and not call.keywords:
            return call.args[0]
    return None


def range_count(loop: ast.For | ast.comprehension, reader: FileReader) -> ast.expr | None:
    """`n` of `for _ in range(n)` / `range(0, n)`, else None."""
    call = loop.iter
    if not (isinstance(call, ast.Call) and reader.qualified(call.func) == "range" and not call.keywords):
        return None
    if len(call.args) == 1:
        return call.args[0]
    if len(call.args) == 2 and isinstance(call.args[0], ast.Constant) and call.args[0].value == 0:
        return call.args[1]
    return None


def bound_argument(function, parameter: ast.arg, call: ast.Call) -> ast.expr | None:
    """The argument expression a call passes for `parameter` (None: not passed, or hidden in *args)."""
    for item in call.keywords:
        if item.arg == parameter.arg:
            return item.value
    positional = [*function.args.posonlyargs, *function.args.args]
    if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) and positional and \
            positional[0].arg in ("self", "cls"):
        positional = positional[1:]
    if parameter in positional:
        index = positional.index(parameter)
        plain = [arg for arg in call.args]
        if index < len(plain) and not any(isinstance(arg, ast.Starred) for arg in plain[:index + 1]):
            return plain[index]
    return None


def bind_arguments(function, args: list, keywords: dict) -> dict:
    positional = [*function.args.posonlyargs, *function.args.args]
    bound = {parameter.arg: value for parameter, value in zip(positional, args)}
    bound.update({key: value for key, value in keywords.items()
                  if parameter_of(function, key) is not None})
    return bound


def shrink(args: list, keywords: dict, parameters: list[str]) -> tuple[str, int]:
    """Build a deep model with SHRUNK_DEPTH layers where one argument sets its depth (by keyword, or by
    position with `parameters`, the constructor's parameter names): ("num_layers 12 -> 2", 12), or
    ("", 0). Two depth arguments (an encoder's and a decoder's) are kept: which stack is which is not known."""
    named = {**{name: index for index, name in enumerate(parameters[:len(args)])}, **dict.fromkeys(keywords)}
    depths = [name for name in named if name in DEPTH_KEYWORDS]
    if len(depths) != 1:
        return "", 0
    name = depths[0]
    index = named[name]
    original = args[index] if index is not None else keywords[name]
    if not isinstance(original, int) or isinstance(original, bool) or original <= SHRUNK_DEPTH:
        return "", 0
    if index is not None:
        args[index] = SHRUNK_DEPTH
    else:
        keywords[name] = SHRUNK_DEPTH
    return f"{name} {original} -> {SHRUNK_DEPTH}", original


def constructor_parameters(reader: FileReader | None, class_name: str) -> list[str]:
    """The positional parameter names of a class's `__init__` (after `self`), as its file spells them."""
    cls = reader.classes.get(class_name) if reader is not None else None
    init = next((item for item in cls.body if isinstance(item, ast.FunctionDef) and item.name == "__init__"),
                None) if cls is not None else None
    if init is None:
        return []
    return [parameter.arg for parameter in (*init.args.posonlyargs, *init.args.args)][1:]


def render_call(callee: str, args: list, keywords: dict) -> str:
    parts = [render(arg) for arg in args]
    for key, value in keywords.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise Unevaluable(f"the keyword {key!r} is not a Python name")
        parts.append(f"{key}={render(value)}")
    return f"{callee}({', '.join(parts)})"


def render(value) -> str:
    """Python source for a value read from the project."""
    if isinstance(value, Code):
        return value.text
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise Unevaluable(f"{value!r} is not a finite number")
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(render(item) for item in value) + "]"
    if isinstance(value, tuple):
        return "(" + "".join(render(item) + ", " for item in value) + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{render(key)}: {render(item)}" for key, item in value.items()) + "}"
    if isinstance(value, Namespace):
        fields = {key: Namespace(item) if isinstance(item, dict) else item for key, item in value.values.items()
                  if not isinstance(item, Missing)}
        return f"{NAMESPACE}(**" + render(fields) + ")"
    if isinstance(value, Reference):
        raise Unevaluable(f"`{value.name}` is defined outside the model's module")
    raise Unevaluable(f"a {type(value).__name__} is not a value the constructor can take")


BINARY = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
    ast.Pow: lambda a, b: a ** b,
}
COMPARISONS = {
    ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b,
    ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b, ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
