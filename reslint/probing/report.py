"""What a probe measured: per-parameter and per-block statistics and the findings drawn from them.

Plain data, no torch: the text and JSON reporters, the plot and the verdicts read only this.
Non-finite numbers are kept as floats here (nan, inf); JSON writes them as the strings "nan",
"inf" and "-inf", and a gradient that does not exist as null.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from reslint.findings import Finding
from reslint.version import __version__


@dataclass
class ParameterStats:
    name: str  # e.g. "blocks.0.attn.qkv.weight"
    shape: tuple[int, ...]
    grad_norm: float | None  # None: no gradient (.grad is None after backward)
    param_norm: float
    group: str  # the block or module it belongs to in the depth order, e.g. "blocks.0", "head"
    trainable: bool = True  # requires_grad

    @property
    def ratio(self) -> float | None:
        """grad norm / parameter norm: the relative size of one SGD step at learning rate 1."""
        if self.grad_norm is None:
            return None
        if self.param_norm == 0:
            return math.inf if self.grad_norm else 0.0
        return self.grad_norm / self.param_norm

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "shape": list(self.shape),
            "grad_norm": json_number(self.grad_norm),
            "param_norm": json_number(self.param_norm),
            "ratio": json_number(self.ratio),
            "group": self.group,
            "trainable": self.trainable,
        }

    @classmethod
    def from_dict(cls, data: dict) -> ParameterStats:
        return cls(name=data["name"], shape=tuple(data["shape"]), grad_norm=from_json_number(data["grad_norm"]),
                   param_norm=from_json_number(data["param_norm"]), group=data["group"],
                   trainable=bool(data.get("trainable", True)))


@dataclass
class BlockStats:
    """One group of the depth order: a block of a stack, or a module outside every stack."""

    name: str  # module path, "blocks.3"; "(model)" for parameters of the model itself
    stack: str  # the stack's module path ("blocks"), "" for a module outside every stack
    index: int  # position in the depth order (forward order of first calls)
    parameters: list[str] = field(default_factory=list)
    grad_norm: float | None = None  # sqrt of the sum of its parameters' squared gradient norms
    activation_norm: float | None = None  # norm of the activation leaving it (last call of the pass)
    activation_rms: float | None = None
    called: bool = True
    ratio_to_last: float | None = None  # grad norm / the last block of its stack's (None outside stacks)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "stack": self.stack,
            "index": self.index,
            "parameters": list(self.parameters),
            "grad_norm": json_number(self.grad_norm),
            "ratio_to_last": json_number(self.ratio_to_last),
            "activation_norm": json_number(self.activation_norm),
            "activation_rms": json_number(self.activation_rms),
            "called": self.called,
        }

    @classmethod
    def from_dict(cls, data: dict) -> BlockStats:
        return cls(name=data["name"], stack=data["stack"], index=int(data["index"]), parameters=list(data["parameters"]),
                   grad_norm=from_json_number(data["grad_norm"]), activation_norm=from_json_number(data["activation_norm"]),
                   activation_rms=from_json_number(data["activation_rms"]), called=bool(data["called"]),
                   ratio_to_last=from_json_number(data["ratio_to_last"]))


@dataclass
class StackStats:
    """A stack of blocks whose gradient flow the verdicts compare, from the input side to the output side."""

    name: str  # module path of the container, "blocks"; "" for the model's own children
    blocks: list[str]
    origin: str  # "facts" (static facts' residual stack), "repeated" (container of alike blocks), "children"
    path: str = ""  # source location of its construction, for findings
    line: int = 0
    column: int = 1
    label: str = ""  # how messages name it: "self.blocks of GPT"
    input_rms: float | None = None  # RMS of the activation entering its first block

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "label": self.label,
            "blocks": list(self.blocks),
            "origin": self.origin,
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "input_rms": json_number(self.input_rms),
        }

    @classmethod
    def from_dict(cls, data: dict) -> StackStats:
        return cls(name=data["name"], blocks=list(data["blocks"]), origin=data["origin"], path=data["path"],
                   line=int(data["line"]), column=int(data.get("column", 1)), label=data["label"],
                   input_rms=from_json_number(data["input_rms"]))


@dataclass
class ProbeReport:
    model: str  # class name
    device: str
    dtype: str
    loss_kind: str  # "sum", "mean", "output.loss", or "module:function"
    losses: list[float]
    steps: int
    seed: int | None
    parameters: list[ParameterStats] = field(default_factory=list)
    blocks: list[BlockStats] = field(default_factory=list)
    stacks: list[StackStats] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    world_size: int = 1
    wrap: str = "none"  # "none", "ddp", "fsdp"
    path: str = ""  # the probed file, when known
    expression: str = ""  # the --model expression that built it
    inputs: str = ""  # description of the inputs
    notes: list[str] = field(default_factory=list)

    @property
    def loss(self) -> float:
        """The mean loss over the steps."""
        return sum(self.losses) / len(self.losses) if self.losses else math.nan

    @property
    def codes(self) -> list[str]:
        return [finding.code for finding in self.findings]

    def parameter(self, name: str) -> ParameterStats:
        for stats in self.parameters:
            if stats.name == name:
                return stats
        raise KeyError(f"no parameter named {name!r}")

    def block(self, name: str) -> BlockStats:
        for stats in self.blocks:
            if stats.name == name:
                return stats
        raise KeyError(f"no block named {name!r}")

    def grad_norms(self) -> dict[str, float | None]:
        return {stats.name: stats.grad_norm for stats in self.parameters}

    def to_dict(self) -> dict:
        return {
            "version": __version__,
            "model": self.model,
            "expression": self.expression,
            "path": self.path,
            "device": self.device,
            "dtype": self.dtype,
            "loss": json_number(self.loss),
            "loss_kind": self.loss_kind,
            "losses": [json_number(value) for value in self.losses],
            "steps": self.steps,
            "seed": self.seed,
            "inputs": self.inputs,
            "world_size": self.world_size,
            "wrap": self.wrap,
            "parameters": [stats.to_dict() for stats in self.parameters],
            "blocks": [stats.to_dict() for stats in self.blocks],
            "stacks": [stats.to_dict() for stats in self.stacks],
            "findings": [finding.to_dict() for finding in self.findings],
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, data: dict) -> ProbeReport:
        """Inverse of to_dict: how a report crosses the process boundary of the isolated probe."""
        return cls(
            model=data["model"], device=data["device"], dtype=data["dtype"], loss_kind=data["loss_kind"],
            losses=[from_json_number(value) for value in data["losses"]], steps=int(data["steps"]), seed=data["seed"],
            parameters=[ParameterStats.from_dict(item) for item in data["parameters"]],
            blocks=[BlockStats.from_dict(item) for item in data["blocks"]],
            stacks=[StackStats.from_dict(item) for item in data["stacks"]],
            findings=[Finding.from_dict(item) for item in data["findings"]],
            world_size=int(data["world_size"]), wrap=data["wrap"], path=data["path"], expression=data["expression"],
            inputs=data["inputs"], notes=list(data["notes"]),
        )


def json_number(value: float | None) -> float | str | None:
    if value is None or math.isfinite(value):
        return value
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def from_json_number(value: float | str | None) -> float | None:
    return float(value) if isinstance(value, str) else value


def is_finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def ratio_of(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None:
        return None
    if denominator == 0:
        return math.inf if numerator else math.nan
    return numerator / denominator


def comparison_rows(report: ProbeReport, compared: ProbeReport) -> list[tuple[str, float | None, float | None, float | None]]:
    """(parameter, its gradient norm here, in the compared model, compared / here) for the names both have."""
    other = compared.grad_norms()
    return [(stats.name, stats.grad_norm, other[stats.name], ratio_of(other[stats.name], stats.grad_norm))
            for stats in report.parameters if stats.name in other]


def comparison_document(report: ProbeReport, compared: ProbeReport) -> dict:
    return {
        "model": compared.model,
        "expression": compared.expression,
        "loss": json_number(compared.loss),
        "parameters": [
            {"name": name, "grad_norm": json_number(mine), "compared_grad_norm": json_number(theirs),
             "ratio": json_number(ratio)}
            for name, mine, theirs, ratio in comparison_rows(report, compared)
        ],
        "report": compared.to_dict(),
    }
