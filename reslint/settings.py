"""Resolved settings: the merge of defaults, `[tool.reslint]` and CLI flags."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ModelFactory:
    factory: str  # "FILE_OR_MODULE:EXPR"
    inputs: str | None = None


@dataclass(frozen=True)
class Settings:
    select: frozenset[str] = frozenset()  # empty: every rule
    ignore: frozenset[str] = frozenset()
    fail_on: str = "warning"
    exclude: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, frozenset[str]], ...] = ()  # (glob, codes)
    norm_placement: str = "any"  # "any" | "pre" | "post"
    deep_post_ln_layers: int = 20
    # probe verdicts (RL601/RL602): how many times larger one end of a stack must be than the other
    vanishing_gradient_factor: float = 100.0
    exploding_gradient_factor: float = 100.0
    activation_growth_factor: float = 100.0
    train: tuple[str, ...] = ()
    fixable: frozenset[str] = frozenset()  # codes --fix may repair; empty: every fixable rule
    unfixable: frozenset[str] = frozenset()
    models: tuple[ModelFactory, ...] = ()
    static: bool = False
    jobs: int | None = None
    cache: bool = True
    timeout: float | None = None
    inputs: str | None = None
    verbose: bool = False
    statistics: bool = False  # output option: counts per code instead of one line per finding
    show_models: bool = True  # text output: the per-model summary (the CLI shows it with --show-models)
    quiet: bool = False  # text output: the findings only
    root: str = "."  # project root: where the config was found, or the working directory
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    def enabled(self, code: str) -> bool:
        if self.select and code not in self.select:
            return False
        return code not in self.ignore

    def cache_key(self) -> str:
        """What, besides the file bytes and the version, decides a file's findings."""
        key: tuple = (sorted(self.select), sorted(self.ignore), self.norm_placement,
                      self.deep_post_ln_layers, self.static, self.train)
        if not self.static:  # the trace engine's results also depend on how models are built and fed
            key += (tuple((factory.factory, factory.inputs) for factory in self.models), self.inputs, self.timeout)
        return repr(key)
