"""RL101: a block uses Post-LN, LayerNorm(x + Sublayer(x))."""

from __future__ import annotations

from reslint.facts import FileFacts
from reslint.placement import residual_placement
from reslint.findings import Finding
from reslint.settings import Settings


def check(facts: FileFacts, settings: Settings):
    severity = "error" if settings.norm_placement == "pre" else ""
    for add in facts.residuals:
        if add.placement != "post":
            continue
        if add.builtin and add.condition:
            where = (f"`{add.block}` is Post-LN with norm_first=False, torch's default (its `norm_first` is a required "
                     "argument that no constructor up the chain gives a default): LayerNorm(x + sublayer(x))")
        elif add.builtin:
            where = f"`{add.block}` is Post-LN (norm_first=False, the default): LayerNorm(x + sublayer(x))"
        else:
            where = f"`{add.block}` uses Post-LN: the norm follows `{add.skip} + {add.branch}`"
        if residual_placement(add) == "deepnorm":
            tail = "the skip is scaled DeepNorm-style, which keeps deep Post-LN stable; it still needs warmup"
        else:
            tail = ("train it with learning-rate warmup (Xiong et al. 2020); Post-LN stacks deeper than "
                    "about 20 layers diverge without DeepNorm-style scaling; Pre-LN needs neither")
        policy = " (norm-placement policy is \"pre\")" if severity else ""
        yield Finding("RL101", f"{where}; {tail}{policy}", add.span.path, add.span.line, add.span.column,
                      symbol=add.block, engine=facts.engine, severity=severity)
