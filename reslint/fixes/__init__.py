"""Fixes: libcst rewrites that repair what the rules find (`reslint check --fix`).

One module per fixable rule, each with `SAFE` (the bug's own correction, applied by `--fix`) or
not (it changes the architecture or the training run: `--unsafe-fixes` too), a `TITLE` and
`fix(source, finding) -> str | None`: the whole new file text, or None to refuse (the form is
not recognised exactly). `reslint.fixes.apply` checks every rewrite before it is offered.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

FIXERS = {
    "RL003": "reslint.fixes.rl003_dropout_to_branch",
    "RL101": "reslint.fixes.rl101_pre_ln",
    "RL103": "reslint.fixes.rl103_final_norm",
    "RL104": "reslint.fixes.rl104_pre_ln",
    "RL201": "reslint.fixes.rl201_layernorm",
    "RL301": "reslint.fixes.rl301_warmup",
    "RL401": "reslint.fixes.rl401_biased_variance",
    "RL403": "reslint.fixes.rl403_eps",
    "RL501": "reslint.fixes.rl501_activation",
}


def fixer(code: str) -> ModuleType | None:
    name = FIXERS.get(code)
    return importlib.import_module(name) if name else None


@dataclass(frozen=True)
class Edit:
    """Replace the text from (line, column) up to (end_line, end_column), 1-based, with `content`."""

    line: int
    column: int
    end_line: int
    end_column: int
    content: str

    def to_dict(self) -> dict:
        return {"content": self.content, "location": {"row": self.line, "column": self.column},
                "end_location": {"row": self.end_line, "column": self.end_column}}

    @classmethod
    def from_dict(cls, data: dict) -> Edit:
        return cls(data["location"]["row"], data["location"]["column"], data["end_location"]["row"],
                   data["end_location"]["column"], data["content"])


@dataclass(frozen=True)
class Fix:
    """A checked rewrite that repairs one finding: ruff's `fix` (applicability, message, edits)."""

    applicability: str  # "safe" or "unsafe"
    message: str
    edits: tuple[Edit, ...] = ()

    @property
    def safe(self) -> bool:
        return self.applicability == "safe"

    def to_dict(self) -> dict:
        return {"applicability": self.applicability, "message": self.message,
                "edits": [edit.to_dict() for edit in self.edits]}

    @classmethod
    def from_dict(cls, data: dict) -> Fix:
        return cls(data["applicability"], data["message"], tuple(Edit.from_dict(edit) for edit in data["edits"]))
