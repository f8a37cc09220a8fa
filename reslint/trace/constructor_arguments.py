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
"""

from __future__ import annotations

import dataclasses
import inspect
import re
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

NOT_INFERRED = object()
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
     r"|(num|n|max)_positions)", CONTEXT),
    (r"image_size|img_size|image_height|image_width", IMAGE),
    (r"(image_)?patch_size|patch_height|patch_width", PATCH),
    (r"kernel_size|kernel", 3),
    (r"stride", 1),
    (r"window_size", PATCH),
    (r"(\w+_)?(mult|ratio|expansion_factor)", 2),
    (r"n_mels|num_mel_bins|mels?|idim|input_dim|in_dim|feat_dim|n_feats|num_features", FEATURES),
    (r"(\w+_)?(ff|ffn|mlp|feedforward|intermediate|inner|linear_units)(_\w+)?|dim_feedforward|hidden_dim", FEEDFORWARD),
    (r"(\w+_)?(dim|size|width|state|embd|model|hidden|units|features|channels?|chan|emb|embed|shape)|d|adim"
     r"|(\w+_)?(dim|chan)_(in|out)", WIDTH),
)

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
    """The object a parameter annotation names in `namespace` (`"Optional[Config]"` too), or None."""
    if isinstance(annotation, str):
        text = annotation.strip().strip("'\"")
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
    return annotation


def value_for(parameter: inspect.Parameter, namespace: dict, image_model: bool, depth: list[str]) -> Any:
    """An inferred value for one parameter, or NOT_INFERRED. `depth` collects the depth parameters."""
    annotation = resolve_annotation(parameter.annotation, namespace)
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return dataclass_value(annotation, namespace, depth)
    if is_module_type(annotation):
        return NOT_INFERRED  # a submodule to wrap: nothing to guess
    value = convention(parameter.name, image_model)
    if value is NOT_INFERRED:
        return value
    if isinstance(value, str) and parameter.annotation not in (inspect.Parameter.empty, str, "str"):
        return NOT_INFERRED  # an activation given as a class or a callable, not by name
    if annotation is float and isinstance(value, int):
        value = float(value)
    if re.fullmatch(DEPTH, parameter.name.lower()):
        depth.append(parameter.name)
    return value


def is_module_type(annotation: Any) -> bool:
    import torch

    return isinstance(annotation, type) and issubclass(annotation, torch.nn.Module)


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
    base's (x-transformers' `Encoder(**kwargs)` -> `AttentionLayers(dim, depth, heads, ...)`)."""
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
        if named or not any(parameter.kind == inspect.Parameter.VAR_KEYWORD for parameter in parameters):
            return named
    return []


def inferred_arguments(cls: type, namespace: dict) -> tuple[dict[str, Any], list[str]] | None:
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
            value = value_for(parameter, namespace, image_model, depth)
            if value is NOT_INFERRED:
                return None
            arguments[parameter.name] = value
    return (arguments, depth) if arguments else None


def describe(arguments: dict[str, Any]) -> str:
    """`dim=64, depth=2, dims=ModelDimensions(n_mels=16, ...)`."""
    return ", ".join(f"{name}={render(value)}" for name, value in arguments.items())


def render(value: Any) -> str:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        inner = ", ".join(f"{item.name}={getattr(value, item.name)!r}" for item in dataclasses.fields(value))
        return f"{type(value).__name__}({inner})"
    return repr(value)
