"""Shrink a transformers config before a discovered model is built for tracing.

A default config can describe a 60-layer, 256-expert model: its graph takes minutes to export
(or its CPU fallback runs out of memory), though every block of a stack is built from the same
code. Tracing a few blocks gives the same placement facts, so discovered transformers models are
built with at most `KEEP_LAYERS` blocks per stack (more where the config lists per-layer types:
the first blocks that show every type) and a few experts. The stack depths the rules read are
put back to the config's own counts, and the summary says that the config was reduced.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

KEEP_LAYERS = 2  # two blocks, so a stack is still a stack (placement, mixed blocks, final norm)
KEEP_EXPERTS = 4
LAYER_FIELDS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers", "encoder_layers", "decoder_layers",
                "num_encoder_layers", "num_decoder_layers",
                "num_layers_per_stack")  # HRM: the blocks of each stack, run H x (L + 1) times per forward
# A decoding loop run inside the forward up to a config's length (SLANeXt: 501 steps of one attention cell, each
# traced anew): a few steps show the same cell.
STEP_FIELDS = ("max_text_length",)
KEEP_STEPS = 4
# A recurrent trunk re-run over the same layers (EsmFold2: 10 refinement loops of a 24-layer pair stack, each
# traced anew, 277 s to export): one loop shows the same layers.
LOOP_FIELDS = ("num_loops", "num_recycles")
KEEP_LOOPS = 1
EXPERT_FIELDS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
TOP_K_FIELDS = ("num_experts_per_tok", "moe_topk", "num_selected_experts", "moe_k")
EXPERT_GROUP_FIELDS = ("n_group", "topk_group")
MAX_LAYER_TYPES = 4
LAYER_INDEX_FIELD = re.compile(r"hook")  # not `out_indices`: a backbone checks them against `out_features`
PREDICTION_LENGTH = 16  # longer than the label window a decoder re-reads (Autoformer: 10)
UNSET_VOCAB = 32
DOCUMENTED_EXAMPLE = re.compile(r"e\.g\.,? `?[\"']([^\"'`]+)[\"']`?")
WIDTH_LIST = re.compile(r"(channels|hidden_sizes|dims)$")  # a list field of layer widths
NONE_DESCRIBED = re.compile(r"\b(?:when|if)\b[^.]*`None`", re.IGNORECASE)  # "When `None` (default), no branch is built"


def tracing_config(config_class: type, repeats: int = 1) -> tuple[Any, list[tuple[str, Any, Any]]]:
    """The class's default config, shrunk, and what was changed. A forecasting config without a
    `prediction_length` (its models cannot be built) gets a short one: the derived context follows.
    `repeats`: each per-layer type appears that many times in the blocks kept, where the stack has them."""
    config, changes = config_class(), []
    if hasattr(config, "prediction_length") and config.prediction_length is None:
        try:
            config = config_class(prediction_length=PREDICTION_LENGTH)
            changes.append(("prediction_length", None, PREDICTION_LENGTH))
        except Exception:  # noqa: BLE001 - a config that rejects it: build the default, as before
            pass
    # A CTC head's vocabulary is the checkpoint's (Wav2Vec2-BERT leaves it None): a small one stands for it.
    if hasattr(config, "vocab_size") and config.vocab_size is None and assign(config, "vocab_size", UNSET_VOCAB):
        changes.append(("vocab_size", None, UNSET_VOCAB))
    heads = getattr(config, "num_attention_heads", None)
    # Documented as "defaults to num_attention_heads when None"; some configs leave it None (Nemotron).
    if hasattr(config, "num_key_value_heads") and config.num_key_value_heads is None and isinstance(heads, int) \
            and assign(config, "num_key_value_heads", heads):
        changes.append(("num_key_value_heads", None, heads))
    return config, changes + reduce_config(config, repeats)


def tracing_attempts(config_class: type) -> Iterator[tuple[Any, list]]:
    """The configs to build a discovered model from, in turn until one builds: the reduced default; each
    per-layer type twice (a layer shared by every block of one type, Zamba's, needs two to tie); and the
    reduced default with the container fields it leaves None (Emu3's `vocabulary_map`) empty."""
    config, changes = tracing_config(config_class)
    yield config, changes
    twice, repeated = tracing_config(config_class, repeats=2)
    if repeated != changes:
        yield twice, repeated
    config, changes = tracing_config(config_class)
    filled = fill_unset_containers(config) + fill_documented_examples(config)
    if filled:
        yield config, changes + filled
    # An int field left at -1 often means "unset" (ViLT's `num_images`, which sizes its classifier): one such
    # field at a time set to 1, on top of the last attempt, so -1 fields that mean "the last layer" keep it.
    for prefix, name in unset_counts(config):
        config, changes = tracing_config(config_class)
        filled = fill_unset_containers(config) + fill_documented_examples(config)
        holder = dict(config_holders(config))[prefix]
        if assign(holder, name, 1):
            yield config, changes + filled + [(prefix + name, -1, 1)]
    # A head whose layer widths are the checkpoint's (Sapiens2's `upsample_out_channels`): one layer of the width
    # the docstring names, the lists it describes as optional left None, rebuilt so its own code derives the rest.
    config, changes = tracing_config(config_class)
    config, filled = fill_width_lists(config)
    if filled:
        yield config, changes + filled


def fill_width_lists(config: Any) -> tuple[Any, list[tuple[str, Any, Any]]]:
    """In each config holding a None list of widths whose docstring names the width it starts from (`hidden_size`
    channels, a field of it or of a config above it): that list one such layer, the other None lists empty, except
    those whose docstring says what None does; the holder rebuilt by its class with them, so what its
    `__post_init__` derives from them (one kernel size per layer) follows. The config (the root itself may be
    rebuilt) and the fills: none where no holder has such a list."""
    filled: list[tuple[str, Any, Any]] = []
    holders = config_holders(config)
    for prefix, holder in holders:
        text, values, fills = type(holder).__doc__ or "", {}, []
        for name, annotation in sorted(own_annotations(holder).items()):
            kind = annotation if isinstance(annotation, str) else repr(annotation)
            if not kind.startswith(("list", "List")) or getattr(holder, name, 0) is not None:
                continue
            entry = docstring_entry(text, name)
            if NONE_DESCRIBED.search(entry):
                continue
            width = WIDTH_LIST.search(name) and named_width(entry, prefix, holders)
            values[name] = [width] if width else []
            fills.append((prefix + name, None, values[name]))
        if not any(after for _, _, after in fills):
            continue
        rebuilt = rebuild(holder, values)
        if rebuilt is None:
            continue
        if not prefix:
            config = rebuilt
        elif not replace_holder(config, prefix, rebuilt):
            continue
        filled.extend(fills)
    return config, filled


def own_annotations(holder: Any) -> dict:
    """The annotated fields of the model's own config classes (not the base config's)."""
    annotations: dict = {}
    for klass in reversed(type(holder).__mro__):
        if not klass.__module__.startswith("transformers.configuration_utils"):
            annotations.update(vars(klass).get("__annotations__", {}))
    return annotations


def docstring_entry(text: str, name: str) -> str:
    """The description under `name (`type`, ...):` in a config's docstring ("" where it has none)."""
    entry = re.search(rf"^([ \t]*){re.escape(name)} \(`[^\n]*\):\n((?:\1[ \t]+\S[^\n]*\n?)+)", text, re.MULTILINE)
    return entry.group(2) if entry else ""


def named_width(entry: str, prefix: str, holders: list[tuple[str, Any]]) -> int | None:
    """The positive int field the entry names in backquotes, looked up in the config at `prefix`, then those above."""
    by_prefix = dict(holders)
    chain = [prefix[:cut] for cut in range(len(prefix), -1, -1) if cut == 0 or prefix[cut - 1] == "."]
    for name in re.findall(r"`(\w+)`", entry):
        for holder in (by_prefix[level] for level in chain if level in by_prefix):
            value = getattr(holder, name, None)
            if type(value) is int and value > 0:
                return value
    return None


def rebuild(holder: Any, values: dict) -> Any:
    """`holder`'s class built from its own fields as they are, `values` over them; None where it refuses them."""
    fields = {name: getattr(holder, name) for name in own_annotations(holder) if hasattr(holder, name)}
    try:
        return type(holder)(**{**fields, **values})
    except Exception:  # noqa: BLE001 - a config that validates its fields otherwise
        return None


def replace_holder(config: Any, prefix: str, rebuilt: Any) -> bool:
    """Put `rebuilt` where the sub-config at `prefix` (`head_config.`) sits."""
    parent_prefix, _, name = prefix[:-1].rpartition(".")
    parent = dict(config_holders(config))[parent_prefix + "." if parent_prefix else ""]
    return assign(parent, name, rebuilt)


def fill_unset_containers(config: Any) -> list[tuple[str, Any, Any]]:
    """Set the list and dict fields a config leaves None (by their annotation) to empty ones: a model that
    reads a checkpoint's map or layer list builds without one (nothing is mapped, no layer is listed)."""
    filled = []
    for prefix, holder in config_holders(config):
        for name, annotation in sorted(own_annotations(holder).items()):
            text = annotation if isinstance(annotation, str) else repr(annotation)
            empty = [] if text.startswith(("list", "List")) else {} if text.startswith(("dict", "Dict")) else None
            if empty is not None and getattr(holder, name, 0) is None and assign(holder, name, empty):
                filled.append((prefix + name, None, empty))
    return filled


def fill_documented_examples(config: Any) -> list[tuple[str, Any, Any]]:
    """Set the string fields a config leaves None to the first example its docstring gives (Granite4-Vision's
    `downsample_rate`: 'e.g. `"1/4"` or `"3/8"`'): the checkpoint's value is unknown, a documented one builds."""
    filled = []
    for prefix, holder in config_holders(config):
        text = type(holder).__doc__ or ""
        for name, value in sorted(vars(holder).items()):
            if value is not None:
                continue
            # The entry's description: the lines indented deeper than `name (`str`, ...):`.
            entry = re.search(rf"^([ \t]*){re.escape(name)} \(`str`[^\n]*\):\n((?:\1[ \t]+\S[^\n]*\n?)+)", text,
                              re.MULTILINE)
            example = entry and DOCUMENTED_EXAMPLE.search(entry.group(2))
            if example and assign(holder, name, example.group(1)):
                filled.append((prefix + name, None, example.group(1)))
    return filled


def unset_counts(config: Any) -> list[tuple[str, str]]:
    """(holder prefix, field) of the int fields set to -1."""
    return [(prefix, name) for prefix, holder in config_holders(config) for name, value in sorted(vars(holder).items())
            if type(value) is int and value == -1]


def reduce_config(config: Any, repeats: int = 1) -> list[tuple[str, int, int]]:
    """Shrink `config` in place; the changes as (field, before, after), first reduced first."""
    changes: list[tuple[str, int, int]] = []
    used: set[int] = set()
    for prefix, holder in config_holders(config):
        for name in LAYER_FIELDS:
            before = getattr(holder, name, None)
            if not is_count(before):
                continue
            keep = max(layers_to_keep(holder, before, repeats), len(backbone_outputs(holder, before)))
            # Each reduced count distinct, so the depth of a traced stack maps back to one field.
            while keep in used and keep < before:
                keep += 1
            if keep >= before or not assign(holder, name, keep):
                continue
            used.add(keep)
            truncate_per_layer_lists(holder, before, keep)
            changes.append((prefix + name, before, keep))
            changes.extend((prefix + field, old, new) for field, old, new in renumber_backbone_outputs(holder, before, keep))
        changes.extend((prefix + name, before, after) for name, before, after in reduce_experts(holder))
        for name in STEP_FIELDS:
            before = getattr(holder, name, None)
            if isinstance(before, int) and not isinstance(before, bool) and before > KEEP_STEPS \
                    and assign(holder, name, KEEP_STEPS):
                changes.append((prefix + name, before, KEEP_STEPS))
        for name in LOOP_FIELDS:
            before = getattr(holder, name, None)
            if isinstance(before, int) and not isinstance(before, bool) and before > KEEP_LOOPS \
                    and assign(holder, name, KEEP_LOOPS):
                changes.append((prefix + name, before, KEEP_LOOPS))
    return changes + clamp_layer_indices(config, changes)


def backbone_outputs(holder: Any, count: int) -> list:
    """The stages a backbone config returns (`out_features`), where its stages are its `count` layers."""
    names, outputs = getattr(holder, "stage_names", None), getattr(holder, "out_features", None)
    if isinstance(names, list) and len(names) == count + 1 and isinstance(outputs, list):
        return outputs
    return []


def renumber_backbone_outputs(holder: Any, before: int, keep: int) -> list[tuple[str, Any, Any]]:
    """A backbone cut to `keep` layers returns as many stages as it did, its last ones: a neck sized by the
    number of stages (RF-DETR's projector: 4 x 384 channels) gets them all."""
    outputs = backbone_outputs(holder, before)
    if not outputs or all(name in holder.stage_names[:keep + 1] for name in outputs):
        return []
    names = list(holder.stage_names[:keep + 1])
    renumbered = names[len(names) - len(outputs):]
    stages = holder.stage_names
    try:
        holder.stage_names = names
        holder.out_features = renumbered
    except Exception:  # noqa: BLE001 - a config that validates them otherwise: leave its stages as they are
        holder.stage_names = stages
        return []
    return [("out_features", outputs, renumbered)]


def clamp_layer_indices(config: Any, changes: list) -> list[tuple[str, Any, Any]]:
    """Lists of layer indices (Depth Pro's `intermediate_hook_ids`) that name a
    layer the reduction removed point at the last layer kept instead: each holder's indices against the
    shallowest stack reduced in it or its sub-configs."""
    reduced = [(name, after) for name, before, after in changes if name.rsplit(".", 1)[-1] in LAYER_FIELDS]
    clamped = []
    for prefix, holder in config_holders(config):
        depths = [after for name, after in reduced if name.startswith(prefix)]
        if not depths:
            continue
        last = min(depths) - 1
        for name, value in sorted(vars(holder).items()):
            if not LAYER_INDEX_FIELD.search(name) or not isinstance(value, (list, tuple)) or not value \
                    or not all(isinstance(item, int) and not isinstance(item, bool) and item >= 0 for item in value) \
                    or max(value) <= last:
                continue
            after = type(value)(min(item, last) for item in value)
            if assign(holder, name, after):
                clamped.append((prefix + name, value, after))
    return clamped


def config_holders(config: Any, prefix: str = "", seen: set | None = None) -> list[tuple[str, Any]]:
    """The config and its sub-configs (`text_config`, `vision_config`, ...), each with its dotted prefix."""
    seen = set() if seen is None else seen
    if id(config) in seen:
        return []
    seen.add(id(config))
    holders = [(prefix, config)]
    for name, value in sorted(vars(config).items()):
        if hasattr(value, "to_dict") and hasattr(value, "model_type") and not isinstance(value, type):
            holders.extend(config_holders(value, f"{prefix}{name}.", seen))
    return holders


def is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > KEEP_LAYERS


def per_layer_lists(holder: Any, count: int, derived: bool = False) -> dict[str, list]:
    """Config fields with one scalar per layer (`layer_types`, `mlp_only_layers` as flags, ...); with
    `derived`, also properties computed from the count (Jamba's `layers_block_type`)."""
    values = dict(vars(holder))
    if derived:
        for name in dir(type(holder)):
            if "layer" in name and isinstance(getattr(type(holder), name, None), property):
                try:
                    values[name] = getattr(holder, name)
                except Exception:  # noqa: BLE001 - a property of the checked code
                    continue
    return {name: list(value) for name, value in values.items()
            if isinstance(value, (list, tuple)) and len(value) == count
            and all(isinstance(item, (str, int, float, bool)) for item in value)}


def layers_to_keep(holder: Any, count: int, repeats: int = 1) -> int:
    """KEEP_LAYERS, or the shortest prefix of the layers that shows every per-layer type (`repeats` times
    where the whole stack has it that often)."""
    keep = KEEP_LAYERS
    dense = getattr(holder, "first_k_dense_replace", None)  # DeepSeek: the first k blocks are dense, then MoE
    if isinstance(dense, int) and not isinstance(dense, bool) and 0 < dense < count:
        keep = max(keep, dense + 1)
    for values in per_layer_lists(holder, count, derived=True).values():
        distinct = set(values)
        if len(distinct) > MAX_LAYER_TYPES:  # per-layer indices (`kv_source_layers`), not types
            continue
        wanted = {value: min(repeats, values.count(value)) for value in distinct}
        seen: dict = {}
        for index, value in enumerate(values):
            seen[value] = seen.get(value, 0) + 1
            if all(seen.get(kind, 0) >= times for kind, times in wanted.items()):
                keep = max(keep, index + 1)
                break
    return keep


def truncate_per_layer_lists(holder: Any, before: int, after: int) -> None:
    for name, values in per_layer_lists(holder, before).items():
        assign(holder, name, type(getattr(holder, name))(values[:after]))


def reduce_experts(holder: Any) -> list[tuple[str, int, int]]:
    changes = []
    top_k = max([value for name in TOP_K_FIELDS if isinstance(value := getattr(holder, name, None), int)] or [1])
    keep = max(KEEP_EXPERTS, top_k)
    for name in EXPERT_FIELDS:
        before = getattr(holder, name, None)
        if isinstance(before, int) and not isinstance(before, bool) and before > keep and assign(holder, name, keep):
            changes.append((name, before, keep))
    if changes:
        # Grouped routing (DeepSeek) picks groups of experts: one group holds the few that are left.
        for name in EXPERT_GROUP_FIELDS:
            if isinstance(getattr(holder, name, None), int):
                assign(holder, name, 1)
    return changes


def assign(holder: Any, name: str, value: Any) -> bool:
    try:
        setattr(holder, name, value)
    except Exception:  # noqa: BLE001 - a config that validates its fields: keep its own value
        return False
    return getattr(holder, name, None) == value


def reduction_note(changes: list[tuple[str, int, int]]) -> str:
    """`config reduced for tracing: num_hidden_layers 48 -> 2, num_experts 128 -> 4` ("" for none)."""
    if not changes:
        return ""
    return "config reduced for tracing: " + ", ".join(f"{name} {before} -> {after}" for name, before, after in changes)


def original_depths(changes: list[tuple[str, int, int]]) -> dict[int, int]:
    """Reduced layer count -> the config's own count, for the layer fields only."""
    return {after: before for name, before, after in changes if name.rsplit(".", 1)[-1] in LAYER_FIELDS}


def restore_depths(facts: Any, changes: list[tuple[str, int, int]]) -> None:
    """Give the traced stacks of a reduced model the depth its own config builds (RL104 reads it)."""
    import dataclasses

    depths = original_depths(changes)
    for key, stack in list(facts.stacks.items()):
        if stack.depth in depths:
            facts.stacks[key] = dataclasses.replace(stack, depth=depths[stack.depth])
