"""Constructor arguments reslint infers for a discovered model that no construction site builds.

`ViT(image_size, patch_size, num_classes, dim, depth, heads, mlp_dim)` or `Whisper(dims: ModelDimensions)`
cannot be built from nothing, and a library's models often have no call site in the library itself.
Their parameters follow conventions that say what they are (a width, a head count, a depth, a
vocabulary, a dropout), so a small model can be built from the names alone: a width divisible by
every common head count, two layers, a small vocabulary, no dropout. A dataclass or config parameter
is built from its own fields the same way. A parameter no convention names (a module to wrap, a
mode string) is not guessed: the class still needs `--model`.

An integer default of 0 for a width, a head count or a vocabulary is a placeholder the callers always
replace (joeynmt's `TransformerEncoderLayer(size=0, ff_size=0, num_heads=0)`): it is inferred too.

The model is traced shallow: an inferred depth is not the model's depth, so the stacks built from it
report no depth (RL104 reads none) — the way a reduced config puts its own depth back.

A parameter annotated with a module class of the project (`encoder: Encoder`) gets that class built the
same way (a subclass with a `forward` where the annotation is an abstract base), two levels deep at most.
When the build raises, the statement that raised says what to change (`assert exists(depth)`,
`assert lora_rank < dim`, `encoder.output_size` on None, `window_size[0]` on an int): the constructor's
parameters it names are filled (an optional one left None), widened or made pairs, and the build is
retried, RETRIES times at most. A constructor that takes `**kwargs` gets the keyword a KeyError names, or
the optional parameter an inner constructor's failing statement reads, spelled with the prefixes it splits
its kwargs by (`enc_num_tokens`, `dec_depth`), as is a keyword an inner constructor's TypeError reports
missing. The first error is the one reported when every try fails.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import linecache
import re
import typing
from typing import Any

from reslint.static.construction_sites import SHRUNK_DEPTH

WIDTH = 32  # divisible by 1, 2, 4, 8, 16 heads; the features trace/inputs.py feeds a parameter-free model (a positional encoding)
FEEDFORWARD = 2 * WIDTH
HEADS = 4
HEAD_WIDTH = WIDTH // HEADS
VOCABULARY = 256
CLASSES = 10
CONTEXT = 32  # positions: the inferred inputs' 16 steps, a 64-step conv input after one stride of 2 (Whisper)
FEATURES = 16  # mel bins / input features of a speech front end (conv subsampling needs a few)
IMAGE, PATCH, IMAGE_CHANNELS = 32, 4, 3
HORIZON = 8  # steps a forecaster predicts: fewer than its context
COUNT = 2  # a number of things no convention names (`num_feat_static_cat`): as many as a list argument holds

NOT_INFERRED = object()
RETRIES = 3  # builds after the first, each with the arguments the last error named changed
WIDER = 4  # a width that an assert found too small is made this many times wider
MODULE_LEVELS = 2  # a module argument's own module arguments are built, no deeper
DEPTH = r"(n|num)_(\w+_)?layer|(\w+_)?(n|e|d)?layers|depth|(\w+_)?(n_|num_)?blocks"

# (pattern on the lower-cased parameter name, value); the first match wins, so the specific spellings
# come before the generic `*_dim` / `*_size` ones.
CONVENTIONS: tuple[tuple[str, Any], ...] = (
    (r".*drop.*|p|.*_p", 0.0),
    (r"(\w+_)?eps(ilon)?", 1e-5),
    (r"activation(_fn)?|act_fn|hidden_act", "gelu"),
    (DEPTH, SHRUNK_DEPTH),
    (r"(dim_head|head_dim|d_head|head_size|d_k|d_v|attention_head_size)", HEAD_WIDTH),
    (r"(n|num)_(\w+_)?head|(\w+_)?(n|a|num_|n_|attention_)?heads|nhead|n_heads?", HEADS),
    (r"(\w+_)?vocab(_size)?|n_vocab|(num|n)_tokens|ntokens?", VOCABULARY),
    (r"(num|n)_?classes|classes|num_labels|odim", CLASSES),
    (r"(\w+_)?(ctx|max_len|max_seq_len|seq_len|max_length|context_length|block_size|max_position_embeddings"
     r"|(num|n|max)_positions)|(input|past)_chunk_(length|len|size)|(\w+_)?lookback(_len|_length|_window)?", CONTEXT),
    (r"image_size|img_size|image_height|image_width", IMAGE),
    (r"(image_)?patch_size|patch_height|patch_width|patch_len(gth)?", PATCH),
    (r"(prediction|forecast|pred|output_chunk)_(length|len|horizon)|(\w+_)?horizon", HORIZON),
    (r"kernel_size|kernel", 3),
    (r"stride", 1),
    (r"window_size", PATCH),
    (r"(\w+_)?(mult|multiplier|ratio|expansion_factor)", 2),
    (r"(\w+_)?(categories|cardinalities)", (CLASSES,) * COUNT),  # categories of each categorical column
    (r"(\w+_)?cardinality", VOCABULARY),
    (r"n_mels|num_mel_bins|mels?|idim|input_dim|in_dim|feat_dim|n_feats|num_features", FEATURES),
    (r"(\w+_)?(ff|ffn|mlp|feedforward|intermediate|inner|linear_units)(_\w+)?|dim_feedforward|hidden_dim", FEEDFORWARD),
    (r"(\w+_)?(dim|dimensions?|size|width|state|embd|model|hidden|units|nodes|features|channels?|chan|emb|embed|shape)"
     r"|d|adim|(\w+_)?(dim|chan)_(in|out)|(\w+_)?d_\w+", WIDTH),  # `d_block`, `ffn_d_hidden`: d for dimension
)
COUNTED = r"(num|n)_\w+"  # a number of things no convention names: after the docstring's description

IMAGE_PARAMETERS = ("image_size", "img_size", "patch_size")
CHANNELS = re.compile(r"channels|in_chans|in_channels|num_channels|input_channels")


def convention(name: str, image_model: bool) -> Any:
    """The conventional small value of a parameter called `name`, or NOT_INFERRED."""
    lowered = name.lower()
    if image_model and CHANNELS.fullmatch(lowered):
        return IMAGE_CHANNELS
    for pattern, value in CONVENTIONS:
        if re.fullmatch(pattern, lowered):
            return value
    return NOT_INFERRED


def placeholder(parameter: inspect.Parameter) -> bool:
    """A default of 0 for a width, head count or vocabulary: no model is built with it."""
    default = parameter.default
    if not (isinstance(default, int) and not isinstance(default, bool) and default == 0):
        return False
    value = convention(parameter.name, image_model=False)
    return isinstance(value, int) and value not in (NOT_INFERRED, SHRUNK_DEPTH, 1, 0) and not isinstance(value, bool)


def resolve_annotation(annotation: Any, namespace: dict) -> Any:
    """The object a parameter annotation names in `namespace` (`"Optional[Config]"`, `"tuple[int, int]"`,
    `"Literal['a', 'b']"` too; an optional one unwrapped), or None."""
    if isinstance(annotation, str):
        text = annotation.strip().strip("'\"") if annotation.count("'") + annotation.count('"') == 2 and \
            annotation.strip()[:1] in "'\"" else annotation.strip()
        if re.fullmatch(r"[\w\[\]., '\"|]+", text):  # names, subscripts and literals only: nothing runs
            try:
                return unwrap_optional(eval(text, {**vars(typing), "__builtins__": {}, "int": int, "float": float,
                                                   "str": str, "bool": bool, "tuple": tuple, "list": list,
                                                   "None": None, **namespace}))  # noqa: S307
            except Exception:  # noqa: BLE001 - a name the module does not bind
                pass
        if text.startswith("Optional[") and text.endswith("]"):
            text = text[len("Optional["):-1]
        text = text.split("|")[0].strip()
        if not re.fullmatch(r"[A-Za-z_][\w.]*", text):
            return None
        value: Any = namespace
        for index, part in enumerate(text.split(".")):
            value = value.get(part) if index == 0 else getattr(value, part, None)
            if value is None:
                return None
        return value
    return unwrap_optional(annotation)


def unwrap_optional(annotation: Any) -> Any:
    """`Optional[X]` / `X | None` -> X."""
    import types

    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        kinds = [kind for kind in typing.get_args(annotation) if kind is not type(None)]
        return kinds[0] if len(kinds) == 1 else None
    return annotation


class Built:
    """A module argument, built when the model is (on the device the model is built on)."""

    def __init__(self, cls: type, arguments: dict):
        self.cls, self.arguments = cls, arguments

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Built) and (self.cls, self.arguments) == (other.cls, other.arguments)

    def make(self) -> Any:
        return self.cls(**materialized(self.arguments))

    def __repr__(self) -> str:
        return f"{self.cls.__name__}({describe(self.arguments)})"


def materialized(arguments: dict) -> dict:
    return {name: value.make() if isinstance(value, Built) else value for name, value in arguments.items()}


def value_for(parameter: inspect.Parameter, namespace: dict, image_model: bool, depth: list[str],
              level: int = 0, owner: type | None = None) -> Any:
    """An inferred value for one parameter of `owner`'s constructor, or NOT_INFERRED: by its name's convention,
    else its description in the docstrings (parameter_docs), else a count for `num_*`, else what its annotation
    alone decides (a literal, an enum member, None where it is Optional). `depth` collects the depth parameters."""
    annotation = resolve_annotation(parameter.annotation, namespace)
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return dataclass_value(annotation, namespace, depth)
    if is_module_type(annotation) and re.fullmatch(r"\w+_(class|cls|type)", parameter.name.lower()):
        return annotation  # `activation_class: nn.ReLU`: a class the constructor instantiates itself
    if is_module_type(annotation):
        return module_value(annotation, level, depth)
    value, is_depth = convention(parameter.name, image_model), bool(re.fullmatch(DEPTH, parameter.name.lower()))
    documented = parameter_docs(owner, types=True).get(parameter.name, "").lower() if owner is not None else ""
    if is_depth and re.match(r"(list|sequence|iterable|modulelist)\b", documented):
        return NOT_INFERRED  # `layers : list` of encoder layers: not a depth
    if isinstance(value, int) and not isinstance(value, bool) and re.match(r"tuple\b", documented):
        return (value, value)  # `window_size (tuple[int])`: height and width
    if value is NOT_INFERRED and owner is not None:
        value, is_depth = described_value(owner, parameter.name)
    if value is NOT_INFERRED and re.fullmatch(COUNTED, parameter.name.lower()):
        value = COUNT
    arity = typing.get_args(annotation) if typing.get_origin(annotation) is tuple else ()
    if value is not NOT_INFERRED and arity and Ellipsis not in arity and all(kind is int for kind in arity) \
            and isinstance(value, int):
        return (value,) * len(arity)
    if typing.get_origin(annotation) is list and isinstance(value, (int, float)) and not isinstance(value, bool) \
            and typing.get_args(annotation) in ((int,), (float,)):
        return [typing.get_args(annotation)[0](value)] * COUNT  # `cardinality: List[int]`: one per feature
    if typing.get_origin(annotation) is list and isinstance(value, tuple):
        return list(value)
    if value is NOT_INFERRED:
        value = annotated_value(annotation)
        return None if value is NOT_INFERRED and accepts_none(parameter.annotation) else value
    if isinstance(value, str) and parameter.annotation not in (inspect.Parameter.empty, str, "str"):
        return NOT_INFERRED  # an activation given as a class or a callable, not by name
    if annotation is float and isinstance(value, int):
        value = float(value)
    elif isinstance(annotation, type) and annotation.__module__ not in ("builtins", "inspect") and \
            not isinstance(value, annotation):
        return NOT_INFERRED  # `src_vocab: Vocabulary` is an object, not a vocabulary size
    if is_depth:
        depth.append(parameter.name)
    return value


def accepts_none(annotation: Any) -> bool:
    """Whether a parameter's annotation says None is a value it takes (`Optional[str]`, `int | None`)."""
    import types

    if isinstance(annotation, str):
        return bool(re.match(r"\s*Optional\[", annotation) or re.search(r"\|\s*None\b|\bNone\s*\|", annotation))
    return typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in typing.get_args(annotation)


# (pattern on a parameter's description in a docstring, value): `d_in: the input size.`, `Number of time points to
# predict.`; the first match wins.
DESCRIBED_DEPTH = r".*\bnumber of (\w+ ){0,2}(layers|blocks)\b.*|.*\bdepth\b.*"
DESCRIPTIONS: tuple[tuple[str, Any], ...] = (
    (r".*\b(dropout|drop rate|probability)\b.*", 0.0),
    (DESCRIBED_DEPTH, SHRUNK_DEPTH),
    (r".*\bnumber of (\w+ ){0,2}heads\b.*", HEADS),
    (r".*\b(number of (\w+ ){0,2}(classes|labels)|vocabulary|cardinalit(y|ies))\b.*", VOCABULARY),
    (r".*\b(time (points|steps)|horizon|to predict)\b.*", HORIZON),
    (r".*\b(size|width|dimension|dimensionality|channels|features|units)\b.*", WIDTH),
    (r".*\bnumber of\b.*", COUNT),
)
DOCUMENTED = re.compile(r"\s*(?::param\s+(?:[\w\[\], ]+\s+)?)?(\w+)\s*(\([^)]*\))?\s*(:\s*(.*))?$")


def described_value(cls: type, name: str) -> tuple[Any, bool]:
    """The value the description of `cls`'s parameter `name` in its docstrings names (NOT_INFERRED: none),
    and whether it describes a depth."""
    description = parameter_docs(cls).get(name, "").lower()
    for pattern, value in DESCRIPTIONS if description else ():
        if re.fullmatch(pattern, description, re.DOTALL):
            return value, bool(re.fullmatch(DESCRIBED_DEPTH, description))
    return NOT_INFERRED, False


def parameter_docs(cls: type, types: bool = False) -> dict[str, str]:
    """Each documented constructor parameter's first line of description (with `types`: its documented type), from
    the docstrings of `__init__` and of the class (and its bases): Google (`name (int): text`), Sphinx (`:param
    name: text`) and NumPy (`name : int` or `name` alone, then the text indented below)."""
    docs: dict[str, str] = {}
    for owner in cls.__mro__:
        init = owner.__dict__.get("__init__")
        for text in (getattr(init, "__doc__", None), owner.__dict__.get("__doc__")):
            lines = inspect.cleandoc(text).splitlines() if isinstance(text, str) else []
            for index, line in enumerate(lines):
                found = DOCUMENTED.match(line)
                if found is None:
                    continue
                name, after = found.group(1), (found.group(4) or "").strip()
                below = lines[index + 1] if index + 1 < len(lines) else ""
                indented = len(below) - len(below.lstrip()) > len(line) - len(line.lstrip())
                numpy_type = re.match(r"\s*\w+\s+:", line) is not None  # `name : int`: the type, text below
                description = below.strip() if indented and (not after or numpy_type) else after
                if types:
                    description = (found.group(2) or "").strip("() ") or (after if numpy_type else "")
                if description and name not in docs:
                    docs[name] = description
    return docs


def is_module_type(annotation: Any) -> bool:
    import torch

    return isinstance(annotation, type) and issubclass(annotation, torch.nn.Module)


def annotated_value(annotation: Any) -> Any:
    """What an annotation alone decides: the first of a `Literal` or an `Enum`, else NOT_INFERRED."""
    if typing.get_origin(annotation) is typing.Literal and typing.get_args(annotation):
        return typing.get_args(annotation)[0]
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum) and len(annotation):
        return next(iter(annotation))
    return NOT_INFERRED


def module_value(annotation: type, level: int, depth: list[str]) -> Any:
    """A project module class to build for a parameter annotated with it (a subclass with a `forward` of its
    own for an abstract base), with its own inferred arguments; NOT_INFERRED for torch's classes (a
    submodule to wrap: nothing to guess) or past MODULE_LEVELS."""
    if level >= MODULE_LEVELS or annotation.__module__.split(".")[0] == "torch":
        return NOT_INFERRED
    for cls in (annotation, *subclasses(annotation)):
        if not has_forward(cls) or inspect.isabstract(cls) or stub_forward(cls):
            continue
        inferred = inferred_arguments(cls, vars(inspect.getmodule(cls) or object()), level + 1)
        if inferred is not None:
            depth += inferred[1]  # a depth inferred for the argument is as unknown as the model's own
            return Built(cls, inferred[0])
        if not [parameter for parameter in constructor_parameters(cls) or ()
                if parameter.default is inspect.Parameter.empty]:
            return Built(cls, {})
    return NOT_INFERRED


def subclasses(cls: type) -> list[type]:
    """The subclasses of `cls` defined in its module, in definition order (the others come after)."""
    found, stack = [], list(cls.__subclasses__())
    while stack:
        item = stack.pop(0)
        if item not in found:
            found.append(item)
            stack += item.__subclasses__()
    return sorted(found, key=lambda item: item.__module__ != cls.__module__)


def has_forward(cls: type) -> bool:
    import torch

    forward = getattr(cls, "forward", None)
    return forward is not None and forward is not torch.nn.Module.forward and \
        getattr(forward, "__name__", "") != "_forward_unimplemented"


def stub_forward(cls: type) -> bool:
    """Whether `cls.forward` only documents the method (a docstring, `pass`, `...`, `raise NotImplementedError`):
    a base class in all but name (torch-geometric's `MessagePassing`), whose subclasses do the work."""
    import ast
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls.forward)))
    except (OSError, TypeError, SyntaxError):
        return False
    function = tree.body[0] if tree.body else None
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    return all(isinstance(statement, ast.Pass) or isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
               or isinstance(statement, ast.Raise) and "NotImplementedError" in ast.unparse(statement)
               for statement in function.body)


def dataclass_value(cls: type, namespace: dict, depth: list[str]) -> Any:
    """`cls(**fields)` with every field that has no default inferred, or NOT_INFERRED."""
    fields = [item for item in dataclasses.fields(cls) if item.init
              and item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING]
    values = {}
    for item in fields:
        parameter = inspect.Parameter(item.name, inspect.Parameter.KEYWORD_ONLY, annotation=item.type)
        value = value_for(parameter, vars(inspect.getmodule(cls)) if inspect.getmodule(cls) else namespace, False, depth)
        if value is NOT_INFERRED:
            return NOT_INFERRED
        values[item.name] = value
    try:
        return cls(**values)
    except Exception:  # noqa: BLE001 - a config that validates its fields against each other
        return NOT_INFERRED


def constructor_parameters(cls: type) -> list[inspect.Parameter] | None:
    """The parameters `cls(...)` takes; a class whose `__init__(**kwargs)` passes them on to a base has its
    base's (x-transformers' `Encoder(**kwargs)` -> `AttentionLayers(dim, depth, heads, ...)`), after its own
    optional ones (`__init__(self, *args, use_softmax=False, **kwargs)` over a base that needs its sizes)."""
    collected: list[inspect.Parameter] = []
    for owner in cls.__mro__:
        init = owner.__dict__.get("__init__")
        if init is None:
            continue
        try:
            parameters = list(inspect.signature(init).parameters.values())[1:]
        except (TypeError, ValueError):
            return None
        named = [parameter for parameter in parameters
                 if parameter.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]
        collected += [parameter for parameter in named if parameter.name not in {item.name for item in collected}]
        passes_on = any(parameter.kind == inspect.Parameter.VAR_KEYWORD for parameter in parameters)
        if not passes_on or any(parameter.default is inspect.Parameter.empty for parameter in named):
            return collected
    return collected


def inferred_arguments(cls: type, namespace: dict, level: int = 0) -> tuple[dict[str, Any], list[str]] | None:
    """Keyword arguments for `cls` (its required parameters and placeholder defaults) and the names of the
    inferred depth parameters; None when a required parameter follows no convention or nothing is needed."""
    parameters = constructor_parameters(cls)
    if not parameters:
        return None
    if any(parameter.kind == inspect.Parameter.POSITIONAL_ONLY for parameter in parameters):
        return None
    names = {parameter.name.lower() for parameter in parameters}
    image_model = any(name in names for name in IMAGE_PARAMETERS)
    arguments: dict[str, Any] = {}
    depth: list[str] = []
    for parameter in parameters:
        if parameter.default is inspect.Parameter.empty or placeholder(parameter):
            required = parameter.default is inspect.Parameter.empty
            value = chained_value(cls, parameter, (bool, str)) if required else NOT_INFERRED
            if value is NOT_INFERRED:
                value = value_for(parameter, namespace, image_model, depth, level, cls)
            if value is NOT_INFERRED and required:  # a number no convention names: the chain's, if it has one
                value = chained_value(cls, parameter, (int, float))
            if value is NOT_INFERRED:
                return None
            arguments[parameter.name] = value
    return (arguments, depth) if arguments else None


def chained_value(cls: type, parameter: inspect.Parameter, kinds: tuple[type, ...]) -> Any:
    """A required argument's default up the chain of constructors that pass it on (`use_layer_norm=False` two
    constructors up, `norm_first=False` in the estimator that builds the model): for a flag the value the
    static engine judges too (static/chained_defaults); NOT_INFERRED when the chain fixes none of `kinds`."""
    from reslint.static.chained_defaults import chained_default

    try:
        path = inspect.getsourcefile(cls)
    except TypeError:
        return NOT_INFERRED
    if not path or cls.__qualname__ != cls.__name__:
        return NOT_INFERRED
    value, _ = chained_default(path, cls.__name__, parameter.name)
    if isinstance(value, bool) and bool not in kinds:
        return NOT_INFERRED
    return value if isinstance(value, kinds) else NOT_INFERRED


def build_inferred(cls: type, namespace: dict, arguments: dict,
                   depth: list[str]) -> tuple[Any, dict, list[str], Exception | None]:
    """`cls(**arguments)`; when that raises, retried with the arguments the failing statement names changed
    (see the module docstring). Returns the model, the arguments and depth parameters it was built with and
    the first try's error (None: the first try built it); raises the first error when no try builds it."""
    first: Exception | None = None
    tried = [arguments]
    for _ in range(1 + RETRIES):
        try:
            return cls(**materialized(arguments)), arguments, depth, first
        except Exception as error:  # noqa: BLE001 - user code rejecting the guess
            first = first or error
            changed = retry_arguments(cls, namespace, arguments, depth, error)
            if changed is None or changed[0] in tried:
                break
            arguments, depth = changed
            tried.append(arguments)
    assert first is not None
    raise first


def retry_arguments(cls: type, namespace: dict, arguments: dict, depth: list[str],
                    error: Exception) -> tuple[dict, list[str]] | None:
    """The next arguments to try after `error`, or None when its statement names nothing to change."""
    for name, value in arguments.items():  # raised while building a module argument: retry that one
        if isinstance(value, Built) and raised_in(value, error):
            inner = retry_arguments(value.cls, vars(inspect.getmodule(value.cls) or object()), value.arguments,
                                    depth, error)
            return ({**arguments, name: Built(value.cls, inner[0])}, inner[1]) if inner is not None else None
    parameters = {parameter.name: parameter for parameter in constructor_parameters(cls) or ()}
    named = [name for name in statement_names(cls, error) if name in parameters]
    image_model = any(name in parameters for name in IMAGE_PARAMETERS)
    wrong_kind = isinstance(error, TypeError) and re.search(r"not subscriptable|not iterable|has no len", str(error))
    changed, depth = dict(arguments), list(depth)
    for name in named:  # an optional argument left None that the statement reads
        if name not in arguments and parameters[name].default is None:
            value = value_for(parameters[name], namespace, image_model, depth)
            if value is not NOT_INFERRED:
                changed[name] = value
    for name in named:  # a guessed string the statement checks against a container (`assert act in ACTIVATIONS`)
        allowed = allowed_strings(cls, error, arguments.get(name))
        if isinstance(arguments.get(name), str) and allowed:
            changed[name] = next((item for item in allowed if item.lower() == arguments[name].lower()), allowed[0])
    if changed != arguments:
        return changed, depth
    keywords = keyword_arguments(cls, arguments, depth, error)
    if keywords is not None:
        return keywords
    for name in named:  # else a guessed value of the wrong kind or too small
        value = arguments.get(name)
        if not isinstance(value, int) or isinstance(value, bool):
            continue
        if wrong_kind:
            changed[name] = (value, value)
        elif not re.fullmatch(DEPTH, name.lower()) and convention(name, image_model) in (WIDTH, FEEDFORWARD):
            changed[name] = value * WIDER
    return (changed, depth) if changed != arguments else None


def keyword_arguments(cls: type, arguments: dict, depth: list[str],
                      error: Exception) -> tuple[dict, list[str]] | None:
    """For a constructor that takes `**kwargs`: the keyword a KeyError names (`kwargs.pop('num_tokens')`), or an
    optional parameter left None that the failing statement of a constructor it calls reads (`assert
    exists(depth)` in `Encoder(dim=dim, **enc_kwargs)`), given its conventional value; spelled with each
    prefix the constructor splits its kwargs by (`'enc_'`, `'dec_'`: x-transformers' XTransformer), else as is."""
    init = next((owner.__dict__["__init__"] for owner in cls.__mro__ if "__init__" in owner.__dict__), None)
    code = getattr(init, "__code__", None)
    if code is None or not code.co_flags & inspect.CO_VARKEYWORDS:
        return None
    prefixes = [item for item in code.co_consts if isinstance(item, str) and re.fullmatch(r"[a-z][a-z0-9]*_", item)]
    changed, depth = dict(arguments), list(depth)
    for name in missing_keywords(cls, error):
        value = convention(name, image_model=False)
        if value is NOT_INFERRED:  # a flag the callers pass on through the kwargs: its default up the chain
            value = chained_value(cls, inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY), (bool, str))
        if value is NOT_INFERRED:
            continue
        for keyword in [prefix + name for prefix in prefixes] or [name]:
            if keyword not in changed:
                changed[keyword] = value
                if re.fullmatch(DEPTH, name.lower()):
                    depth.append(keyword)
    return (changed, depth) if changed != arguments else None


def missing_keywords(cls: type, error: BaseException) -> list[str]:
    """The key of a KeyError, or the arguments a TypeError says an inner constructor is missing (`PerceiverIO.
    __init__() missing 1 required keyword-only argument: 'depth'`); else the parameters left None that the
    failing statement of the innermost constructor below `cls`'s reads."""
    if isinstance(error, KeyError) and len(error.args) == 1 and isinstance(error.args[0], str):
        return [error.args[0]]
    missing = re.search(r"missing \d+ required (?:keyword-only |positional )?arguments?: (.+)$", str(error))
    if isinstance(error, TypeError) and missing:
        return re.findall(r"'(\w+)'", missing.group(1))
    inits = init_codes(cls)
    tb, inner, below = error.__traceback__, None, False
    while tb is not None:
        below = below or tb.tb_frame.f_code in inits
        if below and tb.tb_frame.f_code.co_name == "__init__" and tb.tb_frame.f_code not in inits:
            inner = tb
        tb = tb.tb_next
    if inner is None:
        return []
    code, values = inner.tb_frame.f_code, inner.tb_frame.f_locals
    parameters = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    return [name for name in statement_at(inner) if name in parameters and values.get(name, 0) is None]


def raised_in(value: Built, error: BaseException) -> bool:
    """Whether `error` was raised building the module argument `value` (or one of its own)."""
    return bool(statement_names(value.cls, error)) or any(
        raised_in(inner, error) for inner in value.arguments.values() if isinstance(inner, Built))


def statement_names(cls: type, error: BaseException) -> list[str]:
    """The names in the statement that raised `error` inside the constructor of `cls` (or of a base)."""
    found = failing_entry(cls, error)
    return [] if found is None else statement_at(found)


def failing_entry(cls: type, error: BaseException) -> Any:
    """The last traceback entry of `error` inside the constructor of `cls` (or of a base); None if none."""
    inits = init_codes(cls)
    tb, found = error.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code in inits:
            found = tb
        tb = tb.tb_next
    return found


def allowed_strings(cls: type, error: BaseException, guess: Any) -> list[str]:
    """The strings of a container the failing statement of `cls`'s constructor names (a module constant or a
    local), in order, where `guess` is a string not among them; [] otherwise."""
    found = failing_entry(cls, error)
    if found is None or not isinstance(guess, str):
        return []
    frame = found.tb_frame
    for name in statement_at(found):
        value = frame.f_locals.get(name, frame.f_globals.get(name))
        if isinstance(value, dict):
            value = list(value)
        if isinstance(value, (list, tuple, set, frozenset)) and value and guess not in value \
                and all(isinstance(item, str) for item in value):
            return sorted(value) if isinstance(value, (set, frozenset)) else list(value)
    return []


def init_codes(cls: type) -> set:
    return {owner.__dict__["__init__"].__code__ for owner in cls.__mro__
            if hasattr(owner.__dict__.get("__init__"), "__code__")}


def statement_at(found: Any) -> list[str]:
    """The names in the expression a traceback entry failed at."""
    code = found.tb_frame.f_code
    positions = list(code.co_positions())
    first, last, start, end = positions[found.tb_lasti // 2] if found.tb_lasti // 2 < len(positions) else (None,) * 4
    if first is None or last is None:
        first, last, start, end = found.tb_lineno, found.tb_lineno, None, None
    lines = [linecache.getline(code.co_filename, line) for line in range(first, last + 1)]
    if start is not None and end is not None and lines:
        # the failing expression only (`window_size[0]`), not the rest of its statement
        lines[-1] = lines[-1][:end]
        lines[0] = lines[0][start:]
    return list(dict.fromkeys(re.findall(r"[A-Za-z_]\w*", "".join(lines))))


def describe(arguments: dict[str, Any]) -> str:
    """`dim=64, depth=2, dims=ModelDimensions(n_mels=16, ...)`."""
    return ", ".join(f"{name}={render(value)}" for name, value in arguments.items())


def render(value: Any) -> str:
    if isinstance(value, type):
        return value.__name__
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        inner = ", ".join(f"{item.name}={getattr(value, item.name)!r}" for item in dataclasses.fields(value))
        return f"{type(value).__name__}({inner})"
    return repr(value)
