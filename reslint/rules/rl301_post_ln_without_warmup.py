"""RL301: a Post-LN model trained by code with no learning-rate warmup.

Unlike the other rules it reads the links between files (`reslint.project`): the optimizer is
in the training code, the Post-LN block in the model, often in another file.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from reslint.findings import Finding
from reslint.settings import Settings

if TYPE_CHECKING:
    from reslint.project import TrainingLink

PROJECT_RULE = True  # run by the project stage on the links between files (reslint.rules.PROJECT_RULES)


def check(links: Iterable[TrainingLink], settings: Settings) -> Iterator[Finding]:
    for link in links:
        if link.warmup != "no":
            continue
        first = link.blocks[0]
        block = first.block.detail or f"`{first.block.cls}`"  # "`nn.TransformerEncoderLayer` in `Encoder`"
        more = f" (and {len(link.blocks) - 1} more Post-LN block{'s' if len(link.blocks) > 2 else ''})" \
            if len(link.blocks) > 1 else ""
        yield Finding(
            "RL301",
            f"`{link.site.api}` trains a Post-LN model ({block} at {first.path}:{first.block.line}{more}) "
            f"without learning-rate warmup: {link.detail}; at initialisation Post-LN's gradients near the output "
            "are large and the full learning rate makes training diverge (Xiong et al. 2020); warm up over the "
            "first steps (LinearLR/SequentialLR, get_linear_schedule_with_warmup, warmup_steps) or use Pre-LN "
            "with a final norm",
            link.path, link.site.line, link.site.column, symbol=first.block.cls)
