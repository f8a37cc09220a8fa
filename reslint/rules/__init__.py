"""Rules: small pure functions of facts. One module per rule; each yields findings.

A rule never parses or traces: a file rule reads `FileFacts` only, so the static and the trace
engine feed the same rules; a project rule (RL301) reads the links the project stage made between
files (`reslint.project.TrainingLink`). Adding a rule: its module here, named
`rlNNN_name.py` with a `check` function (the registry below is derived from the folder), its entry
in `reslint.catalog` and its page `rules/RLNNN.md`.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from reslint.facts import FileFacts
from reslint.filtering import unique
from reslint.findings import Finding
from reslint.settings import Settings

if TYPE_CHECKING:
    from reslint.project import TrainingLink

Rule = Callable[[FileFacts, Settings], Iterable[Finding]]
ProjectRule = Callable[[Iterable["TrainingLink"], Settings], Iterable[Finding]]


def rule_modules() -> dict[str, object]:
    """{code: module} of this package's `rlNNN_name` modules: the registry is the folder."""
    found = {}
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda module: module.name):
        if re.fullmatch(r"rl\d{3}_\w+", module.name):
            found[module.name[:5].upper()] = importlib.import_module(f"{__name__}.{module.name}")
    return found


RULE_MODULES = rule_modules()
# A project rule (`PROJECT_RULE = True` in its module) reads the links between files, not one file's facts.
FACT_RULES: dict[str, Rule] = {code: module.check for code, module in RULE_MODULES.items()
                               if not getattr(module, "PROJECT_RULE", False)}
PROJECT_RULES: dict[str, ProjectRule] = {code: module.check for code, module in RULE_MODULES.items()
                                         if getattr(module, "PROJECT_RULE", False)}


def run_rules(facts: FileFacts, settings: Settings) -> list[Finding]:
    """The enabled file rules' findings about one file, one per place (a block reused by several stacks
    is one place in the source)."""
    return unique(finding for code, rule in FACT_RULES.items() if settings.enabled(code)
                  for finding in rule(facts, settings))


def run_project_rules(links: Iterable[TrainingLink], settings: Settings) -> list[Finding]:
    """The enabled project rules' findings about the links between the files of a run."""
    links = list(links)
    return [finding for code, rule in PROJECT_RULES.items() if settings.enabled(code)
            for finding in rule(links, settings)]
