"""Findings and model summaries: what every engine produces and every reporter renders."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from reslint.catalog import RULES, SEVERITY_RANK
from reslint.project_facts import FileLinks

if TYPE_CHECKING:
    from reslint.fixes import Fix


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
    severity: str = ""  # given empty: the rule's default severity, filled in at construction
    fix: Fix | None = field(default=None, compare=False)  # the checked fix, set by reslint.fixes.apply

    def __post_init__(self) -> None:
        # The API's readers filter on `severity`: it is always the severity the finding is reported with.
        if not self.severity:
            object.__setattr__(self, "severity", RULES[self.code].severity)

    @property
    def name(self) -> str:
        return RULES[self.code].name

    @property
    def effective_severity(self) -> str:
        return self.severity

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
            "fix": self.fix.to_dict() if self.fix is not None else None,
        }

    @classmethod
    def from_dict(cls, data: dict) -> Finding:
        """Inverse of to_dict (derived keys such as name and help are ignored)."""
        code = data["code"]
        return cls(
            code=code,
            message=data["message"],
            path=data["path"],
            line=int(data["line"]),
            column=int(data.get("column", 1)),
            symbol=data.get("symbol", ""),
            engine=data.get("engine", "static"),
            severity=data.get("severity", ""),
        )


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

    @classmethod
    def from_dict(cls, data: dict) -> StackSummary:
        return cls(
            attribute=data["attribute"],
            block=data["block"],
            depth=data.get("depth"),
            placement=data["placement"],
            final_norm=data.get("final_norm"),
            line=int(data.get("line", 0)),
        )


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
    warmup: str = ""  # Post-LN models: whether the code training them warms up (set when linking the run)
    built_from: str = ""  # the construction site the trace engine built the model from ("train.py:42")

    def to_dict(self) -> dict:
        return {
            "path": self.path,
            "name": self.name,
            "line": self.line,
            "placement": self.placement,
            "stacks": [stack.to_dict() for stack in self.stacks],
            "engine": self.engine,
            "notes": list(self.notes),
            "warmup": self.warmup or None,
            "built_from": self.built_from or None,
        }

    @classmethod
    def from_dict(cls, data: dict) -> ModelSummary:
        return cls(
            path=data["path"],
            name=data["name"],
            line=int(data["line"]),
            stacks=tuple(StackSummary.from_dict(stack) for stack in data.get("stacks", ())),
            placement=data.get("placement", "none"),
            engine=data.get("engine", "static"),
            notes=tuple(data.get("notes", ())),
            warmup=data.get("warmup") or "",
            built_from=data.get("built_from") or "",
        )


@dataclass(frozen=True)
class TraceOutcome:
    """Whether the full check traced one model it tried, and why not; `name` "" is a file that could not
    be imported, whose models are unknown."""

    path: str
    name: str
    line: int
    traced: bool
    reason: str = ""  # why the static facts stand for it

    def to_dict(self) -> dict:
        return {"path": self.path, "name": self.name, "line": self.line, "traced": self.traced,
                "reason": self.reason or None}

    @classmethod
    def from_dict(cls, data: dict) -> TraceOutcome:
        return cls(path=data["path"], name=data["name"], line=int(data["line"]), traced=bool(data["traced"]),
                   reason=data.get("reason") or "")


@dataclass
class FileResult:
    """Everything one file contributed: findings (before suppression) and model summaries."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    models: list[ModelSummary] = field(default_factory=list)
    links: FileLinks = field(default_factory=FileLinks)
    # False when the result may differ on the next run with the same inputs (a trace timed out)
    cacheable: bool = field(default=True, compare=False)
    # The trace engine imported the file: the result also depends on the project files it imports
    imported: bool = field(default=False, compare=False)
    # Other files the static engine read (imported config modules): the result depends on them too
    reads: list[str] = field(default_factory=list, compare=False)
    skipped: bool = False  # the pre-filter found no model or training code: nothing was analysed
    traces: list[TraceOutcome] = field(default_factory=list)  # the full check: each model it tried to trace
    # A static check: the libcst module the engine parsed, for the fixers in the same process; never stored
    module: object = field(default=None, compare=False, repr=False)
    # ... and CPython's AST of the same text, which places the fixers' statements (None: they parse it)
    syntax_tree: object = field(default=None, compare=False, repr=False)
    # A static check: its fixes, checked beside the analysis (`fixes.prepared.FileFixes.to_dict`), cached with it
    prepared_fixes: dict | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict:
        return {
            "path": self.path,
            "findings": [finding.to_dict() for finding in self.findings],
            "models": [model.to_dict() for model in self.models],
            "links": self.links.to_dict(),
            "skipped": self.skipped,
            "traces": [trace.to_dict() for trace in self.traces],
        } | ({"fixes": self.prepared_fixes} if self.prepared_fixes is not None else {})

    @classmethod
    def from_dict(cls, data: dict) -> FileResult:
        return cls(
            path=data["path"],
            findings=[Finding.from_dict(finding) for finding in data.get("findings", ())],
            models=[ModelSummary.from_dict(model) for model in data.get("models", ())],
            links=FileLinks.from_dict(data.get("links", {})),
            skipped=bool(data.get("skipped", False)),
            traces=[TraceOutcome.from_dict(trace) for trace in data.get("traces", ())],
            prepared_fixes=data.get("fixes"),
        )


PLACEMENT_LABELS = {
    "pre": "Pre-LN",
    "post": "Post-LN",
    "sandwich": "Sandwich-LN",
    "parallel-pre": "Pre-LN (parallel)",
    "deepnorm": "Post-LN (DeepNorm)",
    "mixed": "mixed Pre-LN/Post-LN",
    "branch-post": "Res-Post-LN (norm on the branch output)",
    "configurable": "Pre-LN or Post-LN (configurable)",
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
