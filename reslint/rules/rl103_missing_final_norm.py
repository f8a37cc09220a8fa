"""RL103: a Pre-LN stack's output reaches the head or the output without a final norm."""

from __future__ import annotations

from reslint.facts import FileFacts
from reslint.placement import placement_family
from reslint.findings import Finding
from reslint.settings import Settings


def check(facts: FileFacts, settings: Settings):
    for key, stack in sorted(facts.stacks.items()):
        if placement_family(facts.stack_placement(key)) != "pre" or stack.final_norm is not False:
            continue
        if not facts.identity_stream(key):
            continue
        where = stack.iteration or stack.span
        yield Finding(
            "RL103",
            f"the Pre-LN stack `{stack.attribute}` of `{stack.owner}` feeds the head/output without a final norm: "
            "in Pre-LN the residual stream is never normalised and grows with depth; add a final "
            "LayerNorm/RMSNorm after the last block (as GPT-2's ln_f)",
            where.path, where.line, where.column, symbol=stack.key, engine=facts.engine,
        )
