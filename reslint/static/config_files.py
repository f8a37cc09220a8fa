"""Training configs read as data, never run: JSON, YAML (block mappings, scalars, simple lists) and
Hydra's `config_path`/`config_name` with its `defaults` list.

Both engines read them: the static engine for a schedule's `warmup_steps` (RL301), model discovery
for the arguments a training script passes to a model's constructor. PyYAML is not a dependency:
the subset configs use is read here, and anything beyond it (anchors, multi-line strings) is left
unknown rather than guessed.
"""

from __future__ import annotations

import json
import os
import re

from reslint.file_gate import MAX_CONFIG_BYTES, read_project_file
from reslint.static.literals import literal_eval

CONFIG_SUFFIXES = (".yaml", ".yml", ".json")
BOOLEANS = {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}
NUMBER = re.compile(r"[-+]?(\d[\d_]*\.?\d*([eE][-+]?\d+)?|\.\d+([eE][-+]?\d+)?)")


def read_config(path: str, root: str | None) -> dict | None:
    """The mapping a JSON or YAML config holds (None: unreadable, outside `root`, or not a mapping)."""
    try:
        text = read_project_file(path, root, MAX_CONFIG_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if path.endswith(".json"):
        try:
            data = json.loads(text)
        except ValueError:
            return None
    else:
        data = parse_yaml(text)
    return data if isinstance(data, dict) else None


def find_config(name: str, script: str, root: str) -> str | None:
    """A config path as a script spells it: next to the script, else from the project root."""
    if not name.endswith(CONFIG_SUFFIXES):
        return None
    for base in (os.path.dirname(os.path.abspath(script)), os.path.abspath(root)):
        candidate = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(candidate):
            return candidate
    return None


def hydra_config(config_path: str, config_name: str, script: str, root: str) -> tuple[dict | None, list[str]]:
    """Hydra's composed config for `@hydra.main(config_path=..., config_name=...)`: the primary file
    with the groups of its `defaults` list merged in; (None, []) when the file is not found.
    Files outside `root` (the script's project) are not read."""
    directory = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(script)), config_path))
    primary = os.path.join(directory, config_name if config_name.endswith(CONFIG_SUFFIXES) else config_name + ".yaml")
    data = read_config(primary, root) if os.path.isfile(primary) else None
    if data is None:
        return None, []
    reads = [primary]
    composed = {key: value for key, value in data.items() if key != "defaults"}
    for entry in data.get("defaults") or ():
        if not isinstance(entry, dict) or len(entry) != 1:
            continue
        group, option = next(iter(entry.items()))
        group_file = os.path.join(directory, str(group), f"{option}.yaml")
        group_data = read_config(group_file, root) if os.path.isfile(group_file) else None
        if group_data is not None:
            reads.append(group_file)
            composed[str(group)] = {**group_data, **(composed.get(str(group)) or {})}
    return composed, reads


# ----- YAML subset -----------------------------------------------------------------------------


def parse_yaml(text: str) -> dict | None:
    """Block mappings of scalars, flow lists and `- item` lists; None where the text is not such a mapping."""
    root: dict = {}
    stack: list[tuple[int, dict]] = [(-1, root)]
    open_key: tuple[dict, str, int] | None = None  # a `key:` with no value yet: a mapping or a list follows
    for raw in text.splitlines():
        line = strip_comment(raw).rstrip()
        content = line.strip()
        if not content or content in ("---", "...") or content.startswith("%"):
            continue
        indent = len(line) - len(line.lstrip(" "))
        if content.startswith("- ") or content == "-":
            if open_key is None or indent < open_key[2]:
                return None
            parent, key, _ = open_key
            if not isinstance(parent[key], list):
                if parent[key]:
                    return None
                parent[key] = []
            item = content[1:].strip()
            name, sep, value = item.partition(":")
            if sep and value.strip() and not item.startswith(("'", '"', "[", "{")):
                parent[key].append({name.strip().strip("'\""): scalar(value.strip())})
            else:
                parent[key].append(scalar(item))
            continue
        key, sep, value = content.partition(":")
        if not sep or (value and not value.startswith(" ")):
            return None
        while indent <= stack[-1][0]:
            stack.pop()
        parent = stack[-1][1]
        key = key.strip().strip("'\"")
        value = value.strip()
        if value in ("", "|", ">"):
            if value:
                return None  # block scalars: beyond this reader
            parent[key] = {}
            stack.append((indent, parent[key]))
            open_key = (parent, key, indent)
        else:
            parent[key] = scalar(value)
            open_key = None
    return root


def strip_comment(line: str) -> str:
    quote = ""
    for index, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1] in " \t"):
            return line[:index]
    return line


def scalar(text: str):
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    lowered = text.lower()
    if lowered in BOOLEANS:
        return BOOLEANS[lowered]
    if lowered in ("null", "~", "none"):
        return None
    if NUMBER.fullmatch(text):
        cleaned = text.replace("_", "")
        return int(cleaned) if re.fullmatch(r"[-+]?\d+", cleaned) else float(cleaned)
    if text.startswith(("[", "{")):
        try:
            return literal_eval(re.sub(r"\b(true|false|null)\b",
                                       lambda m: {"true": "True", "false": "False", "null": "None"}[m.group()],
                                       text))
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return text
    return text
