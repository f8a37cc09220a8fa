"""Which models a checked file defines, and how to build them on the meta device.

Without `--model`, a model is an `nn.Module` subclass defined in the file that can be built
from nothing: a constructor without required arguments, one whose single required argument is a
config (a dataclass or simple class whose fields all default, annotated or found in the file's
namespace), or an HF-style class with a `config_class`. Only the outermost of them are checked:
a candidate that appears as a submodule type of another built candidate is part of that model.

A class whose constructor needs other arguments is built from its first construction site in the
project whose arguments reslint can read without running the project's code
(`reslint.static.construction_sites`): `model = Transformer(d_model=512, ...)` in a training script,
a test, a `__main__` block or a factory, its values from literals, constants, argparse defaults and
configs. The summary says which site (`built from train.py:42`). Where no site builds it, its arguments
are inferred from its parameters' names (`reslint.trace.constructor_arguments`): the summary says
`built from inferred arguments (dim=64, depth=2)`, and a failure of that guess is an info. A guess the
constructor rejects is retried with what the failing statement names (the notes say the first guess and
its error); a site built shallower that does not validate is built at its own depth.

`--model FILE:EXPR` and `[[tool.reslint.models]] factory` name factories explicitly; EXPR is
evaluated in the file's namespace with `torch` and `nn` available.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import os
import re
import types
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable

from reslint.trace.constructor_arguments import resolve_annotation
from reslint.trace.loader import TraceTimeout, locate, one_line, same_file

CONFIG_PARAM_NAMES = ("config", "cfg", "conf", "args", "params", "hparams", "hp", "settings", "opts", "options", "hps")
CONFIG_CLASS_SUFFIXES = ("config", "cfg", "args", "params", "hparams", "settings", "options", "conf")
# Constructor arguments that size a layer: a default of 0 or None there is a placeholder the callers replace.
SIZE_PARAMETER = re.compile(r"size|dim|width|hidden|d_model|channels|features|heads|embed", re.I)


@dataclass
class ModelSpec:
    """How to build one model: `build()` runs under a device context chosen by the caller."""

    name: str
    line: int  # the model class's line in the checked file, or the factory's line (1)
    build: Callable[[], Any]
    cls: type | None = None
    inputs: str | None = None  # an input spec that overrides inference
    origin: str = "discovered"  # "discovered" | "factory" | "site" (built from a construction site) | "inferred"
    site: str = ""  # the construction site used ("train.py:42")
    unbuildable: str = ""  # why the site's arguments cannot be evaluated (nothing is built)
    reads: tuple[str, ...] = ()  # the files a site's arguments were read from (a cached result depends on them)
    notes: tuple[str, ...] = ()
    depth: int = 0  # built with fewer layers than the site asks for: its stacks have this depth
    depth_unknown: bool = False  # its depth argument was inferred: its stacks report no depth
    reduction: list = field(default_factory=list)  # (config field, before, after) of the last build


@dataclass
class BuiltModel:
    spec: ModelSpec
    model: Any  # nn.Module
    device: str  # "meta" | "cpu"
    notes: list[str] = field(default_factory=list)


class BuildFailed(Exception):
    def __init__(self, line: int, message: str, crashed_here: bool = False):
        super().__init__(message)
        self.line = line
        self.message = message
        self.crashed_here = crashed_here  # the checked file's own code crashed (not a raise, assert or import)


def crashed_in(error: BaseException, path: str) -> bool:
    """Whether `error` was raised by an operation of `path` itself: a crash in the checked code,
    not its own `raise`/`assert` rejecting a configuration, a config field left None, or a missing package."""
    import linecache

    where = locate(error, path)
    if where is None or not where.raised_here or isinstance(error, (ImportError, NotImplementedError)):
        return False
    if "NoneType" in str(error):  # a config field left None that this model needs set: a guess, not a bug
        return False
    if isinstance(error, TypeError) and "required" in str(error) and "argument" in str(error):
        # `super().__init__(**kwargs)` into a base that needs `dim`: the class wants arguments reslint
        # did not guess (x-transformers' Encoder), not a crash of its defaults
        return False
    statement = linecache.getline(path, where.line).strip()
    return not statement.startswith(("raise", "assert"))


def placeholder_defaults(spec: ModelSpec) -> bool:
    """A discovered class whose size arguments default to 0 or None (`PositionalEncoding(size=0)`): placeholders
    every caller replaces, so a crash built from them is reslint's guess, not a bug of the defaults."""
    if spec.origin != "discovered" or spec.cls is None:
        return False
    try:
        parameters = inspect.signature(spec.cls.__init__).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(SIZE_PARAMETER.search(parameter.name) and parameter.default in (0, None)
               and not isinstance(parameter.default, bool) for parameter in parameters)


def class_line(cls: type, path: str) -> int:
    try:
        filename = inspect.getsourcefile(cls)
        if filename and same_file(filename, path):
            return class_statement_line(cls)
    except (OSError, TypeError):
        pass
    return 1


def class_statement_line(cls: type) -> int:
    """The line of the `class` statement, as the static engine reports it; inspect starts at the
    decorators (`@dataclass`, `@auto_docstring`). Raises OSError/TypeError as inspect does."""
    lines, first = inspect.getsourcelines(cls)
    for offset, line in enumerate(lines):
        if line.lstrip().startswith("class "):
            return first + offset
    return first


def required_parameters(callable_: Any) -> list[inspect.Parameter] | None:
    """Parameters without a default (None: the signature cannot be read)."""
    try:
        signature = inspect.signature(callable_)
    except (TypeError, ValueError):
        return None
    return [
        parameter for parameter in signature.parameters.values()
        if parameter.default is inspect.Parameter.empty
        and parameter.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                               inspect.Parameter.KEYWORD_ONLY)
    ]


def no_arg_constructible(cls: type) -> bool:
    if dataclasses.is_dataclass(cls):
        return all(
            item.default is not dataclasses.MISSING or item.default_factory is not dataclasses.MISSING
            for item in dataclasses.fields(cls) if item.init
        )
    required = required_parameters(cls)
    return required == []


def is_config_class(obj: Any, *, named: bool = False) -> bool:
    """A class that looks like a config and can be built without arguments."""
    import torch

    if not isinstance(obj, type) or obj.__module__ == "builtins":
        return False
    if issubclass(obj, (torch.nn.Module, torch.Tensor)) or obj.__module__.startswith(("torch", "typing", "enum")):
        return False
    if named and not (dataclasses.is_dataclass(obj) or obj.__name__.lower().endswith(CONFIG_CLASS_SUFFIXES)):
        return False
    return no_arg_constructible(obj)


def config_for(cls: type, parameter: inspect.Parameter, namespace: dict) -> type | None:
    """The config class to build `cls(config)` with, or None."""
    config_class = getattr(cls, "config_class", None)
    if isinstance(config_class, type) and no_arg_constructible(config_class):
        return config_class
    annotation = resolve_annotation(parameter.annotation, namespace)
    if annotation is not None and annotation is not inspect.Parameter.empty:
        return annotation if is_config_class(annotation) else None
    name = parameter.name.lower()
    if not (name in CONFIG_PARAM_NAMES or "config" in name or "cfg" in name):
        return None
    unique = {id(obj): obj for obj in namespace.values() if isinstance(obj, type)}
    configs = [obj for obj in unique.values() if is_config_class(obj, named=True)]
    if len(configs) == 1:
        return configs[0]
    # Several configs: the one named after the model (GPT -> GPTConfig), else give up.
    prefix = [obj for obj in configs if obj.__name__.lower().startswith(cls.__name__.lower())]
    return prefix[0] if len(prefix) == 1 else None


def builder_for(cls: type, namespace: dict) -> tuple[Callable[[], Any] | None, str]:
    """A no-argument builder for `cls`, or (None, why not)."""
    required = required_parameters(cls)
    if required is None:
        return None, "its constructor's signature cannot be read"
    if not required:
        return cls, ""
    if len(required) == 1:
        config = config_for(cls, required[0], namespace)
        if config is not None:
            return (lambda: cls(config())), ""
    names = ", ".join(parameter.name for parameter in required)
    return None, f"its constructor needs arguments ({names}); pass --model FILE:EXPR"


def discover_models(module: ModuleType, path: str, root: str | None = None) -> tuple[list[ModelSpec], dict[str, str]]:
    """Candidate models defined in the module, and why other module classes were not built.
    With `root`, a class that needs arguments is built from a construction site in the project."""
    import torch

    specs: list[ModelSpec] = []
    skipped: dict[str, str] = {}
    namespace = vars(module)
    finder = None
    for obj in list(namespace.values()):
        if not (isinstance(obj, type) and issubclass(obj, torch.nn.Module)):
            continue
        if obj.__module__ != module.__name__ or inspect.isabstract(obj):
            continue
        if obj.forward is torch.nn.Module.forward or getattr(obj.forward, "__name__", "") == "_forward_unimplemented":
            continue
        try:
            build, reason = builder_for(obj, namespace)
        except Exception as error:  # noqa: BLE001 - user classes with unusual signatures or metaclasses
            build, reason = None, f"cannot tell how to build it ({one_line(error)})"
        unread_site = None
        # A class built with its defaults, or from inferred arguments, is built as the project's stacks build it.
        placed = stacks_arguments(obj, path) if root is not None and build in (obj, None) else ({}, "")
        if build is None and root is not None and reason.startswith("its constructor needs arguments"):
            finder = finder or site_finder(module, path, root)
            spec = site_spec(obj, finder, path, module)
            if spec is not None and not spec.unbuildable:
                specs.append(spec)
                continue
            unread_site = spec
        if build is None and reason.startswith("its constructor needs arguments") or build is obj:
            spec = inferred_spec(obj, path, namespace, unread_site, placed)
            if spec is not None:
                specs.append(spec)
                continue
        if unread_site is not None:
            specs.append(unread_site)
            continue
        if build is None:
            skipped[obj.__name__] = reason
            continue
        spec = ModelSpec(obj.__name__, class_line(obj, path), build, cls=obj)
        if placed[0]:
            spec.build = functools.partial(obj, **placed[0])
            spec.notes += (f"built with {describe_placed(placed[0])}, as {placed[1]} builds it",)
        # A composite model whose config may be None (RAG: built from a question encoder and a generator
        # otherwise) is built from its config's defaults too: the config builds the parts' own defaults.
        if is_hf_model(obj) and (build is not obj or config_first(obj)) and no_arg_constructible(obj.config_class):
            spec.build = reduced_builder(obj, spec)
        specs.append(spec)
    if any(is_hf_model(spec.cls) for spec in specs):
        # A file of HF-style models: those are its models, every other module class is a part of them
        # (one a default config does not use, e.g. a hybrid embedding, is not a model of its own).
        for spec in specs:
            if not is_hf_model(spec.cls):
                skipped[spec.name] = "a part of the file's models (it has no config_class)"
        specs = [spec for spec in specs if is_hf_model(spec.cls)]
    specs.sort(key=lambda spec: spec.line)
    return specs, skipped


def site_finder(module: ModuleType, path: str, root: str):
    """The project's construction-site finder for the classes of `module`'s file."""
    import torch

    from reslint.static.construction_sites import Finder

    classes = {name for name, obj in vars(module).items() if isinstance(obj, type)}
    module_classes = {name for name, obj in vars(module).items()
                      if isinstance(obj, type) and issubclass(obj, torch.nn.Module)}
    return Finder(path, root, classes, module_classes)


def site_spec(cls: type, finder: Any, path: str, module: ModuleType) -> ModelSpec | None:
    """Build `cls` from its first construction site with readable arguments; a spec that reports why
    not when every site's arguments need the project's code run; None when the project has no site."""
    from reslint.discovery import display_path
    from reslint.static.construction_sites import IMPORT, NAMESPACE, construction_sites

    sites = construction_sites(cls.__name__, finder)
    if not sites:
        return None
    line = class_line(cls, path)
    reads = tuple(sorted({read for site in sites for read in site.reads}))
    usable = next((site for site in sites if site.expr), None)
    if usable is None:
        first = sites[0]
        where = f"{display_path(first.path)}:{first.line}"
        more = f" (and {len(sites) - 1} other site{'s' if len(sites) > 2 else ''})" if len(sites) > 1 else ""
        reason = (f"cannot build {cls.__name__}: the arguments at {where}{more} cannot be read without running "
                  f"the project's code: {first.reason}")
        return ModelSpec(cls.__name__, line, lambda: None, cls=cls, origin="site", site=where, unbuildable=reason,
                         reads=reads)
    namespace = evaluation_namespace(module)
    namespace[NAMESPACE] = types.SimpleNamespace
    namespace[IMPORT] = site_import
    where = f"{display_path(usable.path)}:{usable.line}"
    notes = (f"built from {where}: {usable.expr}",)
    if usable.shrunk:
        notes += (f"traced shallower, {usable.shrunk}; its stacks report the site's depth, {usable.depth}",)
    spec = ModelSpec(cls.__name__, line, lambda: None, cls=cls, origin="site", site=where, reads=reads, notes=notes,
                     depth=usable.depth)

    def build() -> Any:
        try:
            return eval(usable.expr, namespace)
        except Exception as error:
            if not usable.full:
                raise
            # a shallower stack than the site's may not validate (`out_indices` past the last layer)
            model = eval(usable.full, namespace)
            spec.notes = (f"built from {where}: {usable.full}",
                          f"built at the site's depth: the shallower build raised {one_line(error)}")
            return model

    spec.build = build
    return spec


def site_import(name: str) -> ModuleType:
    """The module of a layer a construction site builds (`torchtune.models.clip._position_embeddings`)."""
    import sys

    try:
        return importlib.import_module(name)
    except ImportError:
        # Its package's `__init__` failed on an optional package after the module itself had run: that
        # module is complete (a module that fails is never left in sys.modules).
        if name in sys.modules:
            return sys.modules[name]
        raise


def stacks_arguments(cls: type, path: str) -> tuple[dict, str]:
    """The placement arguments every stack of another project file builds `cls` with, and where (see
    static/built_elsewhere): a layer Post-LN by its own default that the project only stacks Pre-LN."""
    from reslint.static.built_elsewhere import arguments_from_stacks, placement_parameters

    try:
        defaults = {name: parameter.default for name, parameter in inspect.signature(cls).parameters.items()}
        if not placement_parameters(defaults):
            return {}, ""
        from reslint.file_gate import MAX_SOURCE_BYTES, read_project_file

        return arguments_from_stacks(path, cls.__name__, read_project_file(path, None, MAX_SOURCE_BYTES).decode("utf-8"))
    except Exception:  # noqa: BLE001 - an unreadable signature or project: the class's own defaults stand
        return {}, ""


def describe_placed(arguments: dict) -> str:
    return ", ".join(f"{name}={value!r}" for name, value in arguments.items())


def inferred_spec(cls: type, path: str, namespace: dict, unread_site: ModelSpec | None,
                  placed: tuple[dict, str] = ({}, "")) -> ModelSpec | None:
    """Build `cls` from constructor arguments inferred from its parameters' names (see constructor_arguments);
    None when one of them follows no convention (or it needs none). `placed`: the placement arguments the
    project's stacks build it with, and where (`stacks_arguments`)."""
    from reslint.trace.constructor_arguments import build_inferred, describe, inferred_arguments

    try:
        inferred = inferred_arguments(cls, namespace)
    except Exception:  # noqa: BLE001 - unusual signatures or annotations of user classes
        return None
    if inferred is None:
        return None
    spec = ModelSpec(cls.__name__, class_line(cls, path), lambda: None, cls=cls, origin="inferred",
                     reads=unread_site.reads if unread_site is not None else ())
    describe_inferred(spec, *inferred, unread_site, placed=placed)
    guessed = ({**inferred[0], **placed[0]}, inferred[1])

    def build() -> Any:
        model, arguments, depth, first_error = build_inferred(cls, namespace, *guessed)
        if first_error is not None:
            describe_inferred(spec, arguments, depth, unread_site, placed=placed,
                              retried=f"the first guess, {describe(inferred[0])}, raised {one_line(first_error)}")
        return model

    spec.build = build
    return spec


def describe_inferred(spec: ModelSpec, arguments: dict, depth: list[str], unread_site: ModelSpec | None,
                      retried: str = "", placed: tuple[dict, str] = ({}, "")) -> None:
    """The spec's site and notes for a build from `arguments` (`built_from`, the summary)."""
    from reslint.trace.constructor_arguments import describe

    text = describe(arguments)
    notes = (f"built from inferred constructor arguments: {text}",)
    if placed[0]:
        notes += (f"built with {describe_placed(placed[0])}, as {placed[1]} builds it",)
    if retried:
        notes += (retried,)
    if unread_site is not None:
        notes += (f"the arguments at {unread_site.site} cannot be read without running the project's code",)
    if depth:
        notes += (f"its stacks' depth is unknown (inferred: {', '.join(depth)})",)
    spec.site, spec.notes, spec.depth_unknown = f"inferred arguments ({text})", notes, bool(depth)


def reduced_builder(cls: type, spec: ModelSpec) -> Callable[[], Any]:
    """`cls(config)` from the class's default config shrunk for tracing (see config_reduction): the first of
    its tracing attempts that builds, else the first attempt's error."""
    from reslint.trace.config_reduction import tracing_attempts

    def build() -> Any:
        first = None
        for config, reduction in tracing_attempts(cls.config_class):
            try:
                model, spec.reduction = built_completed(cls, config, reduction)
            except Exception as error:  # noqa: BLE001 - the first error is the one to report
                first = first or error
                continue
            return model
        raise first

    return build


def built_completed(cls: type, config: Any, reduction: list) -> tuple[Any, list]:
    """`cls(config)`, with the fields only a checkpoint's config has filled in as the build asks for them
    (missing_fields, rope_defaults) and rotary sections that do not fit the default config re-scaled
    (rotary_sections); the model and the reduction with those changes. Raises the build's first error."""
    from reslint.trace.missing_fields import MAX_FILLS, fill_missing_field
    from reslint.trace.rope_defaults import fill_rope_entry
    from reslint.trace.rotary_sections import fix_rotary_sections

    first = None
    for _ in range(MAX_FILLS + 1):
        try:
            model = cls(config)
        except Exception as error:  # noqa: BLE001 - the checked code
            first = first or error
            filled = fill_missing_field(config, error) or fill_rope_entry(config, error)
            if filled is None:
                raise first from None
            reduction = [*reduction, filled]
            continue
        sections = fix_rotary_sections(model, config)
        if sections:
            model, reduction = cls(config), [*reduction, *sections]
        return model, reduction
    raise first


def config_first(cls: type) -> bool:
    """Whether the constructor's first parameter is its config (`__init__(self, config=None, ...)`)."""
    try:
        first = next(iter(list(inspect.signature(cls.__init__).parameters)[1:]), None)
    except (TypeError, ValueError):
        return False
    return first == "config"


def is_hf_model(cls: type | None) -> bool:
    return isinstance(getattr(cls, "config_class", None), type)


def split_factory(spec: str) -> tuple[str, str]:
    """`FILE_OR_MODULE:EXPR` -> (target, expr); a `.py` path may contain ':' (Windows drives)."""
    match = re.match(r"^(.*?\.pyi?):(.*)$", spec, re.DOTALL)
    if match:
        return match.group(1), match.group(2).strip()
    target, sep, expr = spec.partition(":")
    if not sep:
        return "", spec.strip()
    return target.strip(), expr.strip()


def syntax_problem(expr: str) -> str | None:
    """Why `expr` does not parse as one Python expression, or None when it does."""
    try:
        compile(expr.strip(), "<expression>", "eval")
    except SyntaxError as error:
        return error.msg
    except ValueError as error:  # null bytes
        return str(error)
    return None


def expression_problem(expr: str) -> str:
    """Why a factory's EXPR is not a Python expression ("" when it is): a usage error, not a finding."""
    problem = syntax_problem(expr)
    return f"EXPR is not a Python expression: {problem}" if problem else ""


def factory_matches(target: str, path: str, root: str) -> bool:
    """Whether a factory's FILE_OR_MODULE names the checked file."""
    if not target:
        return False
    if target.endswith((".py", ".pyi")) or os.sep in target or "/" in target:
        return any(same_file(os.path.join(base, target), path) for base in (os.getcwd(), root))
    relative = target.replace(".", os.sep)
    for base in (root, os.getcwd()):
        for candidate in (relative + ".py", os.path.join(relative, "__init__.py")):
            if same_file(os.path.join(base, candidate), path):
                return True
    return False


def evaluation_namespace(module: ModuleType) -> dict:
    import torch

    namespace = dict(vars(module))
    namespace.setdefault("torch", torch)
    namespace.setdefault("nn", torch.nn)
    return namespace


def factory_spec(expr: str, module: ModuleType, path: str, inputs: str | None) -> ModelSpec:
    import torch

    namespace = evaluation_namespace(module)

    def build() -> Any:
        value = eval(expr, namespace)
        if isinstance(value, type) and issubclass(value, torch.nn.Module):
            builder, reason = builder_for(value, namespace)
            if builder is None:
                raise TypeError(f"{value.__name__}: {reason}")
            value = builder()
        if not isinstance(value, torch.nn.Module):
            raise TypeError(f"the factory returned {type(value).__name__}, not an nn.Module")
        return value

    head = re.match(r"\s*([A-Za-z_][\w.]*)", expr)
    cls = namespace.get(head.group(1).split(".")[0]) if head else None
    line = class_line(cls, path) if isinstance(cls, type) else 1
    name = cls.__name__ if isinstance(cls, type) else expr
    return ModelSpec(name, line, build, cls=cls if isinstance(cls, type) else None, inputs=inputs, origin="factory")


def build_model(spec: ModelSpec, path: str) -> BuiltModel:
    """Build on the meta device; on CPU only where meta construction fails. Raises BuildFailed."""
    import torch

    if spec.unbuildable:
        raise BuildFailed(spec.line, spec.unbuildable)
    notes: list[str] = []
    try:
        from reslint.trace.meta_init import skipped_meta_init

        with torch.device("meta"), skipped_meta_init():
            model = spec.build()
        device = "meta"
    except (TraceTimeout, KeyboardInterrupt):
        raise
    except BaseException as meta_error:  # noqa: BLE001 - user code; SystemExit included
        try:
            if not meta_may_explain(meta_error):
                raise meta_error
            model = spec.build()
            device = "cpu"
            notes.append(f"built on CPU: meta construction failed ({one_line(meta_error)})")
        except (TraceTimeout, KeyboardInterrupt):
            raise
        except BaseException as error:  # noqa: BLE001
            where = locate(error, path)
            raise BuildFailed(where.line if where else spec.line, f"cannot build {spec.name}: {one_line(error)}",
                              crashed_in(error, path) and not placeholder_defaults(spec)) from None
    notes[:0] = spec.notes  # the build may say how it went (a retry)
    if not isinstance(model, torch.nn.Module):
        raise BuildFailed(spec.line, f"cannot build {spec.name}: got {type(model).__name__}, not an nn.Module")
    if device == "meta" and off_meta(model):
        # `torch.FloatTensor(...)` and friends ignore the device context (XLNet's attention weights):
        # one graph cannot mix devices, and on meta only the shapes matter.
        model.to("meta")
    if spec.origin == "factory" and spec.cls is None:
        spec.name = type(model).__name__
        spec.line = class_line(type(model), path)
    model.eval()
    return BuiltModel(spec, model, device, notes)


def meta_may_explain(error: BaseException) -> bool:
    """Whether a failure to build on meta may be the meta device's (`.item()` on a meta tensor), so
    a CPU build may succeed. A config field that is missing or None fails on CPU too, after building
    real weights for seconds or minutes (and, for a large default config, memory)."""
    if isinstance(error, (AttributeError, KeyError, ValueError, TypeError, AssertionError, ImportError)):
        return "meta" in str(error).lower()
    return True


def off_meta(model: Any) -> bool:
    """Whether a model built under the meta device holds some tensors on another device."""
    tensors = [*model.parameters(), *model.buffers()]
    return any(tensor.device.type != "meta" for tensor in tensors) and any(t.device.type == "meta" for t in tensors)


def outermost(built: list[BuiltModel]) -> list[BuiltModel]:
    """Drop discovered models that are a submodule type of another built model."""
    inner: set[type] = set()
    for item in built:
        inner.update(type(sub) for name, sub in item.model.named_modules() if name)
    return [item for item in built if item.spec.origin == "factory" or type(item.model) not in inner]


def parameter_count(model: Any) -> int:
    return sum(parameter.numel() for parameter in model.parameters())
