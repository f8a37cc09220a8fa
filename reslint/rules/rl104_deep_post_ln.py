"""RL104: a Post-LN stack deeper than `deep-post-ln-layers` without DeepNorm scaling."""

from __future__ import annotations

from reslint.facts import FileFacts
from reslint.findings import Finding
from reslint.settings import Settings


def check(facts: FileFacts, settings: Settings):
    limit = settings.deep_post_ln_layers
    for key, stack in sorted(facts.stacks.items()):
        if facts.stack_placement(key) != "post" or stack.depth is None or stack.depth <= limit:
            continue
        yield Finding(
            "RL104",
            f"the Post-LN stack `{stack.attribute}` of `{stack.owner}` has {stack.depth} blocks "
            f"(more than deep-post-ln-layers = {limit}) and no DeepNorm-style skip scaling: deep Post-LN "
            "diverges early in training; use Pre-LN or LayerNorm(alpha * x + F(x)) (Wang et al. 2022)",
            stack.span.path, stack.span.line, stack.span.column, symbol=stack.key, engine=facts.engine,
        )
