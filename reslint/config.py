"""Find, parse and validate `[tool.reslint]`, and merge it with the CLI flags into Settings.

Validation is strict on purpose: an unknown key or rule code in a linter's config is almost
always a typo that would otherwise silently turn a check off.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from reslint.catalog import SEVERITIES, expand_codes
from reslint.discovery import display_path
from reslint.errors import ReslintError, UsageError
from reslint.file_gate import MAX_CONFIG_BYTES, read_project_file
from reslint.globs import GlobError, compile_glob
from reslint.settings import ModelFactory, Settings

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.9/3.10 only
    import tomli as tomllib

PYPROJECT = "pyproject.toml"
NORM_PLACEMENTS = ("any", "pre", "post")
MODEL_KEYS = ("factory", "inputs")
KNOWN_KEYS = (
    "select", "ignore", "fail-on", "exclude", "per-file-ignores", "norm-placement",
    "deep-post-ln-layers", "train", "models", "vanishing-gradient-factor", "exploding-gradient-factor",
    "activation-growth-factor", "fixable", "unfixable",
)
PROBE_FACTORS = ("vanishing-gradient-factor", "exploding-gradient-factor", "activation-growth-factor")


class ConfigError(ReslintError):
    """A config file that cannot be used; the message is one line naming the file and the key."""


@dataclass(frozen=True)
class Overrides:
    """What the command line says; None means "not given", so the config (or default) applies."""

    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] | None = None
    fail_on: str | None = None
    static: bool = False
    jobs: int | None = None
    cache: bool = True
    verbose: bool = False
    statistics: bool = False
    models: tuple[str, ...] | None = None  # --model SPEC (repeatable): replaces the config's factories
    inputs: str | None = None  # --inputs SPEC: wins over the config's per-factory inputs
    timeout: float | None = None
    # ruff's spelling: extend the config's lists instead of replacing them
    extend_select: tuple[str, ...] | None = None
    extend_ignore: tuple[str, ...] | None = None
    exclude: tuple[str, ...] | None = None  # replaces the config's exclude
    extend_exclude: tuple[str, ...] | None = None


def find_config(start: str | os.PathLike) -> Path | None:
    """The nearest pyproject.toml with a [tool.reslint] table, walking up from `start`."""
    directory = Path(os.path.abspath(start))
    for candidate_dir in (directory, *directory.parents):
        candidate = candidate_dir / PYPROJECT
        if os.path.isfile(candidate):  # False, not PermissionError, for a directory we may not enter
            tool = read_toml(candidate, directory).get("tool")
            if isinstance(tool, dict) and "reslint" in tool:
                return candidate
    return None


def read_toml(path: Path, cwd: str | os.PathLike) -> dict:
    shown = display_path(path, cwd)
    try:
        return tomllib.loads(read_project_file(path, None, MAX_CONFIG_BYTES).decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{shown}: invalid TOML: {error}") from None
    except OSError as error:
        raise ConfigError(f"{shown}: cannot read config: {error.strerror or error}") from None


def reslint_table(path: Path, cwd: str | os.PathLike) -> tuple[dict, str]:
    """The reslint table of a config file and how to name it in messages.

    A pyproject.toml (or any file with a [tool.reslint] table) keeps its settings there; any
    other TOML file (e.g. reslint.toml) holds them at the top level.
    """
    data = read_toml(path, cwd)
    tool = data.get("tool")
    if path.name == PYPROJECT or (isinstance(tool, dict) and "reslint" in tool):
        table = tool.get("reslint") if isinstance(tool, dict) else None
        if table is None:
            raise ConfigError(f"{display_path(path, cwd)}: no [tool.reslint] table")
        if not isinstance(table, dict):
            raise ConfigError(f"{display_path(path, cwd)}: tool.reslint must be a table")
        return table, "tool.reslint"
    return data, ""


def load_settings(cwd: str | os.PathLike, config_file: str | None, overrides: Overrides) -> Settings:
    """Settings from the given or nearest config file, then the CLI flags on top."""
    cwd = os.path.abspath(cwd)
    if config_file is not None:
        path = Path(cwd, config_file)
        if not os.path.isfile(path):
            raise ConfigError(f"config file not found: {config_file}")
    else:
        path = find_config(cwd)
    if path is None:
        settings = Settings(root=cwd)
    else:
        table, prefix = reslint_table(path, cwd)
        settings = settings_from_table(table, ConfigContext(display_path(path, cwd), prefix))
        # abspath, not resolve: file paths are compared to the root without resolving symlinks
        settings = replace(settings, root=os.path.abspath(path.parent))
    return apply_overrides(settings, overrides)


def apply_overrides(settings: Settings, overrides: Overrides) -> Settings:
    changes: dict[str, Any] = {
        "static": overrides.static,
        "jobs": overrides.jobs,
        "cache": overrides.cache,
        "verbose": overrides.verbose,
        "statistics": overrides.statistics,
    }
    if overrides.select is not None:
        changes["select"] = frozenset(expand_cli_codes("select", overrides.select))
    if overrides.ignore is not None:
        changes["ignore"] = frozenset(expand_cli_codes("ignore", overrides.ignore))
    if overrides.extend_select is not None:
        # an empty select means every rule, which extending cannot narrow
        selected = changes.get("select", settings.select)
        extra = expand_cli_codes("extend_select", overrides.extend_select)
        changes["select"] = frozenset(selected | extra) if selected else selected
    if overrides.extend_ignore is not None:
        changes["ignore"] = frozenset(changes.get("ignore", settings.ignore) | expand_cli_codes("extend_ignore", overrides.extend_ignore))
    if overrides.exclude is not None:
        changes["exclude"] = overrides.exclude
    if overrides.extend_exclude is not None:
        changes["exclude"] = (*changes.get("exclude", settings.exclude), *overrides.extend_exclude)
    if overrides.fail_on is not None:
        changes["fail_on"] = overrides.fail_on.lower()
    if overrides.models is not None:
        changes["models"] = tuple(ModelFactory(factory=spec) for spec in overrides.models)
    if overrides.inputs is not None:
        changes["inputs"] = overrides.inputs
        changes["models"] = tuple(replace(factory, inputs=None) for factory in changes.get("models", settings.models))
    if overrides.timeout is not None:
        changes["timeout"] = overrides.timeout
    return replace(settings, **changes)


def expand_cli_codes(option: str, codes: tuple[str, ...]) -> set[str]:
    """The codes of an option (`select`, as the API spells it); selecting none is a usage error, not "every rule"."""
    if not codes and option in ("select", "extend_select"):
        raise UsageError("no rule code given (expected codes or prefixes, e.g. RL1,RL201)", option=option)
    try:
        return expand_codes(codes)
    except ValueError as error:
        raise UsageError(str(error), option=option) from None


def split_codes(value: str) -> tuple[str, ...]:
    """`RL101,RL2 RL3` → ("RL101", "RL2", "RL3")."""
    return tuple(part for part in value.replace(",", " ").split() if part)


@dataclass(frozen=True)
class ConfigContext:
    file: str
    prefix: str  # "tool.reslint" for a pyproject.toml, "" for top-level keys

    def key(self, *parts: str) -> str:
        return ".".join(part for part in (self.prefix, *parts) if part)

    def error(self, key: str, problem: str) -> ConfigError:
        return ConfigError(f"{self.file}: {key}: {problem}")


def settings_from_table(table: dict, context: ConfigContext) -> Settings:
    for key in table:
        if key not in KNOWN_KEYS:
            raise context.error(context.key(quote_key(key)), "unknown key" + suggestion(key, KNOWN_KEYS))
    values: dict[str, Any] = {}
    if "select" in table:
        values["select"] = frozenset(codes_value(table["select"], context, "select"))
    if "ignore" in table:
        values["ignore"] = frozenset(codes_value(table["ignore"], context, "ignore"))
    if "fail-on" in table:
        values["fail_on"] = choice_value(table["fail-on"], SEVERITIES, context, "fail-on")
    if "exclude" in table:
        values["exclude"] = tuple(glob_list(table["exclude"], context, "exclude"))
    if "per-file-ignores" in table:
        values["per_file_ignores"] = per_file_ignores(table["per-file-ignores"], context)
    if "norm-placement" in table:
        values["norm_placement"] = choice_value(table["norm-placement"], NORM_PLACEMENTS, context, "norm-placement")
    if "deep-post-ln-layers" in table:
        values["deep_post_ln_layers"] = positive_int(table["deep-post-ln-layers"], context, "deep-post-ln-layers")
    if "train" in table:
        values["train"] = tuple(glob_list(table["train"], context, "train"))
    for key in ("fixable", "unfixable"):
        if key in table:
            values[key] = frozenset(codes_value(table[key], context, key))
    if "models" in table:
        values["models"] = model_factories(table["models"], context)
    for key in PROBE_FACTORS:
        if key in table:
            values[key.replace("-", "_")] = factor_value(table[key], context, key)
    return Settings(**values)


def suggestion(key: str, known: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(key.replace("_", "-"), known, n=1)
    return f" (did you mean '{close[0]}'?)" if close else f" (known keys: {', '.join(known)})"


def type_name(value: Any) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a float", str: "a string", list: "an array", dict: "a table"}
    return names.get(type(value), type(value).__name__)


def string_list(value: Any, context: ConfigContext, *key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise context.error(context.key(*key), f"expected an array of strings, got {type_name(value)}")
    return value


def glob_list(value: Any, context: ConfigContext, *key: str) -> list[str]:
    return [valid_glob(glob, context, *key) for glob in string_list(value, context, *key)]


def valid_glob(glob: str, context: ConfigContext, *key: str) -> str:
    try:
        compile_glob(glob)
    except GlobError as error:
        raise context.error(context.key(*key), str(error)) from None
    return glob


def codes_value(value: Any, context: ConfigContext, *key: str) -> set[str]:
    try:
        return expand_codes(string_list(value, context, *key))
    except ValueError as error:
        raise context.error(context.key(*key), str(error)) from None


def choice_value(value: Any, choices: tuple[str, ...], context: ConfigContext, key: str) -> str:
    if not isinstance(value, str) or value.lower() not in choices:
        shown = repr(value) if isinstance(value, str) else type_name(value)
        raise context.error(context.key(key), f"expected one of {', '.join(choices)}, got {shown}")
    return value.lower()


def positive_int(value: Any, context: ConfigContext, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise context.error(context.key(key), f"expected an integer >= 1, got {type_name(value)}")
    if value < 1:
        raise context.error(context.key(key), f"expected an integer >= 1, got {value}")
    return value


def factor_value(value: Any, context: ConfigContext, key: str) -> float:
    """A ratio threshold of the probe: a number greater than 1."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise context.error(context.key(key), f"expected a number greater than 1, got {type_name(value)}")
    if not math.isfinite(value) or value <= 1:
        raise context.error(context.key(key), f"expected a number greater than 1, got {value}")
    return float(value)


def per_file_ignores(value: Any, context: ConfigContext) -> tuple[tuple[str, frozenset[str]], ...]:
    if not isinstance(value, dict):
        raise context.error(context.key("per-file-ignores"), f"expected a table of glob = [codes], got {type_name(value)}")
    return tuple(
        (valid_glob(glob, context, "per-file-ignores", quote_key(glob)),
         frozenset(codes_value(codes, context, "per-file-ignores", quote_key(glob))))
        for glob, codes in value.items()
    )


def quote_key(key: str) -> str:
    """A key as TOML writes it: bare when it can be, else a quoted string with escapes (so one line)."""
    if key and key.replace("-", "").replace("_", "").isalnum() and key.isascii():
        return key
    return json.dumps(key, ensure_ascii=False)


def model_factories(value: Any, context: ConfigContext) -> tuple[ModelFactory, ...]:
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise context.error(context.key("models"), f"expected an array of tables ([[{context.key('models')}]]), got {type_name(value)}")
    factories = []
    for index, entry in enumerate(value):
        where = f"models[{index}]"
        for key in entry:
            if key not in MODEL_KEYS:
                raise context.error(context.key(where, quote_key(key)), "unknown key" + suggestion(key, MODEL_KEYS))
        factory = entry.get("factory")
        if factory is None:
            raise context.error(context.key(where), "missing required key 'factory'")
        if not isinstance(factory, str) or not factory.strip():
            raise context.error(context.key(where, "factory"), f"expected a non-empty string FILE_OR_MODULE:EXPR, got {type_name(factory)}")
        from reslint.trace.models import expression_problem, split_factory

        problem = expression_problem(split_factory(factory)[1])
        if problem:
            raise context.error(context.key(where, "factory"), f"{factory!r}: {problem}")
        inputs = entry.get("inputs")
        if inputs is not None and not isinstance(inputs, str):
            raise context.error(context.key(where, "inputs"), f"expected a string, got {type_name(inputs)}")
        factories.append(ModelFactory(factory=factory, inputs=inputs))
    return tuple(factories)
