"""RL403: a hand-written norm divides by std/sqrt(var) without an epsilon."""

from __future__ import annotations

from reslint.facts import FileFacts
from reslint.findings import Finding
from reslint.settings import Settings


def check(facts: FileFacts, settings: Settings):
    for norm in facts.norms:
        if norm.form != "hand-written" or norm.missing_eps is None:
            continue
        where = norm.missing_eps
        yield Finding(
            "RL403",
            f"hand-written norm in `{norm.owner}` divides by the standard deviation without an epsilon: a "
            "constant feature vector (padding, a dead channel) gives 0/0 = NaN; use rsqrt(var + eps)",
            where.path, where.line, where.column, symbol=norm.owner, engine=facts.engine,
        )
