"""Findings and model summaries: what every engine produces and every reporter renders."""

from __future__ import annotations

from dataclasses import dataclass, field

from reslint.catalog import RULES, SEVERITY_RANK


@dataclass(frozen=True)
class Finding:
    """One diagnostic at one place. Keys mirror the JSON output of DESIGN.md."""

    code: str
    message: str
    path: str
    line: int
    column: int = 1
    symbol: str = ""
    engine: str = "static"
    severity: str = ""  # empty: the rule's default severity

    @property
    def name(self) -> str:
        return RULES[self.code].name

    @property
    def effective_severity(self) -> str:
        return self.severity or RULES[self.code].severity

    @property
    def help(self) -> str:
        rule = RULES[self.code]
        return f"{rule.fix} (see {rule.doc_url})"

    @property
    def sort_key(self) -> tuple:
        return (self.path, self.line, self.column, self.code, self.message)

    def at_least(self, severity: str) -> bool:
        return SEVERITY_RANK[self.effective_severity] >= SEVERITY_RANK[severity]

    def to_dict(self) -> dict:
        return {
            "code": self.code,
            "name": self.name,
            "severity": self.effective_severity,
            "message": self.message,
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "symbol": self.symbol,
            "engine": self.engine,
            "help": self.help,
        }


@dataclass(frozen=True)
class StackSummary:
    """One stack of residual blocks (an nn.ModuleList / nn.Sequential / nn.TransformerEncoder)."""

    attribute: str  # e.g. "self.blocks"
    block: str  # block class name, or "a, b" when mixed
    depth: int | None  # None when it cannot be resolved statically
    placement: str  # "pre", "post", "sandwich", "parallel-pre", "mixed", "none", "unknown"
    final_norm: bool | None  # None when not applicable (Post-LN) or unknown
    line: int = 0

    def to_dict(self) -> dict:
        return {
            "attribute": self.attribute,
            "block": self.block,
            "depth": self.depth,
            "placement": self.placement,
            "final_norm": self.final_norm,
            "line": self.line,
        }


@dataclass(frozen=True)
class ModelSummary:
    """What reslint understood about one model class: its stacks and the engine used."""

    path: str
    name: str
    line: int
    stacks: tuple[StackSummary, ...] = ()
    placement: str = "none"  # placement of residuals outside any stack
    engine: str = "static"
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict:
        return {
            "path": self.path,
            "name": self.name,
            "line": self.line,
            "placement": self.placement,
            "stacks": [stack.to_dict() for stack in self.stacks],
            "engine": self.engine,
            "notes": list(self.notes),
        }


@dataclass
class FileResult:
    """Everything one file contributed: findings (before suppression) and model summaries."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    models: list[ModelSummary] = field(default_factory=list)


PLACEMENT_LABELS = {
    "pre": "Pre-LN",
    "post": "Post-LN",
    "sandwich": "Sandwich-LN",
    "parallel-pre": "Pre-LN (parallel)",
    "deepnorm": "Post-LN (DeepNorm)",
    "mixed": "mixed Pre-LN/Post-LN",
    "none": "no norm",
    "unknown": "placement unknown",
}


def placement_label(placement: str) -> str:
    return PLACEMENT_LABELS.get(placement, placement)


def stack_summary_line(model: ModelSummary, stack: StackSummary) -> str:
    """The per-stack summary line of the text output, e.g. `TinyLM: 12 blocks, Pre-LN, final norm yes`."""
    depth = "?" if stack.depth is None else str(stack.depth)
    parts = [f"{depth} blocks ({stack.attribute}: {stack.block})", placement_label(stack.placement)]
    if stack.final_norm is not None:
        parts.append("final norm " + ("yes" if stack.final_norm else "no"))
    return f"{model.name}: " + ", ".join(parts)
