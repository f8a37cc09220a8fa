"""RL003: dropout on the identity path of a residual add."""

from __future__ import annotations

from reslint.facts import FileFacts
from reslint.findings import Finding
from reslint.settings import Settings


def check(facts: FileFacts, settings: Settings):
    for add in facts.residuals:
        if add.dropout_on_skip:
            yield Finding(
                "RL003",
                f"dropout is applied to the skip `{add.skip}` of the residual in `{add.block}`: the identity "
                "path should carry x unchanged; drop the branch instead, x + dropout(sublayer(x))",
                add.span.path, add.span.line, add.span.column, symbol=add.block, engine=facts.engine,
            )
