"""Config classes a model file imports from a sibling module (`from .configuration_x import XConfig`):
read, never imported, so that `config.pre_norm` and `config.num_hidden_layers` get their defaults.

Only relative imports of names ending in `Config` are followed, one level: the config module's own
classes are enough for a field's default. The files read are recorded, so that a cached result is
dropped when one of them changes.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import TYPE_CHECKING

import libcst as cst

from reslint.file_gate import read_project_file

if TYPE_CHECKING:
    from reslint.static.index import FileIndex

MAX_CONFIG_BYTES = 1_000_000


def imported_config_indexes(index: FileIndex, source_path: str) -> list[tuple[str, FileIndex]]:
    """(absolute path, index) of each module the file imports a `*Config` class from, relatively."""
    directory = os.path.dirname(os.path.abspath(source_path))
    found: dict[str, FileIndex] = {}
    for local, dotted in index.aliases.items():
        if not local.endswith("Config") or not dotted.startswith("."):
            continue
        module = dotted.rsplit(".", 1)[0]
        level = len(module) - len(module.lstrip("."))
        parts = [part for part in module[level:].split(".") if part]
        if not parts:
            continue
        base = directory
        for _ in range(level - 1):
            base = os.path.dirname(base)
        path = os.path.join(base, *parts) + ".py"
        if path in found or not os.path.isfile(path):
            continue
        config_index = _config_index(type(index), path, *_signature(path))
        if config_index is not None:
            found[path] = config_index
    return sorted(found.items())


def _signature(path: str) -> tuple[int, int]:
    stat = os.stat(path)
    return stat.st_size, stat.st_mtime_ns


@lru_cache(maxsize=128)
def _config_index(index_class: type[FileIndex], path: str, size: int, mtime: int) -> FileIndex | None:
    """`index_class`: FileIndex, passed in because FileIndex reads config modules through this one."""
    if size > MAX_CONFIG_BYTES:
        return None
    try:
        return index_class(cst.parse_module(read_project_file(path, None, MAX_CONFIG_BYTES).decode("utf-8")))
    except (OSError, UnicodeDecodeError, cst.ParserSyntaxError, RecursionError, ValueError):
        return None
