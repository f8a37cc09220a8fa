"""A narrower CPU build of a transformers model too large to rebuild on CPU as it is.

The steps that need real values (export on CPU, draft_export, fx with concrete values) rebuild the model
on CPU, which a model over `capture.DRAFT_EXPORT_MAX_PARAMETERS` cannot afford even with its layers
reduced (FSMT: 207 M parameters in two encoder and three decoder blocks, most of them in 1024-wide
layers and two 42k-token vocabularies). Widths and vocabularies do not decide where the norms sit or what
adds back to the stream, so the same class built from its config with every width divided by a factor
gives the same placement facts. Layer counts are kept, and head counts, except where a head would become
narrower than its rotary embedding splits (then there are fewer heads of the same width); a vocabulary keeps
every special token id the config names.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

WIDTH_FIELDS = ("hidden_size", "d_model", "n_embd", "embed_dim", "intermediate_size", "d_ff", "ffn_dim",
                "encoder_ffn_dim", "decoder_ffn_dim", "n_inner", "d_kv", "head_dim", "moe_intermediate_size",
                "shared_expert_intermediate_size")
VOCABULARY_FIELDS = ("vocab_size", "src_vocab_size", "tgt_vocab_size")
FACTORS = (4, 8, 16)  # the first whose build fits under the limit
HEAD_FIELDS = ("num_attention_heads", "num_heads", "n_head", "encoder_attention_heads", "decoder_attention_heads")
KEY_VALUE_HEAD_FIELDS = ("num_key_value_heads", "num_kv_heads")
# A rotary embedding splits each head's width in halves (2-D: quarters, each of even width), so a per-head width
# that was a multiple of 8 stays one: Cohere-Compass's vision heads, 1152 / 16 = 72 wide, would be 18 wide at / 4.
HEAD_WIDTH_MULTIPLE = 8


def narrowed_config(config: Any, factor: int) -> tuple[Any, list[tuple[str, int, int]]]:
    """A copy of `config` (and its sub-configs) with each width divided by `factor`; the changes."""
    from reslint.trace.config_reduction import assign, config_holders

    narrowed, changes = copy.deepcopy(config), []
    for prefix, holder in config_holders(narrowed):
        token_ids = [value for name, value in vars(holder).items()
                     if "token_id" in name or "token_index" in name]
        highest = max([value for value in token_ids if isinstance(value, int) and not isinstance(value, bool)] or [0])
        aliases = getattr(holder, "attribute_map", None) or {}  # `hidden_size` for `d_model`: one field, divided once
        names = dict.fromkeys(aliases.get(name, name) for name in WIDTH_FIELDS + VOCABULARY_FIELDS)
        changes.extend((prefix + name, before, after) for name, before, after in fewer_heads(holder, factor))
        for name in names:
            before = getattr(holder, name, None)
            if not isinstance(before, int) or isinstance(before, bool) or before < factor:
                continue
            after = max(before // factor, highest + 1) if "vocab" in name else before // factor
            if after < before and assign(holder, name, after):
                changes.append((prefix + name, before, after))
    return narrowed, changes


def fewer_heads(holder: Any, factor: int) -> list[tuple[str, int, int]]:
    """Where `hidden_size` / heads (no `head_dim` field) is a multiple of HEAD_WIDTH_MULTIPLE that `factor` would
    break, the head counts divided by `factor` instead (when they all divide), so each head keeps its width."""
    from reslint.trace.config_reduction import assign

    aliases = getattr(holder, "attribute_map", None) or {}  # `num_attention_heads` for `num_heads`: divided once
    heads = list(dict.fromkeys(aliases.get(name, name) for name in HEAD_FIELDS if positive_int(holder, name)))
    if not positive_int(holder, "hidden_size") or not heads or positive_int(holder, "head_dim"):
        return []
    per_head, remainder = divmod(holder.hidden_size, getattr(holder, heads[0]))
    counts = heads + list(dict.fromkeys(aliases.get(name, name) for name in KEY_VALUE_HEAD_FIELDS
                                        if positive_int(holder, name)))
    if remainder or per_head % HEAD_WIDTH_MULTIPLE or (per_head // factor) % HEAD_WIDTH_MULTIPLE == 0 \
            or any(getattr(holder, name) % factor for name in counts):
        return []
    changes = []
    for name in counts:
        before = getattr(holder, name)
        if assign(holder, name, before // factor):
            changes.append((name, before, before // factor))
    return changes


def positive_int(holder: Any, name: str) -> bool:
    value = getattr(holder, name, None)
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def narrowable(model: Any) -> bool:
    """Whether the model has a transformers config with a width to divide (checked before any build)."""
    from reslint.trace.config_reduction import config_holders

    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "to_dict") or not hasattr(config, "model_type"):
        return False
    return any(isinstance(getattr(holder, name, None), int) for _, holder in config_holders(config)
               for name in WIDTH_FIELDS + VOCABULARY_FIELDS)


def narrow_builder(model: Any, limit: int) -> tuple[Callable[[], Any], list] | None:
    """(a CPU build of the model's class at the first factor whose build fits `limit`, the config changes),
    or None for a model without a transformers config or one no factor fits."""
    import torch

    from reslint.trace.meta_init import skipped_meta_init
    from reslint.trace.rotary_sections import fix_rotary_sections

    if not narrowable(model):
        return None
    config, cls = model.config, type(model)
    for factor in FACTORS:
        narrowed, changes = narrowed_config(config, factor)
        if not changes:
            return None
        try:
            with torch.device("meta"), skipped_meta_init():
                trial = cls(narrowed)
                sections = fix_rotary_sections(trial, narrowed)  # narrower heads rotate fewer frequencies
                if sections:
                    trial, changes = cls(narrowed), changes + sections
        except Exception:  # noqa: BLE001 - the checked code rejects the widths: try the next factor
            continue
        if sum(parameter.numel() for parameter in trial.parameters()) <= limit:
            return (lambda narrowed=narrowed: cls(copy.deepcopy(narrowed))), changes
    return None


def narrowing_note(changes: list[tuple[str, int, int]]) -> str:
    shown = ", ".join(f"{name} {before} -> {after}" for name, before, after in changes)
    return f"rebuilt on CPU with narrower widths ({shown}): widths do not change placement"
