"""Multimodal rotary sections that do not partition the rotary frequencies of a default config.

A multimodal rotary embedding (transformers' `mrope_section`: Qwen2-VL, GLM-4V and ~20 others) splits its
`inv_freq` frequencies into one section per position axis (time, height, width), so the sections sum to
the number of frequencies. Some modeling files hard-code the sections of their checkpoints
(`rope_parameters.get("mrope_section", [8, 12, 12])`, 32 frequencies: GLM-4.1V rotates half of each
128-wide head) while the default config rotates whole heads (64 frequencies): the forward's
`split` fails on any input. The sections are re-scaled to the frequencies the model has (each in the
same proportion), written to the config the embedding reads, and the model built again; the summary
notes the change. A model whose sections sum right is untouched.
"""

from __future__ import annotations

from typing import Any


def rescaled_sections(sections: list[int], total: int) -> list[int]:
    """`sections` scaled to sum to `total`, each in proportion (the last takes what rounding leaves)."""
    whole = sum(sections)
    scaled = [section * total // whole for section in sections[:-1]]
    return [*scaled, total - sum(scaled)]


def fix_rotary_sections(model: Any, config: Any) -> list[tuple[str, Any, Any]]:
    """Re-scale, in the configs of `config` that `model`'s rotary embeddings read, the sections that do not
    sum to their embedding's frequencies; (field, before, after) for each, [] when none is off."""
    from reslint.trace.config_reduction import config_holders

    prefixes = {id(holder): prefix for prefix, holder in config_holders(config)}
    changes, seen = [], set()
    for module in model.modules():
        sections, frequencies = getattr(module, "mrope_section", None), getattr(module, "inv_freq", None)
        owner = getattr(module, "config", None)
        parameters = getattr(owner, "rope_parameters", None)
        if not (isinstance(sections, list) and sections and all(type(item) is int and item > 0 for item in sections)):
            continue
        if getattr(frequencies, "ndim", 0) != 1 or id(owner) not in prefixes or id(owner) in seen \
                or not isinstance(parameters, dict):
            continue
        total = int(frequencies.shape[0])
        if sum(sections) == total or total < len(sections):
            continue
        after = rescaled_sections(sections, total)
        parameters["mrope_section"] = after
        seen.add(id(owner))
        changes.append((prefixes[id(owner)] + "rope_parameters.mrope_section", sections, after))
    return changes
