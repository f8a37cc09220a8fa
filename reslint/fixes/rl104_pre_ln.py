"""RL104 fix (unsafe): the deep Post-LN stack's blocks become Pre-LN, with a final norm (the RL101 fix)."""

from __future__ import annotations

import dataclasses

import libcst as cst

from reslint.findings import Finding
from reslint.fixes import rl101_pre_ln
from reslint.fixes.source import Source, dotted, self_attributes

SAFE = False
TITLE = rl101_pre_ln.TITLE


def fix(source: Source, finding: Finding) -> str | None:
    block = stack_block(source, finding)
    return rl101_pre_ln.fix(source, block) if block is not None else None


def scope(source: Source, finding: Finding) -> list[range]:
    block = stack_block(source, finding)
    return rl101_pre_ln.scope(source, block) if block is not None else []


def stack_block(source: Source, finding: Finding) -> Finding | None:
    """The finding as if about the stack's block class (`Encoder.layers` → `EncoderLayer`)."""
    owner, _, attribute = finding.symbol.partition(".")
    model = source.class_def(owner)
    assignment = self_attributes(model).get(attribute) if model is not None else None
    if assignment is None:
        return None
    blocks = {dotted(node.func) for node in rl101_pre_ln.walk(assignment.value)
              if isinstance(node, cst.Call) and source.class_def(dotted(node.func)) is not None}
    return dataclasses.replace(finding, symbol=blocks.pop()) if len(blocks) == 1 else None
