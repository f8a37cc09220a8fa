"""Rules: small pure functions of facts. One module per rule; each yields findings.

A rule never parses or traces: a file rule reads `FileFacts` only, so the static and the trace
engine feed the same rules; a project rule (RL301) reads the links the project stage made between
files (`reslint.project.TrainingLink`). Adding a rule: its module here (with `CODE` and `check`),
its entry in `reslint.catalog` and its page `rules/CODE.md`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from reslint.facts import FileFacts
from reslint.filtering import unique
from reslint.findings import Finding
from reslint.rules import (
    rl001_residual_shape_mismatch,
    rl002_residual_broadcast,
    rl003_dropout_on_skip_path,
    rl101_post_ln,
    rl102_mixed_norm_placement,
    rl103_missing_final_norm,
    rl104_deep_post_ln,
    rl201_batchnorm_in_sequence_model,
    rl301_post_ln_without_warmup,
    rl401_norm_unbiased_variance,
    rl402_norm_over_sequence,
    rl403_norm_without_eps,
    rl501_ffn_without_activation,
    rl904_analysis_limit,
)
from reslint.settings import Settings

if TYPE_CHECKING:
    from reslint.project import TrainingLink

Rule = Callable[[FileFacts, Settings], Iterable[Finding]]
ProjectRule = Callable[[Iterable["TrainingLink"], Settings], Iterable[Finding]]

FACT_RULES: dict[str, Rule] = {
    "RL001": rl001_residual_shape_mismatch.check,
    "RL002": rl002_residual_broadcast.check,
    "RL003": rl003_dropout_on_skip_path.check,
    "RL101": rl101_post_ln.check,
    "RL102": rl102_mixed_norm_placement.check,
    "RL103": rl103_missing_final_norm.check,
    "RL104": rl104_deep_post_ln.check,
    "RL201": rl201_batchnorm_in_sequence_model.check,
    "RL401": rl401_norm_unbiased_variance.check,
    "RL402": rl402_norm_over_sequence.check,
    "RL403": rl403_norm_without_eps.check,
    "RL501": rl501_ffn_without_activation.check,
    "RL904": rl904_analysis_limit.check,
}
PROJECT_RULES: dict[str, ProjectRule] = {
    "RL301": rl301_post_ln_without_warmup.check,
}


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
