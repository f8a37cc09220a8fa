"""RL102: blocks of one stack mix Pre-LN and Post-LN (or break the norm-placement policy)."""

from __future__ import annotations

from reslint.facts import FileFacts
from reslint.placement import placement_family, residual_placement
from reslint.findings import Finding, placement_label
from reslint.settings import Settings


def check(facts: FileFacts, settings: Settings):
    for key, stack in sorted(facts.stacks.items()):
        if facts.stack_placement(key) != "mixed":
            continue
        adds = facts.residuals_of_stack(key)
        lines = ", ".join(
            f"{placement_label(residual_placement(add))} at line {add.span.line}"
            for add in sorted(adds, key=lambda a: a.span.line) if add.placement in ("pre", "post", "sandwich"))
        yield Finding(
            "RL102",
            f"blocks of `{stack.attribute}` in `{stack.owner}` mix Pre-LN and Post-LN ({lines}): the stream's "
            "scale then changes from block to block; use one placement throughout",
            stack.span.path, stack.span.line, stack.span.column, symbol=stack.key, engine=facts.engine,
        )
    if settings.norm_placement == "post":
        for add in facts.residuals:
            if placement_family(residual_placement(add)) == "pre":
                yield Finding(
                    "RL102",
                    f"`{add.block}` uses {placement_label(residual_placement(add))}, but the project's "
                    "norm-placement policy is \"post\"",
                    add.span.path, add.span.line, add.span.column, symbol=add.block, engine=facts.engine,
                    severity="error",
                )
