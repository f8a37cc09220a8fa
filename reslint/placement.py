"""One residual placement classifier for both engines.

Each engine finds residual adds in its own graph (the static engine's dataflow, the trace engine's
torch.fx graph) and describes each as a `ResidualView`: the ops on the skip operand's path, the ops
at the end of each branch, and the few graph facts only it can see (a norm of the stream feeding a
branch, a norm of the sum in the same block). Everything decided from those facts is decided here,
once, so a fix lands in both modes: the placement label, dropout ownership, residual scaling and
gating, parallel branches, and whether the skip is the identity stream.
"""

from __future__ import annotations

from dataclasses import dataclass

# Kinds of the ops an engine reports on an operand's path (between the add and the value it forwards).
DROPOUT = "dropout"
MUL = "mul"  # `alpha * x`: a scale (skip) or a gate (branch)
DIV = "div"
PASS = "pass"  # casts, copies, views, identity
PROJECTION = "projection"
OTHER = "other"

# Words in a flag's name that say it chooses where the norm sits (`norm_first`, `pre_norm`, `layer_norm="post"`).
PLACEMENT_FLAG_WORDS = ("norm", "pre", "post", "before", "after", "first", "parallel", "residual", "sandwich")


@dataclass(frozen=True)
class Step:
    kind: str
    own: bool = True  # performed by the block that performs the add (an upstream dropout is not)
    normalises: bool = False  # a LayerNorm/RMSNorm in any spelling (a hand-written norm's last mul is both)


@dataclass(frozen=True)
class ResidualView:
    """What an engine saw of one residual add, in terms both engines share."""

    skip_path: tuple[Step, ...]  # ops from the add's skip operand down to the stream, nearest first
    branch_paths: tuple[tuple[Step, ...], ...]  # per branch: pass-through ops from the add down to its root
    branch_count: int  # independent branches summed with the skip (GPT-J: attention and MLP)
    pre_normed: bool  # a norm of the stream feeds a branch
    branch_output_normed: bool  # every branch ends in a norm
    skip_projection: bool = False  # the skip reaches the stream through a projection (`shortcut(x)`)
    projection_path: tuple[Step, ...] = ()  # ops of that transformed skip path


@dataclass(frozen=True)
class Placement:
    placement: str  # "pre", "sandwich", "branch-post", "none" ("post" is settled with `settle_post`)
    parallel: bool
    skip_scaled: bool
    gated_branch: bool
    dropout_on_skip: bool
    skip_normalised: bool

    @property
    def identity_stream(self) -> bool:
        """False when the skip path normalises the stream: the stream restarts at every block."""
        return not self.skip_normalised


def classify(view: ResidualView) -> Placement:
    if view.pre_normed:
        placement = "sandwich" if view.branch_output_normed else "pre"
    elif view.branch_output_normed:
        placement = "branch-post"
    else:
        placement = "none"
    return Placement(
        placement=placement,
        parallel=view.branch_count > 1,
        skip_scaled=any(step.kind in (MUL, DIV) for step in view.skip_path),
        gated_branch=any(step.kind == MUL for path in view.branch_paths for step in path),
        # Only a dropout of the add's own block is on this skip path: an embedding dropout upstream is not.
        dropout_on_skip=any(step.kind == DROPOUT and step.own for step in view.skip_path),
        skip_normalised=view.skip_projection and any(step.normalises for step in view.projection_path),
    )


def settle_post(placement: str, *, stream_continues: bool, sum_normed_in_block: bool) -> str:
    """Post-LN: a norm consumes the sum in the add's own block, and the sum is not the next residual's
    skip (then that norm is the next branch's pre-norm)."""
    if placement == "none" and not stream_continues and sum_normed_in_block:
        return "post"
    return placement


# ----- labels of one add and of a group of adds ---------------------------------------------------


def residual_placement(add) -> str:
    """The label of one residual add (a `facts.ResidualAdd`): DeepNorm and parallel Pre-LN are named."""
    if add.placement == "post" and add.skip_scaled:
        return "deepnorm"
    if add.placement == "pre" and add.parallel:
        return "parallel-pre"
    return add.placement


def exclusive(first, second) -> bool:
    """True when the two adds sit in different branches of one runtime `if`."""
    branches = dict(first.condition)
    return any(if_id in branches and branches[if_id] != branch for if_id, branch in second.condition)


def combined_placement(adds: list) -> str:
    """One label for a group of residuals: the shared placement, "mixed", or "configurable"."""
    placements = {residual_placement(add) for add in adds if add.placement != "none"}
    if not placements:
        return "none" if adds else "unknown"
    if len(placements) == 1:
        return placements.pop()
    families = {placement_family(p) for p in placements}
    if families == {"pre"}:
        return "parallel-pre" if "parallel-pre" in placements else "pre"
    if families == {"post"}:
        return "post"
    mixing = [
        (a, b) for a in adds for b in adds
        if placement_family(residual_placement(a)) == "pre"
        and placement_family(residual_placement(b)) == "post" and not exclusive(a, b)
    ]
    return "mixed" if mixing else "configurable"


def placement_family(placement: str) -> str:
    if placement in ("pre", "parallel-pre", "sandwich"):
        return "pre"
    if placement in ("post", "deepnorm"):
        return "post"
    return placement


def added_back(add_operands, reached, is_source, inputs_of, is_gate, limit: int = 16) -> bool:
    """Whether an operand of an add other than `reached` is a source of the stack, as it is or scaled,
    gated, cast or dropped out (`alpha * experts(h) + (1 - alpha) * h`): the stack is then the branch of a
    residual. Both engines ask it, each with its graph's accessors."""
    for operand in add_operands:
        if operand is reached:
            continue
        pending, steps = [operand], 0
        while pending and steps < limit:
            node = pending.pop()
            steps += 1
            if is_source(node):
                return True
            if is_gate(node):
                pending.extend(inputs_of(node))
    return False

