"""RL402: a norm's statistics span the sequence/time axis."""

from __future__ import annotations

from reslint.facts import LAYER, FileFacts
from reslint.findings import Finding
from reslint.settings import Settings


def check(facts: FileFacts, settings: Settings):
    for norm in facts.norms:
        # Scaling a raw input over time (a waveform by its RMS) is not a layer mixing positions.
        if norm.spans_sequence is None or not norm.in_sequence_model or norm.role != LAYER:
            continue
        where = norm.spans_sequence
        yield Finding(
            "RL402",
            f"the {norm.label} in `{norm.owner}` takes its statistics over the sequence axis: "
            "every position then depends on every other (future tokens leak into the past) and on the "
            "sequence length; normalise over the feature dimension only (dim=-1)",
            where.path, where.line, where.column, symbol=norm.owner, engine=facts.engine,
        )

