"""RL201: BatchNorm in a model that processes sequences."""

from __future__ import annotations

from reslint.facts import FileFacts
from reslint.findings import Finding
from reslint.settings import Settings
from reslint.static.torch_api import SEQUENCE_BATCHNORMS


def check(facts: FileFacts, settings: Settings):
    markers = {name: model.sequence_markers for model in facts.models for name in model.classes
               if model.sequence_markers}
    for norm in facts.norms:
        if norm.kind != "batchnorm" or norm.variant not in SEQUENCE_BATCHNORMS or not norm.in_sequence_model:
            continue
        why = evidence(markers.get(norm.owner, ())) or "sequence inputs"
        yield Finding(
            "RL201",
            f"{norm.variant} in `{norm.owner}`, part of a sequence model ({why}): its statistics mix samples "
            "and positions of the batch and padding, and differ between training and inference; "
            "use nn.LayerNorm or nn.RMSNorm over the feature dimension",
            norm.span.path, norm.span.line, norm.span.column, symbol=norm.owner, engine=facts.engine,
        )


def evidence(markers: tuple[str, ...]) -> str:
    """Two kinds of sequence evidence, one marker each ("attention (nn.MultiheadAttention)"). Sorted:
    the engines find markers in different orders and numbers, and the message must read the same."""
    kinds: dict[str, str] = {}
    for marker in sorted(markers):
        kinds.setdefault(marker.split(" (")[0], marker)
    return ", ".join(list(kinds.values())[:2])
