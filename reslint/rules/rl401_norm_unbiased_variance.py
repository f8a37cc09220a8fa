"""RL401: a hand-written norm uses the unbiased (Bessel-corrected) variance."""

from __future__ import annotations

from reslint.facts import LAYER, FileFacts
from reslint.findings import Finding
from reslint.settings import Settings


def check(facts: FileFacts, settings: Settings):
    for norm in facts.norms:
        if norm.form != "hand-written" or norm.unbiased_variance is None or norm.role != LAYER:
            continue
        where = norm.unbiased_variance
        yield Finding(
            "RL401",
            f"{norm.label} in `{norm.owner}` uses the unbiased variance (divides by n - 1), "
            "unlike nn.LayerNorm: pass unbiased=False (or correction=0)",
            where.path, where.line, where.column, symbol=norm.owner, engine=facts.engine,
        )

