"""Example inputs for a plain-torch model (no transformers config): its first layer says what the first
input is, the forward's signature what the others are, and a probe which of the plausible sets runs.

The first layer gives the first input (token ids below an nn.Embedding's vocabulary, features of an
nn.Linear's width, channels of a conv). The forward's other required parameters are made from their
names and annotations: masks (bool), lengths (int64 `(batch,)`, the full sequence), positions and
timesteps, integers, further token ids, and further tensors (a decoder's `memory`) like the first or,
when the first is token ids, features of the model's width.

Where the code alone decides (a mask `(batch, 1, time)` broadcast against attention scores, features
`(batch, time, idim)` a conv front end unsqueezes or transposes itself, queries split into heads), the
plausible sets are tried in turn on a CPU copy of a small model with uninitialised weights (the shapes
are what matter; data-dependent code runs as it would), and the first that runs goes first. When none
runs, the first guess stands alone, so a failure reads as before. The sets include what the forward's
source tells (`forward_body`: a further input's rank from an einsum, an optional input an assertion asks
for), images cut into the patch size the model keeps, and ids of the sequence length it keeps. A model
too large to copy hands the capture its first few sets in turn.

Conditioning inputs take the shape of the layer that reads them (conditioning_inputs): a diffusion block's
`temb` the width of its projection, a timestep `(batch,)`, labels below their embedding's size; the optional
ones the model, as built, reads are tried together and alone, after the rest. A graph layer's forward
(`edge_index`) gets a graph (graph_inputs).
"""

from __future__ import annotations

import inspect
import re
import time
from dataclasses import dataclass
from typing import Any

from reslint.trace.conditioning_inputs import conditioning_kind, conditioning_spec
from reslint.trace.declared_inputs import declared_candidate
from reslint.trace.documented_inputs import make_value
from reslint.trace.forward_body import asked_inputs, compared_strings, parameter_ranks
from reslint.trace.graph_inputs import graph_candidate
from reslint.trace.input_specs import BATCH, SEQ, Candidate, InputError, TensorSpec, forward_parameters
from reslint.trace.mapping_inputs import bundle_candidates, mapping_candidates
from reslint.trace.tabular_inputs import tabular_candidate

PROBE_MAX_PARAMETERS = 50_000_000  # a CPU copy of at most ~200 MB of weights
PROBE_SECONDS = 15.0  # CPU time for all the tries of one model: a loaded machine does not cut the tries short
PROBE_TRIES = 48
UNPROBED_TRIES = 3  # candidates handed to the capture in turn when the model is too large to probe
LENGTH_ATTRIBUTES = ("max_seq_len", "max_seq_length", "block_size", "context_length")
MAX_OWN_LENGTH = 2048
FEATURE_WIDTHS = (16, 32, 80)  # a speech front end's features: the inferred `idim`, the common width, 80 mel bins


def plain_candidates(model: Any) -> list[Candidate]:
    """The inputs of a plain-torch model: the ones it declares (declared_inputs) or the first guess, or the first
    plausible set that runs on a probe."""
    declared = declared_candidate(model)
    try:
        firsts = first_inputs(model)
    except InputError:
        if declared is None:
            raise
        return [declared]
    guess = complete(model, *firsts[0], Choice())
    # a forward reading its tensors from one mapping (`windows_batch["insample_y"]`): no tensor guess can run
    tried = [given for given in (declared, tabular_candidate(model)) if given is not None] + \
        mapping_candidates(model) + bundle_candidates(model, firsts[0][0]) + [guess]
    first = firsts[0][0]
    if isinstance(first, TensorSpec) and first.shape and (graph := graph_candidate(model, first.shape[-1])) is not None:
        tried.append(graph)
    ranks = parameter_ranks(model)
    for first, like, extra, where in firsts:
        for choice in CHOICES:
            candidate = complete(model, first, like, extra, where, choice)
            # then with the ranks the body reads further inputs with: a guess that ran before still runs first
            for each in (candidate, ranked(candidate, ranks)):
                if each not in tried:
                    tried.append(each)
    required = [parameter.name for parameter in forward_parameters(model).values()
                if parameter.default is inspect.Parameter.empty and parameter.kind is not parameter.VAR_POSITIONAL
                and parameter.kind is not parameter.VAR_KEYWORD and parameter.kind is not parameter.POSITIONAL_ONLY]
    if required and all(NUMBER_NAMES.fullmatch(name.lower()) for name in required):  # `forward(self, i, j)`: sizes
        tried.append(([], {name: SEQ for name in required}, "sizes " + ", ".join(f"{name}={SEQ}" for name in required)))
    tried += [asked for name in asked_inputs(model) if (asked := with_input(guess, name, model)) is not None]
    # last: an optional cross-attention input the layers cannot do without (perceiver's `context=None`
    # normed by a PreNorm's norm_context), made like the first input
    tried += [given for name in optional_side_inputs(model)
              if (given := with_input(guess, name, model, "an optional side input")) is not None and given not in tried]
    # then the optional conditioning inputs the model, as built, reads (a timestep, class labels, `emb`):
    # all of them, then each alone
    conditioned = complete(model, *firsts[0], Choice(consumers=True))
    optional = optional_conditioning(model, conditioned)
    for chosen in ([optional] if len(optional) > 1 else []) + [[spec] for spec in optional]:
        given = with_specs(conditioned, chosen)
        if given not in tried:
            tried.append(given)
    # last, so that no earlier set moves: the rank the body reads the first input with too (`B, L, H, E =
    # queries.shape`: heads already split), further inputs made like it alike, and a required mask left None
    unmasked = complete(model, *firsts[0], Choice(NO_MASK))
    for each in (ranked(guess, ranks, positional_names(model)[:1]), unmasked,
                 ranked(unmasked, ranks, positional_names(model)[:1])):
        if each not in tried:
            tried.append(each)
    # a model too large to probe hands the capture its first few sets, and then every conditioning input at once
    # (a diffusion transformer's forward needs its timestep and labels however it is built)
    return probe(model, tried, [with_specs(conditioned, optional)] if optional else [])


def optional_conditioning(model: Any, candidate: Candidate) -> list[TensorSpec]:
    """Specs of the forward's optional conditioning parameters (default None) the layers that read them size."""
    specs = candidate[0]
    if not specs or not isinstance(specs[0], TensorSpec):
        return []
    batch = specs[0].shape[0] if specs[0].shape else BATCH
    seq = specs[0].shape[1] if len(specs[0].shape) >= 2 else SEQ
    given = {spec.name for spec in specs} | set(candidate[1])
    return [spec for parameter in forward_parameters(model).values()
            if parameter.default is None and parameter.name not in given
            and parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
            and (spec := conditioning_spec(model, parameter, batch, seq)) is not None]


def with_specs(candidate: Candidate, specs: list[TensorSpec]) -> Candidate:
    specs_now, extra, where = candidate
    names = ", ".join(f"`{spec.name}`" for spec in specs)
    return [*specs_now, *specs], extra, f"{where}; {names}, conditioning the model reads"


def optional_side_inputs(model: Any) -> list[str]:
    """The forward's optional parameters named like a second stream it attends to (context, memory, encoder states)."""
    return [parameter.name for parameter in forward_parameters(model).values()
            if parameter.default is None and SIDE_INPUT_NAMES.fullmatch(parameter.name.lower())]


def with_input(candidate: Candidate, name: str, model: Any,
               why: str = "which the forward's assertion asks for") -> Candidate | None:
    """`candidate` plus the optional input `name`, made like its first tensor (a cross-attention stack's
    `context=None` that an assertion asks for); None when it cannot be made."""
    specs, extra, where = candidate
    parameter = forward_parameters(model).get(name)
    if not specs or not isinstance(specs[0], TensorSpec) or parameter is None or name in extra \
            or any(spec.name == name for spec in specs):
        return None
    first = specs[0]
    batch = first.shape[0] if first.shape else BATCH
    spec = parameter_spec(parameter, first, batch, first.shape[1] if len(first.shape) >= 2 else SEQ)
    if spec is None:
        return None
    return [*specs, spec], extra, f"{where}; `{name}`, {why}"


def first_token_ids(model: Any) -> Candidate | None:
    """Token ids for a forward whose first parameter is named like them (litgpt's `GPT.forward(idx)`), when its
    first layer is not the embedding (the `lm_head` registered before `wte`)."""
    import inspect

    parameters = [parameter for parameter in forward_parameters(model).values()
                  if parameter.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    spec = token_ids_spec(model, parameters[0], BATCH) if parameters else None
    if spec is None:
        return None
    return [TensorSpec(spec.dtype, spec.shape, spec.high)], {}, f"the forward's `{parameters[0].name}` and the first nn.Embedding"


def infer_specs(model: Any, skip: frozenset[int] = frozenset()) -> tuple[list[TensorSpec], dict, str]:
    """(tensor specs, extra keyword arguments, where they come from) of the model's first layer (not one of
    `skip`, ids of the layers that read a conditioning input); raises InputError."""
    from torch import nn

    for name, module in model.named_modules():
        if id(module) in skip:
            continue
        where = f"{type(module).__name__}" + (f" ({name})" if name else "")
        if isinstance(module, nn.TransformerEncoder):
            module = module.layers[0]
        if isinstance(module, (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)):
            width, batch_first = module.self_attn.embed_dim, module.self_attn.batch_first
            if isinstance(module, nn.TransformerDecoderLayer):
                shape = (BATCH, SEQ, width) if batch_first else (SEQ, BATCH, width)
                return [TensorSpec("float32", shape), TensorSpec("float32", shape)], {}, where
            return [TensorSpec("float32", (BATCH, SEQ, width) if batch_first else (SEQ, BATCH, width))], {}, where
        if isinstance(module, nn.MultiheadAttention):
            shape = (BATCH, SEQ, module.embed_dim) if module.batch_first else (SEQ, BATCH, module.embed_dim)
            if name == "":
                return [TensorSpec("float32", shape)] * 3, {}, where
            return [TensorSpec("float32", shape)], {}, where
        if isinstance(module, nn.Embedding):
            return [TensorSpec("int64", (BATCH, SEQ), module.num_embeddings)], {}, where
        if isinstance(module, nn.EmbeddingBag):
            return [TensorSpec("int64", (BATCH, SEQ), module.num_embeddings)], {}, where
        if isinstance(module, nn.Linear):
            return [TensorSpec("float32", (BATCH, SEQ, module.in_features))], {}, where
        if isinstance(module, nn.Conv1d):
            return [TensorSpec("float32", (BATCH, module.in_channels, 64))], {}, where
        if isinstance(module, nn.Conv2d):
            return [TensorSpec("float32", (BATCH, module.in_channels, 32, 32))], {}, where
        if isinstance(module, nn.Conv3d):
            return [TensorSpec("float32", (BATCH, module.in_channels, 8, 16, 16))], {}, where
        if isinstance(module, (nn.RNN, nn.LSTM, nn.GRU)):
            shape = (BATCH, SEQ, module.input_size) if module.batch_first else (SEQ, BATCH, module.input_size)
            return [TensorSpec("float32", shape)], {}, where
        if isinstance(module, (nn.LayerNorm, nn.RMSNorm)) and module.normalized_shape:
            return [TensorSpec("float32", (BATCH, SEQ, *module.normalized_shape))], {}, where
    # Hand-written layers (a manual LayerNorm's weight (d,), a raw weight matrix (out, in)): features of that width.
    for name, parameter in model.named_parameters():
        if parameter.dim() in (1, 2) and parameter.is_floating_point():
            width = int(parameter.shape[-1])
            return [TensorSpec("float32", (BATCH, SEQ, width))], {}, f"parameter {name} {tuple(parameter.shape)}"
    if next(model.parameters(), None) is None:  # a parameter-free function (a hand-written norm, an activation)
        return [TensorSpec("float32", (BATCH, SEQ, 32))], {}, "default features: the model has no parameters"
    raise InputError("cannot infer the inputs (no embedding, linear, conv or attention layer found); pass --inputs")


def first_inputs(model: Any) -> list[tuple[TensorSpec, TensorSpec | None, dict, str]]:
    """(first input, what further inputs look like, extra keyword arguments, where from), the likeliest first:
    the first layer's input, then the shapes that layer's own code may make of another input."""
    from torch import nn

    try:
        specs, extra, where = infer_specs(model)
    except InputError:
        named = named_first_input(model)
        if named is None:
            raise
        return [named]
    first = specs[0]
    found = [(first, None, extra, where)]
    if first.dtype != "int64" and (ids := first_token_ids(model)) is not None:
        # the other inputs are what the first layer reads (a vision-language model's `patches`), not ids
        found = [(ids[0][0], first, ids[1], ids[2])]
    if len(specs) > 1:  # nn.TransformerDecoderLayer, nn.MultiheadAttention: every input already made
        return [(specs, None, extra, where)]
    shape = first.shape
    if first.dtype.startswith("float") and len(shape) == 3 and "Conv1d" in where:  # (batch, time, channels), transposed by the code
        found.append((TensorSpec(first.dtype, (shape[0], shape[2], shape[1])), None, extra, f"{where}, as (batch, time, channels)"))
    if first.dtype.startswith("float") and len(shape) == 4 and shape[1] == 1 and "Conv2d" in where:
        # a conv front end over (batch, time, features) unsqueezed to one channel (speech subsampling)
        found += [(TensorSpec(first.dtype, (BATCH, 4 * SEQ, width)), None, extra, f"{where}, as (batch, time, {width} features)")
                  for width in FEATURE_WIDTHS]
    if len(shape) in (2, 3) and shape[1] == SEQ and (length := own_length(model)) is not None:
        found.append((TensorSpec(first.dtype, (shape[0], length, *shape[2:]), first.high), None, extra,
                      f"{where}, {length} positions: the model's own length"))
    if first.dtype.startswith("float") and len(shape) != 4 and (patch := patch_size(model)) is not None:
        found += image_inputs(model, patch, shape[-1] if shape else None, extra, where)
    names = positional_names(model)
    if first.dtype.startswith("float") and len(shape) == 3 and names[:1] in (["q"], ["query"]):
        heads = 4 if shape[2] % 4 == 0 else 1  # queries already split into heads: (batch, heads, time, head width)
        found.append((TensorSpec(first.dtype, (shape[0], heads, shape[1], shape[2] // heads)), None, extra,
                      f"{where}, split into {heads} heads"))
    found += conditioning_firsts(model, specs)
    if first.dtype.startswith("float") and len(shape) == 3 and where.startswith("Linear") and \
            any(isinstance(module, nn.BatchNorm1d) for module in model.modules()):
        # tabular rows `(batch, features)`: a BatchNorm1d after the projection reads the second axis as channels
        found.append((TensorSpec(first.dtype, (shape[0], shape[2])), None, extra, f"{where}, as (batch, features)"))
    return found


def conditioning_firsts(model: Any, specs: list[TensorSpec]) -> list[tuple[TensorSpec, None, dict, str]]:
    """First inputs the conditioning parameters tell: a first parameter that is a timestep or labels
    (an adaptive norm's `forward(timestep, ...)`), and the first layer that is not the one a conditioning
    input reads (a block whose first registered layer projects its `temb`)."""
    from reslint.trace.consuming_layers import consuming_layer

    parameters = [parameter for parameter in forward_parameters(model).values()
                  if parameter.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                        inspect.Parameter.KEYWORD_ONLY)]
    if not parameters:
        return []
    found = []
    if conditioning_kind(parameters[0].name) in ("time", "label") and \
            (spec := conditioning_spec(model, parameters[0], BATCH, SEQ)) is not None:
        found.append((TensorSpec(spec.dtype, spec.shape, spec.high), None, {}, f"the forward's `{parameters[0].name}`"))
    readers = frozenset(id(layer) for parameter in parameters[1:] if conditioning_kind(parameter.name) in ("vector", "time")
                        and (layer := consuming_layer(model, parameter.name)) is not None)
    if readers:
        try:
            others, extra, where = infer_specs(model, readers)
        except InputError:
            return found
        if others != specs:
            found.append((others[0], None, extra, f"{where}, not the layer a conditioning input reads"))
    return found


def own_length(model: Any) -> int | None:
    """The sequence length a model keeps (`self.max_seq_len`) where it may compute position terms for exactly
    that many positions (T5's relative position bias), when it is longer than the default and not huge."""
    for name in LENGTH_ATTRIBUTES:
        value = getattr(model, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and SEQ < value <= MAX_OWN_LENGTH:
            return value
    return None


def patch_size(model: Any) -> tuple[int, int] | None:
    """The patch size a model that cuts images into patches itself keeps (`self.patch_size = patch_size`)."""
    size = getattr(model, "patch_size", None)
    if isinstance(size, int) and not isinstance(size, bool) and size > 0:
        return size, size
    if isinstance(size, (tuple, list)) and len(size) == 2 and all(isinstance(side, int) and side > 0 for side in size):
        return size[0], size[1]
    return None


def image_inputs(model: Any, patch: tuple[int, int], width: int | None, extra: dict,
                 where: str) -> list[tuple[TensorSpec, None, dict, str]]:
    """Images `(batch, channels, height, width)` whose sides are multiples of the patch size: the model's own
    image size first, then 4, 2 and 1 patches a side (fewer patches than a position table holds). The
    channels are the model's own, else what a flattened patch (channels x patch area) leaves, else 3."""
    channels = next((value for name in ("channels", "in_channels", "num_channels", "in_chans")
                     if isinstance(value := getattr(model, name, None), int) and not isinstance(value, bool)), None)
    area = patch[0] * patch[1]
    if channels is None:
        channels = width // area if width and width % area == 0 else 3
    sides = []
    own = getattr(model, "image_size", None)
    if isinstance(own, int) and own % patch[0] == 0 and own % patch[1] == 0:
        sides.append((own, own))
    sides += [(patch[0] * count, patch[1] * count) for count in (4, 2, 1)]
    return [(TensorSpec("float32", (BATCH, channels, *side)), None, extra,
             f"{where}, as images cut into {patch[0]}x{patch[1]} patches")
            for side in dict.fromkeys(sides)]


def named_first_input(model: Any) -> tuple[TensorSpec, None, dict, str] | None:
    """A first input its name or a parameter's shape says, for a model without a layer that tells."""
    names = positional_names(model)
    if names and POSITION_NAMES.fullmatch(names[0].lower()):
        return TensorSpec("int64", (BATCH, SEQ), SEQ), None, {}, f"the forward's `{names[0]}` (positions)"
    for name, parameter in model.named_parameters():
        if parameter.dim() == 3 and parameter.shape[1] == 1 and parameter.is_floating_point():  # per head: (heads, 1, width)
            shape = (BATCH, *(SEQ if size == 1 else int(size) for size in parameter.shape))
            return TensorSpec("float32", shape), None, {}, f"parameter {name} {tuple(parameter.shape)}"
    return None


def positional_names(model: Any) -> list[str]:
    return [parameter.name for parameter in forward_parameters(model).values()
            if parameter.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]


@dataclass(frozen=True)
class Choice:
    """How the further inputs are made where their names do not decide it."""

    mask: tuple[str, ...] = ()  # a mask's shape in "batch"/"seq"/"1" (empty: by its name)
    side: str = "like"  # "like": further tensors like the first; "width": features of the model's width
    numbers: bool = False  # required parameters without annotation named like sizes/positions are integers
    consumers: bool = False  # conditioning parameters shaped by the layer that reads them (conditioning_inputs)


NO_MASK = ("none",)
MASK_SHAPES = (("batch", "seq"), ("batch", "1", "seq"), ("batch", "seq", "seq"), ("batch", "1", "seq", "seq"),
               ("seq", "seq"), ("1", "seq", "seq"))
CHOICES = (Choice(), Choice(consumers=True), *(Choice(mask) for mask in MASK_SHAPES), Choice(side="width"),
           *(Choice(mask, "width") for mask in MASK_SHAPES), Choice(numbers=True),
           *(Choice(mask, consumers=True) for mask in MASK_SHAPES))

SQUARE_MASK_NAMES = ("attn_mask", "src_mask", "tgt_mask", "causal_mask", "attention_bias")
LENGTH_NAMES = re.compile(r"(\w+_)?(lengths?|lens|len)|[a-z]lens|seq_?lens?|seqlens")
TIME_NAMES = ("t", "timestep", "timesteps", "time", "step")
POSITION_NAMES = re.compile(r"t|times?|pos|positions?|position_ids|timesteps?")
NUMBER_NAMES = re.compile(r"[ijn]|(\w+_)?(len|length|size|steps?|num|count)")
SIDE_INPUT_NAMES = re.compile(r"context|memory|cond|encoder_(hidden_states|out|outputs?)|enc_out")
TOKEN_ID_NAMES = re.compile(r"(\w+_)?(tokens|token_ids|ids|idx)")


def complete(model: Any, first: TensorSpec | list[TensorSpec], like: TensorSpec | None, extra: dict, where: str,
             choice: Choice) -> Candidate:
    """The candidate of `first` plus what the forward's other required parameters call for under `choice`."""
    if isinstance(first, list):
        return first, extra, where
    parameters = [parameter for parameter in forward_parameters(model).values()
                  if parameter.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                        inspect.Parameter.KEYWORD_ONLY)]
    if len(parameters) < 2 or first.name:
        return [first], extra, where
    batch = first.shape[0] if first.shape else BATCH
    seq = first.shape[1] if len(first.shape) >= 2 else SEQ
    side = like or first
    if choice.side == "width" and (width := model_width(model)) is not None:
        side = TensorSpec("float32", (batch, seq, width))
    specs, values = [first], dict(extra)
    switches = compared_strings(model)  # a required mode switch (`forward(x, mode: str)`, `if mode == "norm"`)
    for parameter in parameters[1:]:
        if parameter.default is not inspect.Parameter.empty:
            continue
        keyword = parameter.name if parameter.kind is not parameter.POSITIONAL_ONLY else ""
        number = number_value(parameter, choice, seq)
        if number is None and parameter.name in switches:
            number = switches[parameter.name]
        if number is not None and keyword:
            values[keyword] = number
            continue
        if choice.mask == NO_MASK and "mask" in parameter.name.lower() and keyword:
            values[keyword] = None  # a required mask that None turns off (`if self.mask_flag and attn_mask`)
            continue
        spec = token_ids_spec(model, parameter, batch) or \
            (conditioning_spec(model, parameter, batch, seq) if choice.consumers else None) or \
            parameter_spec(parameter, side, batch, seq, choice.mask)
        if spec is None:
            return [first], extra, where  # a required argument we cannot make: the failure will say so
        specs.append(spec)
    return specs, values, where


def ranked(candidate: Candidate, ranks: dict[str, int], first: list[str] = ()) -> Candidate:
    """`candidate` with its further keyword tensors given the ranks the forward's body reads them with; `first`:
    the first input's name, to rank it too, and the further inputs made like it that the body gives no rank."""
    specs, extra, where = candidate
    if not ranks or not specs or not isinstance(specs[0], TensorSpec) or (len(specs) < 2 and not first):
        return candidate
    head = with_rank(specs[0], ranks.get(first[0])) if first else specs[0]
    like = {specs[0].shape: head.shape} if head.shape != specs[0].shape else {}
    further = [with_rank(spec, ranks.get(spec.name)) if spec.name and spec.name in ranks
               else TensorSpec(spec.dtype, like[spec.shape], spec.high, spec.name, spec.fill)
               if spec.dtype == specs[0].dtype and spec.shape in like else spec for spec in specs[1:]]
    return [head, *further], extra, where


def with_rank(spec: TensorSpec, rank: int | None) -> TensorSpec:
    """A features tensor given the rank the forward's body reads it with: more axes go first (a stack of
    layers' hidden states `(layers, batch, time, width)`), fewer keep the batch and the width."""
    if rank is None or not spec.dtype.startswith("float") or rank == len(spec.shape) or not spec.shape:
        return spec
    if rank > len(spec.shape):
        shape = (BATCH,) * (rank - len(spec.shape)) + spec.shape
    else:
        shape = spec.shape[:1] + spec.shape[len(spec.shape) - rank + 1:]
    return TensorSpec(spec.dtype, shape, spec.high, spec.name, spec.fill)


def number_value(parameter: Any, choice: Choice, seq: int) -> Any:
    """The Python value of a required parameter annotated as a number or flag (or named like a size, under
    `choice.numbers`), else None."""
    annotation = parameter.annotation if isinstance(parameter.annotation, str) else getattr(parameter.annotation, "__name__", "")
    if annotation == "int" or (choice.numbers and annotation in ("", "_empty") and NUMBER_NAMES.fullmatch(parameter.name.lower())):
        return seq
    if annotation == "float":
        return 1.0
    if annotation == "bool":
        return False
    return None


def model_width(model: Any) -> int | None:
    """The width of the model's stream: its first norm's, else its first linear layer's input."""
    from torch import nn

    for module in model.modules():
        if isinstance(module, (nn.LayerNorm, nn.RMSNorm)) and module.normalized_shape:
            return int(module.normalized_shape[-1])
    return next((module.in_features for module in model.modules() if isinstance(module, nn.Linear)), None)


def token_ids_spec(model: Any, parameter: Any, batch: int) -> TensorSpec | None:
    """Token ids for a further input named like them (Whisper's `forward(mel, tokens)`), below the vocabulary
    of the model's first embedding; None when the name says otherwise or the model embeds no tokens."""
    from torch import nn

    if not TOKEN_ID_NAMES.fullmatch(parameter.name.lower()):
        return None
    embedding = next((module for module in model.modules() if isinstance(module, nn.Embedding)), None)
    if embedding is None:
        return None
    keyword = parameter.name if parameter.kind is not parameter.POSITIONAL_ONLY else ""
    return TensorSpec("int64", (batch, SEQ), embedding.num_embeddings, keyword)


def parameter_spec(parameter: Any, first: TensorSpec, batch: int, seq: int, mask: tuple[str, ...] = ()) -> TensorSpec | None:
    name = parameter.name.lower()
    annotation = parameter.annotation if isinstance(parameter.annotation, str) else getattr(parameter.annotation, "__name__", "")
    keyword = parameter.name if parameter.kind is not parameter.POSITIONAL_ONLY else ""
    if annotation in ("int", "float", "bool", "str"):
        return None
    if "mask" in name and mask:
        sizes = {"batch": batch, "seq": seq, "1": 1}
        return TensorSpec("bool", tuple(sizes[size] for size in mask), name=keyword)
    if name in SQUARE_MASK_NAMES:
        return TensorSpec("bool", (seq, seq), name=keyword)
    if "mask" in name:
        return TensorSpec("bool", (batch, seq), name=keyword)
    if LENGTH_NAMES.fullmatch(name):
        return TensorSpec("int64", (batch,), seq + 1, keyword, fill=seq)
    if name in TIME_NAMES:
        return TensorSpec("int64", (batch,), 100, keyword)
    return TensorSpec(first.dtype, first.shape, first.high, keyword)


def probe(model: Any, candidates: list[Candidate], unprobed: list[Candidate] = ()) -> list[Candidate]:
    """`candidates[0]` alone, or the first candidate whose forward runs on a CPU copy of the model put first;
    the first few in order, then `unprobed`, when the model is too large to copy."""
    if len(candidates) < 2:
        return candidates[:1]
    copy = probe_copy(model)
    if copy is None:  # the capture tries a few in turn (a failure still reports the first)
        return candidates[:UNPROBED_TRIES] + [each for each in unprobed if each not in candidates[:UNPROBED_TRIES]]
    import torch

    deadline = time.process_time() + PROBE_SECONDS
    for candidate in candidates[:PROBE_TRIES]:
        if time.process_time() > deadline:
            break
        specs, extra, _ = candidate
        args = tuple(make_value(spec, "cpu") for spec in specs if not spec.name)
        kwargs = {**extra, **{spec.name: make_value(spec, "cpu") for spec in specs if spec.name}}
        try:
            with torch.no_grad(), torch.random.fork_rng():
                copy(*args, **kwargs)
        except Exception:  # noqa: BLE001 - the user's forward rejecting a guess
            continue
        return [candidate] if candidate is candidates[0] else [candidate, candidates[0]]
    return candidates[:1]


def probe_copy(model: Any) -> Any:
    """A CPU copy of a small model, weights uninitialised where the model is on meta; None when it cannot be made."""
    import copy

    if sum(parameter.numel() for parameter in model.parameters()) > PROBE_MAX_PARAMETERS:
        return None
    try:
        duplicate = copy.deepcopy(model)
        on_meta = any(tensor.device.type == "meta" for tensor in (*duplicate.parameters(), *duplicate.buffers()))
        if not on_meta:
            return duplicate
        duplicate.to_empty(device="cpu")
        import torch

        for module in duplicate.modules():  # tensors kept as plain attributes (a positional table): not moved by to_empty
            for name, value in list(vars(module).items()):
                if isinstance(value, torch.Tensor) and value.device.type == "meta":
                    setattr(module, name, torch.zeros(value.shape, dtype=value.dtype))
        return duplicate
    except Exception:  # noqa: BLE001 - a model that cannot be copied is not probed
        return None
