"""RL403: a hand-written norm divides by std/sqrt(var) without an epsilon."""

from __future__ import annotations

from reslint.facts import INPUT_SCALING, LOSS_TARGET, FileFacts
from reslint.findings import Finding
from reslint.settings import Settings


def check(facts: FileFacts, settings: Settings):
    for norm in facts.norms:
        # The statistics of a loss target are no norm layer (MAE's per-patch targets).
        if norm.form != "hand-written" or norm.missing_eps is None or norm.role == LOSS_TARGET:
            continue
        where = norm.missing_eps
        if norm.role == INPUT_SCALING:
            message = (f"`{norm.owner}` scales its input by the standard deviation without an epsilon: an all-zero "
                       "input (silence, a blank frame) gives 0/0 = NaN; divide by (std + eps)")
        else:
            message = (f"hand-written norm in `{norm.owner}` divides by the standard deviation without an epsilon: a "
                       "constant feature vector (padding, a dead channel) gives 0/0 = NaN; use rsqrt(var + eps)")
        yield Finding("RL403", message, where.path, where.line, where.column, symbol=norm.owner, engine=facts.engine)
