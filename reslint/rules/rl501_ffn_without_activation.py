"""RL501: a feed-forward block stacks linear layers with no nonlinearity between them."""

from __future__ import annotations

from reslint.facts import FileFacts
from reslint.findings import Finding
from reslint.settings import Settings


def check(facts: FileFacts, settings: Settings):
    for chain in facts.linear_chains:
        if not chain.feed_forward:
            continue
        yield Finding(
            "RL501",
            f"`{chain.second}` is applied directly to `{chain.first}` in `{chain.owner}` with no activation "
            "between them: two linear layers collapse into one, so the FFN adds no nonlinearity; "
            "put nn.GELU/nn.ReLU (or a gated SiLU) between them",
            chain.span.path, chain.span.line, chain.span.column, symbol=chain.owner, engine=facts.engine,
        )
