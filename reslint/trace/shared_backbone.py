"""Trace a backbone once for the heads built on it.

A transformers modeling file defines one backbone (`BertModel`) and many heads that hold it
(`BertForMaskedLM.bert`, `BertForSequenceClassification.bert`, ...). Exporting every head
exports the backbone again each time. Here the backbone is captured once; each head is captured
with its backbone replaced by a `Replay` that runs the real backbone outside the trace (on meta:
shapes only, milliseconds) and hands the head new tensors of the same shapes. The head's graph so
holds only the head's own layers, and its facts are the backbone's plus the head's.

That is exact only where nothing the head does after the backbone can change a backbone fact:
a Pre-LN stack whose stream leaves the backbone unnormalised (a head may normalise it, RL103) is
traced in full, as is any head whose replayed capture fails.
"""

from __future__ import annotations

import dataclasses
from typing import Any

PRE_PLACEMENTS = ("pre", "parallel-pre", "sandwich")


def backbone_links(kept: list, built: list) -> dict[int, tuple[str, Any]]:
    """id(head item) -> (attribute, backbone item) for heads whose direct child is another model
    of the file, when at least two heads share that backbone class."""
    by_class = {item.spec.cls: item for item in built if item.spec.cls is not None and item not in kept}
    links: dict[int, tuple[str, Any]] = {}
    for item in kept:
        for attribute, child in item.model.named_children():
            backbone = by_class.get(type(child))
            if backbone is not None:
                links[id(item)] = (attribute, backbone)
                break
    counts: dict[int, int] = {}
    for _, backbone in links.values():
        counts[id(backbone)] = counts.get(id(backbone), 0) + 1
    return {key: link for key, link in links.items() if counts[id(link[1])] >= 2}


def reusable(facts: Any) -> bool:
    """Whether the backbone's facts hold whatever its head does with the backbone's output.

    Only a stack of blocks stands for its heads: a single layer several blocks hold (diffusers' FeedForward)
    sits inside each block's residual branch, fed by the block's norm, and replaying it would cut that norm from
    the add it feeds (a Pre-LN block read as Post-LN)."""
    return bool(facts.stacks) and all(stack.final_norm is True for key, stack in facts.stacks.items()
                                      if facts.stack_placement(key) in PRE_PLACEMENTS)


def make_replay(backbone: Any) -> Any:
    import torch

    class BackboneReplay(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            # Not a submodule: export would swap fake tensors into its parameters, and the real
            # backbone runs outside the trace on its own (meta) tensors.
            object.__setattr__(self, "backbone", backbone)

        def __getattr__(self, name: str) -> Any:
            try:
                return super().__getattr__(name)
            except AttributeError:
                return getattr(object.__getattribute__(self, "backbone"), name)

        def forward(self, *args: Any, **kwargs: Any) -> Any:
            from torch._subclasses.fake_tensor import unset_fake_temporarily
            from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing

            device = next((value.device for value in (*args, *kwargs.values()) if isinstance(value, torch.Tensor)),
                          torch.device("meta"))
            own = next(backbone.parameters(), torch.empty(0, device="meta")).device
            with disable_proxy_modes_tracing(), unset_fake_temporarily():
                outputs = backbone(*detached(args, own), **detached(kwargs, own))
                shapes = described(outputs)
            return rebuilt(shapes, device)

    return BackboneReplay()


def detached(value: Any, device: Any) -> Any:
    """Plain tensors of the same shapes and dtypes on the backbone's device (token ids stay valid: zeros)."""
    import torch

    if isinstance(value, torch.Tensor):
        return torch.zeros(tuple(value.shape), dtype=value.dtype, device=device)
    if isinstance(value, tuple):
        return tuple(detached(item, device) for item in value)
    if isinstance(value, list):
        return [detached(item, device) for item in value]
    if isinstance(value, dict):
        return {key: detached(item, device) for key, item in value.items()}
    return value


def described(value: Any) -> Any:
    """The output's structure with each tensor as (shape, dtype)."""
    import torch

    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), value.dtype)
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return ("tuple", [described(item) for item in value])
    if isinstance(value, list):
        return ("list", [described(item) for item in value])
    if isinstance(value, dict):  # transformers' ModelOutput is an OrderedDict of the fields that are set
        return ("dict", type(value), {key: described(item) for key, item in value.items()})
    return ("value", value)


def rebuilt(shape: Any, device: Any) -> Any:
    import torch

    kind = shape[0]
    if kind == "tensor":
        return torch.zeros(shape[1], dtype=shape[2], device=device)
    if kind == "tuple":
        return tuple(rebuilt(item, device) for item in shape[1])
    if kind == "list":
        return [rebuilt(item, device) for item in shape[1]]
    if kind == "dict":
        return shape[1](**{key: rebuilt(item, device) for key, item in shape[2].items()})
    return shape[1]


def composed_facts(head: Any, backbone: Any) -> Any:
    """The facts of a head traced with its backbone replayed: the backbone's facts plus the head's own."""
    from reslint.facts import FileFacts

    facts = FileFacts(path=head.path, engine=head.engine)
    for name in ("norms", "residuals", "linear_chains", "alternatives", "limits", "reads"):
        setattr(facts, name, [*getattr(backbone, name), *getattr(head, name)])
    facts.residuals.sort(key=lambda residual: (residual.span.line, residual.span.column))
    for name in ("stacks", "post_ln_blocks", "class_uses", "class_imports", "open_streams", "stream_ends"):
        setattr(facts, name, {**getattr(backbone, name), **getattr(head, name)})
    inner = backbone.models[0] if backbone.models else None
    for model in head.models:
        if inner is None:
            facts.models.append(model)
            continue
        placement = model.placement if model.placement not in ("none", "unknown") else inner.placement
        facts.models.append(dataclasses.replace(
            model, sequence_markers=tuple(dict.fromkeys((*inner.sequence_markers, *model.sequence_markers))),
            classes=tuple(sorted({*inner.classes, *model.classes})), stacks=(*inner.stacks, *model.stacks),
            placement=placement))
    return facts


def captured_facts(capture: Any, path: str) -> Any:
    """The facts of one capture; a head captured with a replayed backbone gets the backbone's too."""
    from reslint.trace.graph_facts import facts_from_capture

    facts = facts_from_capture(capture, path)
    backbone = getattr(capture, "backbone", None)
    if backbone is None:
        return facts
    if backbone.facts is None:
        backbone.facts = facts_from_capture(backbone, path)
    return composed_facts(facts, backbone.facts)
