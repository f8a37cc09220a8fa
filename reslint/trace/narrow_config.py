"""A narrower CPU build of a transformers model too large to rebuild on CPU as it is.

The steps that need real values (export on CPU, draft_export, fx with concrete values) rebuild the model
on CPU, which a model over `capture.DRAFT_EXPORT_MAX_PARAMETERS` cannot afford even with its layers
reduced (FSMT: 207 M parameters in two encoder and three decoder blocks, most of them in 1024-wide
layers and two 42k-token vocabularies). Widths and vocabularies do not decide where the norms sit or what
adds back to the stream, so the same class built from its config with every width divided by a factor
gives the same placement facts. Head counts and layer counts are kept; a vocabulary keeps every special
token id the config names.
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
        for name in names:
            before = getattr(holder, name, None)
            if not isinstance(before, int) or isinstance(before, bool) or before < factor:
                continue
            after = max(before // factor, highest + 1) if "vocab" in name else before // factor
            if after < before and assign(holder, name, after):
                changes.append((prefix + name, before, after))
    return narrowed, changes


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
        except Exception:  # noqa: BLE001 - the checked code rejects the widths: try the next factor
            continue
        if sum(parameter.numel() for parameter in trial.parameters()) <= limit:
            return (lambda narrowed=narrowed: cls(copy.deepcopy(narrowed))), changes
    return None


def narrowing_note(changes: list[tuple[str, int, int]]) -> str:
    shown = ", ".join(f"{name} {before} -> {after}" for name, before, after in changes)
    return f"rebuilt on CPU with narrower widths ({shown}): widths do not change placement"
