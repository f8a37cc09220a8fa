"""RL904: the static evaluator went over one of its budgets; the file's other facts stand."""

from __future__ import annotations

from reslint.facts import FileFacts
from reslint.findings import Finding
from reslint.settings import Settings

CONSEQUENCES = {
    "integer size": "an integer of more than {limit} bits was not computed (treated as unknown)",
    "sequence length": "a tuple or list of more than {limit} items was not built (treated as unknown)",
    "string length": "a string of more than {limit} characters was not built (treated as unknown)",
    "inlining fan-out": "a function called more than {limit} times in one class's evaluation was not inlined "
                        "again (its further calls are opaque)",
    "work per file": "the evaluation stopped after {limit} steps: the classes not evaluated by then have no "
                     "residual or norm facts",
}


def check(facts: FileFacts, settings: Settings):
    for limit in facts.limits:
        consequence = CONSEQUENCES[limit.budget].format(limit=limit.limit)
        yield Finding(
            "RL904",
            f"over the static evaluator's {limit.budget} limit here: {consequence}; the file's other facts are reported",
            limit.span.path, limit.span.line, limit.span.column, engine=facts.engine,
        )
