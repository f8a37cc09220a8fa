"""Index of one file: imports, classes, the submodules each `__init__` declares, constants.

Nothing here runs user code: constructor calls are recorded as `ModuleSpec`s with their
argument expressions, and literal values are folded only where the source spells them.

What lives in other files of the project is asked of the project index (`reslint.project_index`,
given the file's `source_path`): the config classes the file imports and their defaults, a
config field's default elsewhere in the project (a config class, a training script's argparse
options), whether an imported class or function is a norm, whether a helper like `clones`
builds a stack. The files read that way are listed in `config_reads`, so that a cached result
is dropped when one of them changes.
"""

from __future__ import annotations

import ast
import io
import math
import os
import re
import tokenize
import weakref
from dataclasses import dataclass, field

from reslint.static import torch_api
from reslint.static.lazy_libcst import LazyLibcst
from reslint.static.literals import literal_eval
from reslint.static.walk import gather, walk

cst = LazyLibcst(globals())  # the config reader (ConfigIndex) of a file without module classes needs no libcst

UNKNOWN = object()
# Names a configuration object goes by, whose `.get(KEY, DEFAULT)` reads a config field.
CONFIG_OBJECT_NAMES = ("config", "cfg", "args", "opt", "opts", "hparams", "kwargs", "params")
# torch modules a model class may derive from without a forward of its own (`class L(nn.TransformerEncoderLayer)`)
TORCH_MODULE_BASES = ("TransformerEncoderLayer", "TransformerDecoderLayer", "Transformer", "LayerNorm")


class WeakOwner:
    """`ModuleSpec.owner`, held weakly: a class's submodule specs point back at the class (`ClassInfo.submodules`),
    and the cycle kept the file's libcst tree for the cyclic collector. The class outlives its specs (its index or
    an as-built copy holds it); one gone while a spec is read is an error, never a silent None."""

    def __set_name__(self, owner, name: str) -> None:
        self.slot = "_" + name

    def __get__(self, spec, kind=None):
        if spec is None:
            return None  # the dataclass field's default
        ref = spec.__dict__[self.slot]
        if ref is None:
            return None
        info = ref()
        if info is None:
            raise ReferenceError("a submodule spec outlived the class it belongs to")
        return info

    def __set__(self, spec, info) -> None:
        spec.__dict__[self.slot] = None if info is None else weakref.ref(info)


@dataclass(eq=False)
class ModuleSpec:
    """A module as constructed in `__init__`: `nn.Linear(d, 4 * d)`, `Block(cfg)`, a container."""

    kind: str  # "builtin", "local", "external", "container", "passed", "unknown"
    name: str  # torch member ("Linear"), local class name, qualified external name
    node: cst.CSTNode | None
    owner: ClassInfo | None = WeakOwner()  # always given: a default only because the descriptor gives one
    args: tuple[cst.Arg, ...] = ()
    elements: tuple[ModuleSpec, ...] = ()  # containers: elements in order (or distinct repeated ones)
    repeated: bool = False  # container built by repeating its element(s) (comprehension, loop, clones)
    depth: int | None = None
    depth_known: bool = True
    attr: str = ""
    named: dict = field(default_factory=dict)  # nn.ModuleDict entries

    def arg(self, position: int, keyword: str) -> cst.BaseExpression | None:
        positional = [a for a in self.args if a.keyword is None and a.star == ""]
        for a in self.args:
            if a.keyword is not None and a.keyword.value == keyword:
                return a.value
        if position < len(positional):
            return positional[position].value
        return None


@dataclass(eq=False)
class ClassInfo:
    name: str
    node: cst.ClassDef
    bases: tuple[str, ...]
    methods: dict[str, cst.FunctionDef] = field(default_factory=dict)
    submodules: dict[str, ModuleSpec] = field(default_factory=dict)
    attr_values: dict[str, cst.BaseExpression] = field(default_factory=dict)  # self.x = <expr>
    init_defaults: dict[str, cst.BaseExpression | None] = field(default_factory=dict)
    class_fields: dict[str, cst.BaseExpression] = field(default_factory=dict)  # dataclass fields
    # `if use_layer_norm: self.layer_norm = nn.LayerNorm(d)`: attribute -> (parameter, the value that builds it)
    built_if: dict[str, tuple[str, bool]] = field(default_factory=dict)


class FileIndex:
    def __init__(self, module: cst.Module, source_path: str | None = None, text: str | None = None):
        """`source_path`: where the file lies, to read the config modules it imports (none when not given).
        `text`: the module's source, when known (a file without `add_argument` has no command-line defaults
        to walk the module for)."""
        self.module = module
        self.source_path = source_path
        self._argument_defaults: dict[str, list[cst.BaseExpression]] | None = \
            {} if text is not None and "add_argument" not in text else None
        self.aliases: dict[str, str] = {}
        self.classes: dict[str, ClassInfo] = {}
        self.functions: dict[str, cst.FunctionDef] = {}
        self.constants: dict[str, cst.BaseExpression] = {}
        self._returning: set[str] = set()  # factory functions being resolved (a recursive one stops there)
        # Answers kept once the index is complete (`_complete`): while `__init__` scans the constructors, a
        # field's default or a submodule may still be in a class not scanned yet.
        self._complete = False
        self._config_fields: dict[tuple[str, int], object] = {}
        self._module_classes: dict[ClassInfo, bool] = {}  # is_module_class's answers (bases and methods are fixed)
        self._copies: dict[str, bool] = {}  # builds_copies' answers
        self._wrappers: dict[str, object] = {}  # residual_wrapper's answers
        self._lookups: dict[tuple, object] = {}  # (class, kind, name) -> what `method`, `submodule`, `attr_value` found
        self._body_nodes: dict[ClassInfo, BodyNodes] = {}
        self._collect(module)
        self.config_reads: list[str] = []  # the imported config modules read (absolute paths)
        self.config_sources: list[FileIndex] = []  # and their indexes
        self.config_unread = False  # a config class the file imports could not be read
        if source_path is not None:
            from reslint.project_index import ProjectIndex

            found, self.config_unread = ProjectIndex.for_file(source_path).imported_configs(self, source_path)
            self.config_reads = [path for path, _ in found]
            self.config_sources = [index for _, index in found]
        for info in self.classes.values():
            self._collect_init(info)
        self._complete = True

    @staticmethod
    def config_module(source: bytes, tree: ast.Module | None = None) -> FileIndex | None:
        """A config module's index for its defaults only, read with `ast` (`ConfigIndex`); None when CPython
        does not parse it (the project index then reads it with libcst). `tree`: CPython's AST of the source's
        UTF-8 text, when parsed already."""
        return config_index(source, tree)

    # ----- imports and names -------------------------------------------------

    def _collect(self, module: cst.Module) -> None:
        for statement in module.body:
            self._collect_statement(statement)

    def _collect_statement(self, statement: cst.CSTNode) -> None:
        if isinstance(statement, cst.ClassDef):
            bases = tuple(self.qualified(arg.value) or "" for arg in statement.bases)
            info = ClassInfo(statement.name.value, statement, bases)
            for item in statement.body.body:
                if isinstance(item, cst.FunctionDef):
                    info.methods[item.name.value] = item
                elif isinstance(item, cst.SimpleStatementLine):
                    for small in item.body:
                        if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.value:
                            info.class_fields[small.target.value] = small.value
                        elif isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(
                                small.targets[0].target, cst.Name):
                            info.class_fields[small.targets[0].target.value] = small.value
            self.classes[info.name] = info
        elif isinstance(statement, cst.FunctionDef):
            self.functions[statement.name.value] = statement
        elif isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Import):
                    for alias in small.names:
                        dotted = dotted_name(alias.name)
                        if alias.asname is not None:
                            self.aliases[alias.asname.name.value] = dotted
                        else:
                            top = dotted.split(".")[0]
                            self.aliases[top] = top
                elif isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
                    base = "." * len(small.relative) + (dotted_name(small.module) if small.module else "")
                    for alias in small.names:
                        name = dotted_name(alias.name)
                        local = alias.asname.name.value if alias.asname else name
                        self.aliases[local] = f"{base}.{name}" if not base.endswith(".") else base + name
                elif isinstance(small, cst.ImportFrom):
                    pass
                elif isinstance(small, cst.Assign):
                    for target in small.targets:
                        if isinstance(target.target, cst.Name):
                            self.constants[target.target.value] = small.value
                elif isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.value:
                    self.constants[small.target.value] = small.value
        elif isinstance(statement, (cst.If, cst.Try)):
            for inner in statement.body.body:
                self._collect_statement(inner)

    def qualified(self, expr: cst.BaseExpression) -> str | None:
        """Dotted name of an expression after resolving import aliases, e.g. `nn.Linear` → `torch.nn.Linear`."""
        if isinstance(expr, cst.Name):
            return self.aliases.get(expr.value, expr.value)
        if isinstance(expr, cst.Attribute):
            base = self.qualified(expr.value)
            return f"{base}.{expr.attr.value}" if base else None
        return None

    def torch_member(self, expr: cst.BaseExpression) -> str | None:
        qualified = self.qualified(expr)
        if qualified is None:
            return None
        member = torch_api.torch_member(qualified)
        if member is not None:
            return member
        # `nn` used without an import line (snippets): accept the conventional aliases.
        for alias in ("nn.functional.", "nn.", "F."):
            if qualified.startswith(alias) and qualified.split(".")[0] not in self.classes:
                return qualified[len(alias):]
        return None

    def builds_copies(self, qualified: str) -> bool:
        """Whether the function `qualified` names (of this file, or of another project file through the
        project index) returns a ModuleList/Sequential of copies of its first argument, as `clones` does."""
        if self.source_path is None:
            return False
        if qualified not in self._copies:  # asked for every call of an `__init__` that builds no known module
            from reslint.project_index import ProjectIndex

            through: list = []
            self._copies[qualified] = ProjectIndex.for_file(self.source_path).copies_first_argument(
                self.source_path, qualified, through)
            self.note_reads(through)
        return self._copies[qualified]

    def residual_wrapper(self, qualified: str):
        """The ResidualWrapper of a function imported from another project file that adds a callable argument's
        output to its data argument (`apply(f, x, residual=True)`), else None."""
        if self.source_path is None or "." not in qualified.lstrip("."):
            return None
        if qualified not in self._wrappers:
            from reslint.project_index import ProjectIndex

            through: list = []
            self._wrappers[qualified] = ProjectIndex.for_file(self.source_path).residual_wrapper(
                self.source_path, qualified, through)
            self.note_reads(through)
        return self._wrappers[qualified]

    def imported_norm_kind(self, qualified: str, evaluator_class) -> str | None:
        """The norm kind of a class or function imported from another project file that is a norm: a torch
        norm's subclass (`class FinalScale(nn.LayerNorm)`), a module or function normalising by hand
        (`from .functional import fast_layer_norm`); else None."""
        if self.source_path is None or "." not in qualified.lstrip(".") and not qualified.startswith("."):
            return None
        if not qualified.rsplit(".", 1)[-1][:1].isupper() and "norm" not in qualified.rsplit(".", 1)[-1].lower():
            return None  # only functions named as norms are read (`rotate_half` is not worth a parse)
        from reslint.project_index import ProjectIndex

        through: list = []
        kind = ProjectIndex.for_file(self.source_path).norm_kind(self.source_path, qualified, evaluator_class, through)
        self.note_reads(through)
        return kind

    def note_reads(self, paths) -> None:
        """Other project files a fact of this file was read from join `config_reads` (a cached result of the
        file goes stale when one of them changes)."""
        own = os.path.abspath(self.source_path) if self.source_path is not None else None
        self.config_reads.extend(path for path in dict.fromkeys(str(path) for path in paths)
                                 if path != own and path not in self.config_reads)

    # ----- classes -------------------------------------------------------------

    def is_module_class(self, info: ClassInfo, seen: frozenset = frozenset()) -> bool:
        if seen:
            return self._is_module_class(info, seen)
        known = self._module_classes.get(info)
        if known is None:
            known = self._module_classes[info] = self._is_module_class(info, seen)
        return known

    def _is_module_class(self, info: ClassInfo, seen: frozenset) -> bool:
        if self.method(info, "forward") is not None:
            return True
        for base in info.bases:
            if base.endswith("Module") or base.endswith("PreTrainedModel") or (
                    torch_api.torch_member(base) in TORCH_MODULE_BASES):
                return True
            local = self.classes.get(base)
            if local is not None and local.name not in seen and self.is_module_class(local, seen | {info.name}):
                return True
        return False

    def method(self, info: ClassInfo, name: str) -> cst.FunctionDef | None:
        key = (info, "method", name)  # the methods are known once the classes are collected
        if key not in self._lookups:
            self._lookups[key] = self._inherited(info, lambda cls: cls.methods.get(name))
        return self._lookups[key]

    def submodule(self, info: ClassInfo, attr: str) -> ModuleSpec | None:
        if not self._complete:
            return self._inherited(info, lambda cls: cls.submodules.get(attr))
        key = (info, "submodule", attr)
        if key not in self._lookups:
            self._lookups[key] = self._inherited(info, lambda cls: cls.submodules.get(attr))
        return self._lookups[key]

    def attr_value(self, info: ClassInfo, attr: str) -> cst.BaseExpression | None:
        if not self._complete:
            found = self._inherited(info, lambda cls: cls.attr_values.get(attr))
            return found if found is not None else info.class_fields.get(attr)
        key = (info, "attr_value", attr)
        if key not in self._lookups:
            found = self._inherited(info, lambda cls: cls.attr_values.get(attr))
            self._lookups[key] = found if found is not None else info.class_fields.get(attr)
        return self._lookups[key]

    def _inherited(self, info: ClassInfo, lookup, seen: frozenset = frozenset()):
        """`lookup` on the class, then on its bases defined in this file (cycles tolerated: the file may not run)."""
        found = lookup(info)
        if found is not None:
            return found
        for base in info.bases:
            local = self.classes.get(base)
            if local is not None and local.name not in seen and local is not info:
                found = self._inherited(local, lookup, seen | {info.name})
                if found is not None:
                    return found
        return None

    def _collect_init(self, info: ClassInfo) -> None:
        init = info.methods.get("__init__")
        if init is None:
            return
        params = init.params
        for param in list(params.params) + list(params.kwonly_params) + list(params.posonly_params):
            info.init_defaults[param.name.value] = param.default
        local_specs: dict[str, ModuleSpec] = {}
        self._scanned_helpers: set[str] = set()
        self._scan_init_body(info, init.body.body, local_specs, loop_count=None)

    def _scan_init_body(self, info, statements, local_specs, loop_count) -> None:
        for statement in statements:
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    self._scan_init_small(info, small, local_specs, loop_count)
            elif isinstance(statement, cst.For):
                count = self._range_count(info, statement.iter)
                self._scan_init_body(info, statement.body.body, local_specs, loop_count=count if count else UNKNOWN)
            elif isinstance(statement, (cst.If, cst.With, cst.Try, cst.While)):
                before = dict(info.submodules)
                self._scan_init_body(info, statement.body.body, local_specs, loop_count)
                built = dict(info.submodules)
                orelse = getattr(statement, "orelse", None)
                if isinstance(orelse, cst.Else):
                    self._scan_init_body(info, orelse.body.body, local_specs, loop_count)
                elif isinstance(orelse, cst.If):
                    self._scan_init_body(info, [orelse], local_specs, loop_count)
                parameter = parameter_test(info, statement.test) if isinstance(statement, cst.If) else None
                for attr, spec in built.items() if parameter is not None else ():
                    # built only when the parameter says so, None (or not set) otherwise
                    if attr not in before and info.submodules.get(attr) is spec:
                        info.built_if[attr] = parameter

    def _scan_init_small(self, info, small, local_specs, loop_count) -> None:
        if isinstance(small, (cst.Assign, cst.AnnAssign)):
            targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
            value = small.value
            if value is None:
                return
            for target in targets:
                if is_self_attr(target):
                    attr = target.attr.value
                    info.attr_values[attr] = value
                    spec = self.spec_from_expr(info, value, local_specs)
                    if spec is not None:
                        name_spec(spec, attr)
                        info.submodules[attr] = spec
                elif isinstance(target, cst.Name):
                    spec = self.spec_from_expr(info, value, local_specs)
                    if spec is None and isinstance(value, cst.List) and not value.elements:
                        # `layers = []` appended to, then `nn.Sequential(*layers)`: CvT's stages.
                        spec = ModuleSpec("container", "list", value, info, depth=0)
                    if spec is not None:
                        local_specs[target.value] = spec
        elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and (
                helper := self._init_helper(info, small.value)) is not None:
            # `self._init_submodules()`: the submodules a helper method of `__init__` builds are the class's (ESM's layers)
            self._scanned_helpers.add(helper.name.value)
            self._scan_init_body(info, helper.body.body, {}, loop_count)
        elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            call = small.value
            # self.layers.append(Block(...)) inside a loop builds a stack.
            func = call.func
            if (isinstance(func, cst.Attribute) and func.attr.value in ("append", "extend")
                    and (is_self_attr(func.value) or isinstance(func.value, cst.Name)) and call.args):
                attr = func.value.attr.value if is_self_attr(func.value) else ""
                container = info.submodules.get(attr) if attr else local_specs.get(func.value.value)
                element = self.spec_from_expr(info, call.args[0].value, local_specs)
                if container is not None and container.kind == "container" and element is not None:
                    repeated = loop_count is not None
                    container.elements = container.elements + (element,)
                    if repeated:
                        container.repeated = True
                        container.depth = loop_count if isinstance(loop_count, int) else None
                        container.depth_known = isinstance(loop_count, int)
                    elif container.depth is not None:
                        container.depth += 1

    def _init_helper(self, info: ClassInfo, call: cst.Call) -> cst.FunctionDef | None:
        """The method of this class (or a base in this file) that `self.NAME(...)` calls from `__init__`, once each."""
        if not is_self_attr(call.func) or call.func.attr.value in self._scanned_helpers | {"__init__"}:
            return None
        helper = self.method(info, call.func.attr.value)
        return helper if helper is not None and isinstance(helper.body, cst.IndentedBlock) else None

    def spec_from_expr(self, info: ClassInfo, expr: cst.BaseExpression, local_specs: dict) -> ModuleSpec | None:
        if isinstance(expr, cst.Name) and expr.value in local_specs:
            return local_specs[expr.value]
        if isinstance(expr, cst.Name) and expr.value in info.init_defaults:
            return ModuleSpec("passed", expr.value, expr, info)
        if isinstance(expr, cst.IfExp):
            # `nn.LayerNorm(d) if kwargs.get("layer_norm", "post") == "pre" else None`: the branch its defaults take
            decided = self.fold(info, expr.test) if reads_config_default(expr.test) else UNKNOWN
            if isinstance(decided, bool):  # (a test on a named parameter is each construction's: see `fold`)
                return self.spec_from_expr(info, expr.body if decided else expr.orelse, local_specs)
            body = self.spec_from_expr(info, expr.body, local_specs)
            orelse = self.spec_from_expr(info, expr.orelse, local_specs)
            return body or orelse
        if not isinstance(expr, cst.Call):
            member = self.class_reference(info, expr)
            return ModuleSpec("classref", member, expr, info) if member else None
        func = expr.func
        if isinstance(func, cst.Name) and func.value in local_specs and local_specs[func.value].kind == "classref":
            return ModuleSpec("builtin", local_specs[func.value].name, expr, info, tuple(expr.args))
        referenced = self.class_reference(info, func) if isinstance(func, cst.Name) else None
        if referenced is not None and (func.value in info.init_defaults or func.value in self.constants):
            return ModuleSpec("builtin", referenced, expr, info, tuple(expr.args))
        member = self.torch_member(func)
        if member is not None and member in torch_api.CONTAINER_MODULES:
            return self._container_spec(info, member, expr, local_specs)
        if member is not None and "." not in member and member[:1].isupper():
            return ModuleSpec("builtin", member, expr, info, tuple(expr.args))
        qualified = self.qualified(func)
        if qualified is not None and qualified in self.classes:
            if self.is_module_class(self.classes[qualified]):
                return ModuleSpec("local", qualified, expr, info, tuple(expr.args))
            return None
        if qualified is not None and expr.args and (qualified.split(".")[-1] in ("clones", "_get_clones", "get_clones")
                                                    or self.builds_copies(qualified)):
            element = self.spec_from_expr(info, expr.args[0].value, local_specs)
            depth = self.fold_int(info, expr.args[1].value) if len(expr.args) > 1 else None
            return ModuleSpec("container", "ModuleList", expr, info, tuple(expr.args),
                              elements=(element,) if element else (), repeated=True, depth=depth,
                              depth_known=depth is not None)
        if qualified is not None and qualified.split(".")[-1] in ("deepcopy", "copy") and expr.args:
            return self.spec_from_expr(info, expr.args[0].value, local_specs)
        returned = self._returned_module(qualified)
        if returned is not None:
            # `def FeedForward(dim): return nn.Sequential(nn.LayerNorm(dim), ...)`: the module it returns.
            self._returning.add(qualified)
            try:
                return self.spec_from_expr(info, returned, {})
            finally:
                self._returning.discard(qualified)
        if qualified is not None and qualified.split(".")[-1][:1].isupper():
            return ModuleSpec("external", qualified, expr, info, tuple(expr.args))
        return None

    def _returned_module(self, qualified: str | None) -> cst.BaseExpression | None:
        """The call a free function of this file consists of (`return nn.Sequential(...)`), if it is only that."""
        function = self.functions.get(qualified) if qualified else None
        if function is None or qualified in self._returning or not isinstance(function.body, cst.IndentedBlock):
            return None
        statements = [statement for statement in function.body.body if not (
            isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
            and isinstance(statement.body[0], cst.Expr) and isinstance(statement.body[0].value, cst.SimpleString))]
        if len(statements) != 1 or not isinstance(statements[0], cst.SimpleStatementLine):
            return None
        small = statements[0].body
        if len(small) == 1 and isinstance(small[0], cst.Return) and isinstance(small[0].value, cst.Call):
            return small[0].value
        return None

    def class_reference(self, info: ClassInfo, expr: cst.BaseExpression, depth: int = 0) -> str | None:
        """`nn.LayerNorm`, `partial(nn.LayerNorm, eps=1e-6)` or a name defaulting to one → "LayerNorm"."""
        if depth > 4:
            return None
        if isinstance(expr, cst.Call) and (self.qualified(expr.func) or "").endswith("partial") and expr.args:
            return self.class_reference(info, expr.args[0].value, depth + 1)
        if isinstance(expr, cst.Name):
            default = info.init_defaults.get(expr.value) if expr.value in info.init_defaults else None
            if default is None and expr.value in self.constants:
                default = self.constants[expr.value]
            if default is not None:
                return self.class_reference(info, default, depth + 1)
        member = self.torch_member(expr)
        if member is not None and "." not in member and member[:1].isupper():
            return member
        return None

    def _container_spec(self, info, member, call: cst.Call, local_specs) -> ModuleSpec:
        if member == "ModuleDict":
            named = {}
            source = call.args[0].value if call.args else None
            if isinstance(source, cst.Call) and self.qualified(source.func) == "dict":
                for arg in source.args:
                    if arg.keyword is not None:
                        spec = self.spec_from_expr(info, arg.value, local_specs)
                        if spec is not None:
                            named[arg.keyword.value] = spec
            elif isinstance(source, cst.Dict):
                for element in source.elements:
                    if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString):
                        spec = self.spec_from_expr(info, element.value, local_specs)
                        if spec is not None:
                            named[string_value(element.key)] = spec
            return ModuleSpec("container", member, call, info, tuple(call.args), named=named)
        elements: list[ModuleSpec] = []
        repeated = False
        depth: int | None = 0
        depth_known = True
        sources: list[cst.BaseExpression] = []
        for arg in call.args:
            value = arg.value
            if arg.star == "*" and isinstance(value, (cst.List, cst.Tuple, cst.ListComp, cst.GeneratorExp)):
                sources.append(value)
            elif arg.star == "" or arg.star == "*" and _local_list(value, local_specs):
                sources.append(value)
        for source in sources:
            listed = _local_list(source, local_specs)
            if listed is not None:  # a local list built by appends: its modules, repeated when a loop appended
                elements.extend(listed.elements)
                repeated = repeated or listed.repeated
                depth = depth + listed.depth if depth is not None and listed.depth is not None else None
                depth_known = depth_known and listed.depth_known
            elif isinstance(source, (cst.ListComp, cst.GeneratorExp)):
                repeated = True
                candidates = [source.elt.body, source.elt.orelse] if isinstance(source.elt, cst.IfExp) else [source.elt]
                for candidate in candidates:
                    spec = self.spec_from_expr(info, candidate, local_specs)
                    if spec is not None:
                        elements.append(spec)
                count = self._range_count(info, source.for_in.iter)
                if count is None:
                    depth, depth_known = None, False
                elif depth is not None:
                    depth += count
            elif isinstance(source, (cst.List, cst.Tuple)):
                for element in source.elements:
                    if isinstance(element, cst.StarredElement):
                        continue
                    spec = self.spec_from_expr(info, element.value, local_specs)
                    # Keep a place for what we cannot name (`ACT2FN[act]`): it may be the activation.
                    elements.append(spec or ModuleSpec("unknown", "", element.value, info))
                    if depth is not None:
                        depth += 1
            elif isinstance(source, cst.Call) and self.qualified(source.func) in ("OrderedDict",
                                                                                  "collections.OrderedDict"):
                continue
            else:
                spec = self.spec_from_expr(info, source, local_specs)
                elements.append(spec or ModuleSpec("unknown", "", source, info))
                if depth is not None:
                    depth += 1
        if not repeated and len(elements) > 1 and len({spec_identity(e) for e in elements}) == 1:
            repeated = True
        return ModuleSpec("container", member, call, info, tuple(call.args), elements=tuple(elements),
                          repeated=repeated, depth=depth, depth_known=depth_known)

    def _range_count(self, info: ClassInfo, iterable: cst.BaseExpression) -> int | None:
        if isinstance(iterable, cst.Call) and self.qualified(iterable.func) == "range" and iterable.args:
            args = [a.value for a in iterable.args]
            if len(args) == 1:
                return self.fold_int(info, args[0])
            start, stop = self.fold_int(info, args[0]), self.fold_int(info, args[1])
            if start is not None and stop is not None and len(args) == 2:
                return max(stop - start, 0)
        return None

    # ----- constant folding ------------------------------------------------------

    def fold_int(self, info: ClassInfo | None, expr: cst.BaseExpression) -> int | None:
        value = self.fold(info, expr)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def fold(self, info: ClassInfo | None, expr: cst.BaseExpression | None, depth: int = 0):
        """Evaluate a literal-ish expression (ints, floats, bools, names with literal defaults)."""
        if expr is None or depth > 8:
            return UNKNOWN
        if isinstance(expr, (cst.Integer, cst.Float)):
            return literal_number(expr)
        if isinstance(expr, cst.SimpleString):
            value = string_value(expr)
            return UNKNOWN if value is None else value
        if isinstance(expr, cst.Name):
            if expr.value in ("True", "False", "None"):
                return {"True": True, "False": False, "None": None}[expr.value]
            if info is not None and expr.value in info.init_defaults:
                return self.fold(None, info.init_defaults[expr.value], depth + 1)
            if expr.value in self.constants:
                return self.fold(None, self.constants[expr.value], depth + 1)
            return UNKNOWN
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
            value = self.fold(info, expr.expression, depth + 1)
            return -value if isinstance(value, (int, float)) else UNKNOWN
        if isinstance(expr, cst.BinaryOperation):
            left = self.fold(info, expr.left, depth + 1)
            right = self.fold(info, expr.right, depth + 1)
            if not isinstance(left, (int, float)) or not isinstance(right, (int, float)):
                return UNKNOWN
            operator = type(expr.operator)
            if operator is cst.Power and not small_power(left, right):
                return UNKNOWN
            try:
                return {
                    cst.Add: lambda: left + right, cst.Subtract: lambda: left - right,
                    cst.Multiply: lambda: left * right, cst.FloorDivide: lambda: left // right,
                    cst.Divide: lambda: left / right, cst.Power: lambda: left ** right,
                }[operator]()
            except (KeyError, ZeroDivisionError, OverflowError):
                return UNKNOWN
        if isinstance(expr, cst.Attribute):
            if is_self_attr(expr) and info is not None:
                value = self.attr_value(info, expr.attr.value)
                return self.fold(info, value, depth + 1) if value is not None else UNKNOWN
            return self.config_field(expr.attr.value, depth)
        if isinstance(expr, cst.Call):
            return self.fold_config_get(info, expr, depth)
        if isinstance(expr, cst.IfExp) and reads_config_default(expr.test):
            # Only a test on a config read (`kwargs.get("layer_norm", "post") == "pre"`): a test on a named
            # parameter (`if add_norm`) is what each construction sets (`Layer(dim, add_norm=i == depth - 1)`).
            decided = self.fold(info, expr.test, depth + 1)
            return self.fold(info, expr.body if decided else expr.orelse, depth + 1) \
                if isinstance(decided, bool) else UNKNOWN
        if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
            left = self.fold(info, expr.left, depth + 1)
            right = self.fold(info, expr.comparisons[0].comparator, depth + 1)
            if left is UNKNOWN or right is UNKNOWN or not is_hashable(left) or not is_hashable(right):
                return UNKNOWN
            operator = type(expr.comparisons[0].operator)
            if operator in (cst.Equal, cst.Is):
                return left == right
            if operator in (cst.NotEqual, cst.IsNot):
                return left != right
            return UNKNOWN
        return UNKNOWN

    def fold_config_get(self, info: ClassInfo | None, call: cst.Call, depth: int = 0):
        """`kwargs.get("layer_norm", "pre")`, `cfg.get(KEY, DEFAULT)` on a config object: the project's config
        default for KEY (a config class's field), else DEFAULT, what the key left out holds. UNKNOWN for any
        other call."""
        func = call.func
        args = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
        if not (isinstance(func, cst.Attribute) and func.attr.value in ("get", "pop") and args
                and isinstance(args[0], cst.SimpleString)):
            return UNKNOWN
        base = func.value.attr if is_self_attr(func.value) else func.value
        key = string_value(args[0])
        default = self.fold(info, args[1], depth + 1) if len(args) > 1 else None
        if not isinstance(base, cst.Name) or key is None:
            return UNKNOWN
        if base.value.lower() in CONFIG_OBJECT_NAMES:
            value = self.config_field(key, depth)
            return default if value is UNKNOWN else value
        return UNKNOWN

    def config_field(self, name: str, depth: int = 0):
        """`config.n_layer`: the default of a field or `__init__` argument of that name in a config class."""
        known = self._config_fields
        if not self._complete:
            return self._config_field(name, depth)
        key = (name, depth)
        if key not in known:
            known[key] = self._config_field(name, depth)
        return known[key]

    def _config_field(self, name: str, depth: int):
        values = set()
        for info in self.classes.values():
            if self.is_module_class(info):
                continue
            if name in info.class_fields:
                values.add(self.fold(None, info.class_fields[name], depth + 1))
            if name in info.init_defaults and info.init_defaults[name] is not None:
                values.add(self.fold(None, info.init_defaults[name], depth + 1))
        values.discard(UNKNOWN)
        if not values:
            # The config classes the file imports from other project files (read through the project index).
            for source in self.config_sources:
                values.add(source.config_field(name, depth + 1))
            values.discard(UNKNOWN)
        if not values and depth == 0:
            # `parser.add_argument("--pre-norm", ...)` here, or in the scripts that build this file's models.
            values = {self.fold(None, default) for default in self.argument_defaults().get(name, ())}
            if not values and self.source_path is not None:
                from reslint.project_index import ProjectIndex

                project = ProjectIndex.for_file(self.source_path)
                builders = project.builder_indexes(self.source_path, self)
                found = [(path, index.fold(None, default)) for path, index in builders
                         for default in index.argument_defaults().get(name, ())]
                found = [(path, value) for path, value in found if value is not UNKNOWN]
                if not found and not self.config_unread:  # a config class of the project with a field of this name
                    found = [(path, value) for path, value in project.config_defaults(name) if is_hashable(value)]
                values = {value for _, value in found}
                # every builder asked, with a default or not: one that gains a default changes the value
                self.note_reads([*(path for path, _ in builders), *(path for path, _ in found)])
            values.discard(UNKNOWN)
        if len(values) == 1:
            return values.pop()
        return UNKNOWN

    def body_nodes(self, info: ClassInfo) -> BodyNodes:
        """The names, calls and attributes of the class's body and the calls and assignments of its `__init__`'s,
        gathered by one walk for every look at them (stream ends, the classes a constructor builds, command-line
        defaults): each of them walked the body again before."""
        known = self._body_nodes.get(info)
        if known is None:
            init = info.methods.get("__init__")
            names, calls, attributes = [], [], []
            gather(info.node.body, {cst.Name: names, cst.Call: calls, cst.Attribute: attributes},
                   skipped=init.body if init is not None else None)
            init_names, init_calls, init_attributes, init_assignments = [], [], [], []
            if init is not None:
                gather(init.body, {cst.Name: init_names, cst.Call: init_calls, cst.Attribute: init_attributes,
                                   cst.Assign: init_assignments})
            known = self._body_nodes[info] = BodyNodes(
                names=names + init_names, calls=calls + init_calls, attributes=attributes + init_attributes,
                init_calls=init_calls, init_assignments=init_assignments)
        return known

    def argument_calls(self) -> list[cst.Call]:
        """The `<parser>.add_argument(...)` calls of the module: those of the class bodies gathered already
        (`body_nodes`), the rest walked."""
        outside = _ArgumentCallsOutside({id(info.node.body) for info in self.classes.values()})
        walk(self.module, outside)  # in no particular order: the defaults are read as a set
        inside = [call for info in self.classes.values() for call in self.body_nodes(info).calls
                  if type(call.func) is cst.Attribute and call.func.attr.value == "add_argument"]
        return inside + outside.found

    def argument_defaults(self) -> dict[str, list[cst.BaseExpression]]:
        """Command-line defaults: `add_argument("--norm-position", default="post")` -> {"norm_position": [...]};
        `action="store_true"` defaults to False, `"store_false"` to True."""
        if self._argument_defaults is None:
            found: dict[str, list[cst.BaseExpression]] = {}
            for call in self.argument_calls():
                flags = [string_value(arg.value) for arg in call.args
                         if arg.keyword is None and isinstance(arg.value, cst.SimpleString)]
                keywords = {arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None}
                dest = keywords.get("dest")
                name = string_value(dest) if isinstance(dest, cst.SimpleString) else next(
                    (flag.lstrip("-").replace("-", "_") for flag in flags if flag and flag.startswith("--")), None)
                action = keywords.get("action")
                action = string_value(action) if isinstance(action, cst.SimpleString) else None
                default = keywords.get("default") or {"store_true": cst.Name("False"),
                                                      "store_false": cst.Name("True")}.get(action or "")
                if name and default is not None:
                    found.setdefault(name, []).append(default)
            self._argument_defaults = found
        return self._argument_defaults


def parameter_test(info: ClassInfo, test: cst.BaseExpression) -> tuple[str, bool] | None:
    """`use_norm` / `not use_norm` on a constructor parameter: (the parameter, the value the body runs on)."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = parameter_test(info, test.expression)
        return (inner[0], not inner[1]) if inner is not None else None
    if isinstance(test, cst.Name) and test.value in info.init_defaults:
        return test.value, True
    return None


def reads_config_default(expr: cst.BaseExpression) -> bool:
    """Whether the expression reads a config value with a default (`kwargs.get("key", default)`)."""
    visitor = _MethodCalls(("get", "pop"))
    walk(expr, visitor)
    return bool(visitor.found)


def is_hashable(value) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


@dataclass(eq=False)
class BodyNodes:
    """What `FileIndex.body_nodes` gathers of one class: every `Name`, `Call` and `Attribute` node of its body
    (its `__init__`'s included), and the `Call` and `Assign` nodes of its `__init__`'s body, in no particular order."""

    names: list[cst.Name]
    calls: list[cst.Call]
    attributes: list[cst.Attribute]
    init_calls: list[cst.Call]
    init_assignments: list[cst.Assign]


class _MethodCalls:
    """The calls of a method named one of `names` (`x.get(...)`), for the fast `walk`. A module-level class: one
    defined per call is a reference cycle, and with the calls it found it kept the file's libcst tree for the cyclic
    collector."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names
        self.found: list[cst.Call] = []

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in self.names:
            self.found.append(node)


class _ArgumentCallsOutside:
    """The `add_argument(...)` calls outside the blocks `skipped` (ids). A plain class: the fast walk calls every
    visit method a CSTVisitor defines, one for each node kind."""

    def __init__(self, skipped: set[int]) -> None:
        self.skipped = skipped
        self.found: list[cst.Call] = []

    def visit_Call(self, node: cst.Call) -> None:
        if type(node.func) is cst.Attribute and node.func.attr.value == "add_argument":
            self.found.append(node)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> bool:
        return id(node) not in self.skipped

    def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> bool:
        return id(node) not in self.skipped


def dotted_name(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{dotted_name(node.value)}.{node.attr.value}"
    return ""


def is_self_attr(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self"


def name_spec(spec: ModuleSpec, attr: str) -> None:
    spec.attr = attr
    for key, inner in spec.named.items():
        name_spec(inner, f"{attr}.{key}")
    if spec.kind == "container" and not spec.repeated:
        for position, inner in enumerate(spec.elements):
            if not inner.attr:
                name_spec(inner, f"{attr}[{position}]")


def _local_list(expr: cst.BaseExpression, local_specs: dict) -> ModuleSpec | None:
    spec = local_specs.get(expr.value) if isinstance(expr, cst.Name) else None
    return spec if spec is not None and spec.kind == "container" and spec.name == "list" else None


def spec_identity(spec: ModuleSpec) -> tuple:
    return (spec.kind, spec.name)


def string_value(expr: cst.SimpleString):
    """The value of a string literal; None for one CPython would reject (libcst parses `"\\N{nonsense}"`)."""
    spelled = expr.value
    if spelled in _string_values:
        return _string_values[spelled]
    try:
        value = literal_eval(spelled)  # libcst's `evaluated_value`, without ast.literal_eval's reference cycle
    except (SyntaxError, ValueError):
        value = None
    if len(_string_values) > 4096:
        _string_values.clear()
    _string_values[spelled] = value
    return value


# string_value's answers by spelling: a file spells the same few strings (`"relu"`, `"layer_norm"`) over and over.
_string_values: dict[str, str | bytes | None] = {}


def literal_number(expr: cst.Integer | cst.Float):
    """The value of a number literal; UNKNOWN past int's digit limit for str conversion (4300 digits)."""
    try:
        if isinstance(expr, cst.Integer):
            return int(expr.value.replace("_", ""), 0)
        return float(expr.value.replace("_", ""))
    except ValueError:
        return UNKNOWN


def small_power(base, exponent) -> bool:
    """Whether `base ** exponent` stays a number a shape could hold; `2 ** 2 ** 2 ** 2 ** 2 ** 2` does not
    (computing it would never finish), nor a float power that overflows."""
    if isinstance(base, bool) or isinstance(exponent, bool) or abs(base) <= 1 or exponent <= 0:
        return True
    return exponent * math.log2(abs(base)) <= 256


# ----- config modules read with `ast` (ProjectIndex.imported_configs) ----------------------------

AST_NEWLINE = re.compile(r"\r\n?|\n")  # the line ends CPython counts (not str.splitlines' form feeds)
AST_OPERATIONS = {ast.Add: lambda left, right: left + right, ast.Sub: lambda left, right: left - right,
              ast.Mult: lambda left, right: left * right, ast.FloorDiv: lambda left, right: left // right,
              ast.Div: lambda left, right: left / right, ast.Pow: lambda left, right: left ** right}


class ConfigIndex(FileIndex):
    """A config module's aliases, classes (bases, methods, fields, `__init__` defaults) and constants, with
    `ast` expressions where a libcst FileIndex holds libcst ones; no source path: nothing further is read.

    A model file reads `config.n_layer` from the config classes it imports (`ProjectIndex.imported_configs`):
    only their fields, `__init__` defaults and the module's constants matter, which CPython's parser gives
    several times faster than libcst's. `ConfigIndex` answers `FileIndex.config_field` as a libcst
    `FileIndex` of the same file does (its class lookups are FileIndex's own): it collects what
    `FileIndex` collects (a one-line `if x: a = 1` or `class A: x = 1` body is left out, as libcst gives it
    no statement lines) and folds the same expressions to the same values (an implicitly concatenated
    string, one node in the AST, stays unknown as libcst's ConcatenatedString does). A file CPython does not
    parse is read by libcst as before (`ProjectIndex.imported_configs`).
    """

    def __init__(self, tree: ast.Module, text: str):  # noqa: D107 - no libcst module: FileIndex's own is not run
        self.module = None
        self.source_path = None
        self._argument_defaults = {}
        self.aliases: dict[str, str] = {}
        self.classes: dict[str, ClassInfo] = {}
        self.functions: dict = {}
        self.constants: dict[str, ast.expr] = {}
        self.config_reads: list[str] = []
        self.config_sources: list[FileIndex] = []
        self.config_unread = False
        self._returning: set[str] = set()
        # nothing is scanned after collection (no constructors), so FileIndex's memos may answer at once
        self._complete = True
        self._config_fields: dict[tuple[str, int], object] = {}
        self._module_classes: dict[ClassInfo, bool] = {}
        self._copies: dict[str, bool] = {}
        self._lookups: dict[tuple, object] = {}
        self._lines = [0] + [match.end() for match in AST_NEWLINE.finditer(text)]
        self._text = text
        for statement in tree.body:
            self._collect_statement(statement)

    def _collect_statement(self, statement: ast.stmt) -> None:
        if isinstance(statement, ast.ClassDef):
            info = ClassInfo(statement.name, statement, tuple(self.qualified(base) or "" for base in statement.bases))
            for item in self._block(statement):
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    info.methods[item.name] = item
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.value:
                    info.class_fields[item.target.id] = item.value
                elif isinstance(item, ast.Assign) and len(item.targets) == 1 and isinstance(item.targets[0], ast.Name):
                    info.class_fields[item.targets[0].id] = item.value
            init = info.methods.get("__init__")
            if init is not None:
                info.init_defaults.update(parameter_defaults(init.args))
            self.classes[info.name] = info
        elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.functions[statement.name] = statement
        elif isinstance(statement, ast.Import):
            for alias in statement.names:
                if alias.asname is not None:
                    self.aliases[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    self.aliases[top] = top
        elif isinstance(statement, ast.ImportFrom) and statement.names[0].name != "*":
            base = "." * statement.level + (statement.module or "")
            for alias in statement.names:
                local = alias.asname or alias.name
                self.aliases[local] = f"{base}.{alias.name}" if not base.endswith(".") else base + alias.name
        elif isinstance(statement, ast.Assign):
            for target in statement.targets:
                if isinstance(target, ast.Name):
                    self.constants[target.id] = statement.value
        elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) and statement.value:
            self.constants[statement.target.id] = statement.value
        elif isinstance(statement, (ast.If, ast.Try)):
            for inner in self._block(statement):
                self._collect_statement(inner)

    def _block(self, statement: ast.stmt) -> list[ast.stmt]:
        """The statement's body, or nothing when it is written on the header's line (`if x: a = 1`: libcst's
        SimpleStatementSuite, whose small statements FileIndex does not look at)."""
        first = statement.body[0]
        start = self._lines[first.lineno - 1]
        before = self._text[start:start + first.col_offset]
        if not before.isascii():  # the column is in UTF-8 bytes
            before = self._text[start:].encode("utf-8")[:first.col_offset].decode("utf-8", errors="replace")
        return statement.body if not before.strip() else []

    def qualified(self, expr) -> str | None:
        if isinstance(expr, ast.Starred):  # `class A(*bases)`: libcst's Arg holds the name itself
            expr = expr.value
        if isinstance(expr, ast.Name):
            return self.aliases.get(expr.id, expr.id)
        if isinstance(expr, ast.Attribute):
            base = self.qualified(expr.value)
            return f"{base}.{expr.attr}" if base else None
        return None

    def argument_defaults(self) -> dict:
        return {}  # asked at depth 0 only, of the checked file's own index

    def fold(self, info: ClassInfo | None, expr: ast.expr | None, depth: int = 0):
        """FileIndex.fold of the same expression (`info` is None here: a config source is asked for a field)."""
        if expr is None or depth > 8:
            return UNKNOWN
        if isinstance(expr, ast.Constant):
            return self._constant(expr)
        if isinstance(expr, ast.Name):
            if expr.id in self.constants:
                return self.fold(None, self.constants[expr.id], depth + 1)
            return UNKNOWN
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
            value = self.fold(info, expr.operand, depth + 1)
            return -value if isinstance(value, (int, float)) else UNKNOWN
        if isinstance(expr, ast.BinOp):
            left = self.fold(info, expr.left, depth + 1)
            right = self.fold(info, expr.right, depth + 1)
            if not isinstance(left, (int, float)) or not isinstance(right, (int, float)):
                return UNKNOWN
            if isinstance(expr.op, ast.Pow) and not small_power(left, right):
                return UNKNOWN
            try:
                return AST_OPERATIONS[type(expr.op)](left, right)
            except (KeyError, ZeroDivisionError, OverflowError):
                return UNKNOWN
        if isinstance(expr, ast.Attribute):
            return self.config_field(expr.attr, depth)
        if isinstance(expr, ast.Call):
            return self.fold_config_get(info, expr, depth)
        if isinstance(expr, ast.IfExp) and reads_a_config_default(expr.test):
            decided = self.fold(info, expr.test, depth + 1)
            return self.fold(info, expr.body if decided else expr.orelse, depth + 1) \
                if isinstance(decided, bool) else UNKNOWN
        if isinstance(expr, ast.Compare) and len(expr.ops) == 1:
            left = self.fold(info, expr.left, depth + 1)
            right = self.fold(info, expr.comparators[0], depth + 1)
            if left is UNKNOWN or right is UNKNOWN or not is_hashable(left) or not is_hashable(right):
                return UNKNOWN
            if isinstance(expr.ops[0], (ast.Eq, ast.Is)):
                return left == right
            if isinstance(expr.ops[0], (ast.NotEq, ast.IsNot)):
                return left != right
        return UNKNOWN

    def fold_config_get(self, info: ClassInfo | None, call: ast.Call, depth: int = 0):
        func = call.func
        args = [arg for arg in call.args if not isinstance(arg, ast.Starred)]
        if not (isinstance(func, ast.Attribute) and func.attr in ("get", "pop") and args and self._string(args[0])):
            return UNKNOWN
        base = func.value
        name = base.attr if is_self_attribute(base) else base.id if isinstance(base, ast.Name) else None
        default = self.fold(info, args[1], depth + 1) if len(args) > 1 else None
        if name is None:
            return UNKNOWN
        if name.lower() in CONFIG_OBJECT_NAMES:
            value = self.config_field(args[0].value, depth)
            return default if value is UNKNOWN else value
        return UNKNOWN

    def _constant(self, expr: ast.Constant):
        """What libcst's literal gives: numbers and single (not implicitly concatenated) strings; True, False, None."""
        value = expr.value
        if value is None or isinstance(value, (bool, int, float)):
            return value
        return value if self._string(expr) else UNKNOWN

    def _string(self, expr: ast.expr) -> bool:
        """Whether the expression is one string (or bytes) literal: libcst's SimpleString."""
        if not isinstance(expr, ast.Constant) or not isinstance(expr.value, (str, bytes)):
            return False
        segment = ast.get_source_segment(self._text, expr)
        try:
            tokens = [token for token in tokenize.generate_tokens(io.StringIO(f"({segment})").readline)
                      if token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.ENDMARKER)]
        except (tokenize.TokenError, SyntaxError):
            return False
        return len(tokens) == 3 and tokens[1].type == tokenize.STRING


def parameter_defaults(arguments: ast.arguments) -> dict[str, ast.expr | None]:
    """A def's parameters -> their defaults (None: none), as FileIndex reads `__init__`'s."""
    positional = [*arguments.posonlyargs, *arguments.args]
    defaults = [None] * (len(positional) - len(arguments.defaults)) + list(arguments.defaults)
    found = dict(zip((argument.arg for argument in positional), defaults))
    found.update(zip((argument.arg for argument in arguments.kwonlyargs), arguments.kw_defaults))
    return found


def is_self_attribute(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"


def reads_a_config_default(expr: ast.expr) -> bool:
    """reads_config_default of the same expression: a `.get(...)`/`.pop(...)` call anywhere in it."""
    return any(isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "pop")
               for node in ast.walk(expr))


def config_index(source: bytes, tree: ast.Module | None = None) -> ConfigIndex | None:
    """The ConfigIndex of a file's source; None when CPython does not parse it as UTF-8 text. `tree`: that
    text's AST, when parsed already."""
    import warnings

    try:
        text = source.decode("utf-8")
        if tree is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(text)
    except (UnicodeDecodeError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    try:
        return ConfigIndex(tree, text)
    except RecursionError:
        return None
