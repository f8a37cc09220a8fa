"""Rotary parameters a default config leaves out, where a checkpoint's config.json gives them.

transformers configs keep their rotary parameters in `rope_parameters`, one dict per layer type where
the config declares `layer_types` (`{"full_attention": {"rope_type": "default", "rope_theta": ...}}`),
and the library's standardization gives a config without any the class's `default_theta`. A config
class that overrides that conversion to keep only what a checkpoint gives (Cohere-Compass's text config:
`None` becomes `{}`, and the library warns "no RoPE parameters were found") cannot build its rotary
embedding, which reads `rope_parameters[layer_type]`: the KeyError names one of the config's own layer
types. That entry gets the library's default: the global rope type and theta where the config has them,
else the default rope type and the class's `default_theta`.
"""

from __future__ import annotations

from typing import Any

DEFAULT_THETA = 10_000.0  # transformers' RotaryEmbeddingConfigMixin.default_theta


def fill_rope_entry(config: Any, error: BaseException) -> tuple[str, None, dict] | None:
    """Add the layer type `error` (a KeyError) says a config of `config` has no rotary parameters for;
    (field, None, entry), or None when `error` is not that."""
    from reslint.trace.config_reduction import config_holders

    if not isinstance(error, KeyError) or len(error.args) != 1 or not isinstance(error.args[0], str):
        return None
    layer_type = error.args[0]
    for prefix, holder in config_holders(config):
        parameters = getattr(holder, "rope_parameters", None)
        layer_types = getattr(holder, "layer_types", None)
        if not isinstance(parameters, dict) or layer_type in parameters \
                or not isinstance(layer_types, (list, tuple)) or layer_type not in layer_types:
            continue
        entry = {
            "rope_type": parameters.get("rope_type", "default"),
            "rope_theta": parameters.get("rope_theta", getattr(holder, "default_theta", DEFAULT_THETA)),
        }
        parameters[layer_type] = entry
        return f"{prefix}rope_parameters.{layer_type}", None, entry
    return None
