"""RL002: skip and branch shapes differ but broadcast, so the add silently changes meaning."""

from __future__ import annotations

from reslint.facts import FileFacts
from reslint.findings import Finding
from reslint.settings import Settings


def check(facts: FileFacts, settings: Settings):
    for add in facts.residuals:
        if add.broadcast and not add.width_mismatch and not add.skip_projection:
            yield Finding(
                "RL002",
                f"residual add in `{add.block}` broadcasts: {add.broadcast}; the skip and the branch should have "
                "the same shape, a size-1 axis silently repeats one value over that axis",
                add.span.path, add.span.line, add.span.column, symbol=add.block, engine=facts.engine,
            )
