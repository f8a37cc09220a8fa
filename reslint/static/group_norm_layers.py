"""A hand-written GroupNorm: a class derived from nn.GroupNorm that computes its own statistics (PE Audio's
masked GroupNorm, which leaves padding out of them).

GroupNorm's statistics span a group's channels and every time step of `(batch, channels, time)` by definition
(Wu & He, 2018), as `nn.GroupNorm` computes them, which RL402 does not report: the affine weights are per
channel, so any length runs. What RL402 exists for is then only causality: in a causal model the statistics let
the future into the past. A file with no causal mask anywhere (no `is_causal=True`, `tril`/`triu`, causal mask
helper) has no past to leak into, and such a norm is the layer's design, not RL402.
"""

from __future__ import annotations

import re

CAUSAL_MARKERS = re.compile(r"is_causal\s*=\s*True|\btri[lu]\b|causal_mask|causal\s*=\s*True|\bcausal_conv|"
                            r"create_causal|make_causal")


def derives_from_group_norm(index, owner: str) -> bool:
    info = index.classes.get(owner)
    return info is not None and any(index.torch_member(base.value) == "GroupNorm" for base in info.node.bases)


def non_causal_group_norm(index, owner: str, text: str) -> bool:
    """Whether `owner` derives from nn.GroupNorm and nothing in the file (`text`) is causal."""
    return derives_from_group_norm(index, owner) and CAUSAL_MARKERS.search(text) is None
