"""Facts: the one model of a file that both engines produce and every rule reads.

Rules never parse or trace; they look only at these dataclasses. The static engine
(libcst) fills them today; the trace engine (torch.fx) fills the same fields with
exact shapes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reslint.findings import ModelSummary, StackSummary, placement_label
from reslint.placement import combined_placement


@dataclass(frozen=True)
class Span:
    path: str
    line: int
    column: int = 1


# What a hand-written normalisation is for (reslint.static.norms.decide_norm_role decides it for both engines):
LAYER = "layer"  # normalises an activation: a norm module or function, or a norm inline in a forward
INPUT_SCALING = "input-scaling"  # one-off scaling of a model's raw input (`wav / wav.std()`), often undone at the output
LOSS_TARGET = "loss-target"  # MAE's per-patch targets: only compared with a prediction in a loss


@dataclass(frozen=True)
class NormOp:
    """A normalisation: an nn module, a functional call, or hand-written arithmetic."""

    kind: str  # "layernorm", "rmsnorm", "batchnorm", "groupnorm", "instancenorm"
    form: str  # "module", "functional", "hand-written"
    span: Span
    owner: str = ""  # class that constructs or computes it
    variant: str = ""  # e.g. "BatchNorm1d", "LayerNorm"
    spans_sequence: Span | None = None  # where its statistics are taken over the time axis
    unbiased_variance: Span | None = None  # the var/std call using Bessel's correction
    missing_eps: Span | None = None  # the division by sqrt(var)/std without an epsilon
    in_sequence_model: bool = False  # its owner is part of a model that processes sequences
    role: str = LAYER  # hand-written: LAYER, INPUT_SCALING or LOSS_TARGET

    @property
    def label(self) -> str:
        """How messages name it: "hand-written LayerNorm", "BatchNorm1d", "layer_norm"."""
        if self.form == "hand-written":
            return "hand-written " + {"layernorm": "LayerNorm", "rmsnorm": "RMSNorm", "groupnorm": "GroupNorm"}.get(
                self.kind, "norm")
        return self.variant or self.kind


@dataclass(frozen=True)
class ResidualAdd:
    """`skip + branch`: one operand is an ancestor of the other through a parametrised op."""

    span: Span
    block: str  # class whose code performs the add
    placement: str  # "pre", "post", "sandwich", "branch-post", "none"
    skip: str = "x"  # source text of the skip operand
    branch: str = ""  # source text of the branch operand(s)
    parallel: bool = False  # several branches summed with one skip (GPT-J/NeoX style)
    skip_scaled: bool = False  # DeepNorm-style alpha * x on the skip
    skip_projection: bool = False
    skip_normalised: bool = False  # the skip path normalises the stream (`conv(LN(x))`): no identity stream
    gated_branch: bool = False  # ReZero-style alpha * F(x)
    dropout_on_skip: bool = False
    width_mismatch: str = ""  # human description when the widths provably differ
    stack: str = ""  # key of the stack whose block performs this add, "" if none
    condition: tuple = ()  # ((if_id, branch), ...) for adds under a runtime condition
    builtin: str = ""  # e.g. "nn.TransformerEncoderLayer" when the add lives inside torch
    skip_shape: tuple | None = None  # exact shapes, from the trace engine
    branch_shape: tuple | None = None
    broadcast: str = ""  # "(2, 16, 16) + (2, 16, 1)" when the shapes differ but broadcast
    alternative: str = ""  # "config.pre_norm = True": the add exists so only when a flag leaves its default


@dataclass(frozen=True)
class Stack:
    """A repeated block container: ModuleList/Sequential of blocks, nn.TransformerEncoder."""

    key: str  # "Owner.attr"
    owner: str
    attribute: str  # "self.blocks"
    span: Span  # where it is constructed
    block_classes: tuple[str, ...]
    depth: int | None
    iteration: Span | None = None  # where forward runs the blocks
    final_norm: bool | None = None  # None: not determined
    builtin_placement: str = ""  # placement of torch's own layers (norm_first)


@dataclass(frozen=True)
class LinearChain:
    """Two linear layers applied back to back with nothing nonlinear between them."""

    span: Span
    owner: str
    first: str
    second: str
    feed_forward: bool  # the chain looks like an FFN (expansion, FFN/MLP naming)


@dataclass
class ModelFacts:
    """An outermost model class of the file and what it contains."""

    name: str
    span: Span
    sequence_markers: tuple[str, ...] = ()  # why it is a sequence model ("nn.Embedding", ...)
    classes: tuple[str, ...] = ()  # every class reachable from it, itself included
    stacks: tuple[str, ...] = ()  # keys of stacks it contains
    placement: str = "none"  # placement of its residuals outside stacks


@dataclass
class AnalysisLimit:
    """Where the static evaluator went over one of its limits (the budget's name) and stopped or gave up a value."""

    span: Span
    budget: str  # "integer size", "sequence length", "string length", "work per file"
    limit: int


@dataclass
class FileFacts:
    path: str
    engine: str = "static"
    norms: list[NormOp] = field(default_factory=list)
    residuals: list[ResidualAdd] = field(default_factory=list)
    stacks: dict[str, Stack] = field(default_factory=dict)
    linear_chains: list[LinearChain] = field(default_factory=list)
    alternatives: list[ResidualAdd] = field(default_factory=list)  # what flags off their default would build
    models: list[ModelFacts] = field(default_factory=list)
    post_ln_blocks: dict[str, ResidualAdd] = field(default_factory=dict)  # class -> its first Post-LN residual add
    class_uses: dict[str, tuple[str, ...]] = field(default_factory=dict)  # class -> classes it builds or extends
    class_imports: dict[str, str] = field(default_factory=dict)  # imported capitalised name -> dotted source
    limits: list[AnalysisLimit] = field(default_factory=list)  # the static evaluator's budgets it went over
    reads: list[str] = field(default_factory=list)  # other files read for config defaults (absolute paths)
    # RL103 across files: stack key -> classes whose returned output the unnormalised stream reached, and
    # imported module class (dotted) -> whether this file normalises its output (None: cannot tell).
    open_streams: dict[str, tuple[str, ...]] = field(default_factory=dict)
    stream_ends: dict[str, bool | None] = field(default_factory=dict)

    def residuals_of_stack(self, key: str) -> list[ResidualAdd]:
        return [add for add in self.residuals if add.stack == key]

    def identity_stream(self, key: str) -> bool:
        """False when a block of the stack normalises its skip path too: the stream restarts every block."""
        return not any(add.skip_normalised for add in self.residuals_of_stack(key))

    def stack_placement(self, key: str) -> str:
        stack = self.stacks[key]
        if stack.builtin_placement:
            return stack.builtin_placement
        return combined_placement(self.residuals_of_stack(key))

    def model_summaries(self) -> list[ModelSummary]:
        summaries = []
        for model in self.models:
            stacks = tuple(
                StackSummary(
                    attribute=self.stacks[key].attribute,
                    block=", ".join(self.stacks[key].block_classes),
                    depth=self.stacks[key].depth,
                    placement=self.stack_placement(key),
                    final_norm=self.stacks[key].final_norm
                    if self.stack_placement(key) in ("pre", "parallel-pre", "sandwich") and self.identity_stream(key)
                    else None,
                    line=self.stacks[key].span.line,
                )
                for key in model.stacks
            )
            if not stacks and model.placement == "none":
                continue
            summaries.append(
                ModelSummary(path=self.path, name=model.name, line=model.span.line,
                             stacks=stacks, placement=model.placement, engine=self.engine,
                             notes=self.alternative_notes(model))
            )
        return summaries

    def alternative_notes(self, model: ModelFacts) -> tuple[str, ...]:
        """`self.layers: Post-LN by default, Pre-LN when config.pre_norm = True`, per stack a flag changes."""
        notes = []
        for key in model.stacks:
            by_flag: dict[str, list[ResidualAdd]] = {}
            for add in self.alternatives:
                if add.stack == key:
                    by_flag.setdefault(add.alternative, []).append(add)
            default = self.stack_placement(key)
            for flag, adds in sorted(by_flag.items()):
                other = combined_placement(adds)
                if other != default and other not in ("none", "unknown"):
                    notes.append(f"{self.stacks[key].attribute}: {placement_label(default)} by default, "
                                 f"{placement_label(other)} when {flag}")
        return tuple(notes)
