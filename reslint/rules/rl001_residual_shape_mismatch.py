"""RL001: skip and branch of a residual add have different widths and no projection."""

from __future__ import annotations

from reslint.facts import FileFacts
from reslint.findings import Finding
from reslint.settings import Settings


def check(facts: FileFacts, settings: Settings):
    for add in facts.residuals:
        if add.width_mismatch and not add.skip_projection:
            yield Finding(
                "RL001",
                f"residual add in `{add.block}` cannot work: {add.width_mismatch}; "
                "make the branch return the skip's width or project the skip (nn.Linear)",
                add.span.path, add.span.line, add.span.column, symbol=add.block, engine=facts.engine,
            )
