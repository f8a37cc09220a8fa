"""A field a transformers model reads that its config class never declares.

Some heads read a field only a checkpoint's config.json has (BridgeTower's contrastive head:
`config.contrastive_hidden_size`, `config.logit_scale_init_value`), so the class's default config
cannot build them: the AttributeError names the config class and the field. The field gets the value
of the field of the same config it is a variant of (`contrastive_hidden_size` -> `hidden_size`: the
longest underscore suffix that is a number field), else the default the library's other config classes
declare for a field of that name (`logit_scale_init_value: float = 2.6592` in the CLIP family), read
from their source, never imported.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from typing import Any

from reslint.static.literals import literal_eval

MISSING = re.compile(r"^'(\w+)' object has no attribute '(\w+)'$")
MAX_FILLS = 8  # fields filled one build at a time


def fill_missing_field(config: Any, error: BaseException) -> tuple[str, None, Any] | None:
    """Set the field `error` says a config of `config` lacks; (field, None, value), or None when `error`
    is not that or no value is known."""
    from reslint.trace.config_reduction import assign, config_holders

    match = MISSING.match(str(error)) if isinstance(error, AttributeError) else None
    if match is None:
        return None
    owner, name = match.groups()
    for prefix, holder in config_holders(config):
        if type(holder).__name__ != owner or hasattr(holder, name):
            continue
        value = sibling_value(holder, name)
        if value is None:
            value = library_default(name, type(holder).__module__)
        if value is not None and assign(holder, name, value):
            return prefix + name, None, value
    return None


def sibling_value(holder: Any, name: str) -> int | float | None:
    """The value of the longest underscore suffix of `name` that is a number field of `holder`."""
    parts = name.split("_")
    for start in range(1, len(parts)):
        value = getattr(holder, "_".join(parts[start:]), None)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
    return None


@functools.lru_cache(maxsize=None)
def library_default(name: str, module: str) -> Any:
    """The literal default most config classes of the library (the package of `module`'s `models/`) give `name`."""
    import importlib.util
    import pathlib

    head = module.split(".models.")[0] if ".models." in module else module.split(".")[0]
    spec = importlib.util.find_spec(head)
    if spec is None or not spec.submodule_search_locations:
        return None
    counts: Counter = Counter()
    pattern = re.compile(rf"^\s+{re.escape(name)}\s*:[^=\n]*=\s*([^\n#]+)", re.MULTILINE)
    models = pathlib.Path(next(iter(spec.submodule_search_locations)), "models")
    for path in sorted(models.glob("*/configuration_*.py")):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if name not in text:
            continue
        for found in pattern.findall(text):
            try:
                value = literal_eval(found.strip())
            except (ValueError, SyntaxError):
                continue  # `1 / 0.07`: not a literal
            if isinstance(value, (int, float, str)) and not isinstance(value, bool):
                counts[repr(value)] += 1
    if not counts:
        return None
    return literal_eval(counts.most_common(1)[0][0])
