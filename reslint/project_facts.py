"""Facts that span files: what a file offers to, and asks of, the rest of the project.

A model file says which of its classes are Post-LN blocks and which classes each class builds,
which stacks reach a class's output unnormalised and whether it normalises imported classes' outputs;
a training file says which model classes it builds, its optimizers and its learning-rate
schedules. They are plain, JSON-ready values, cached with the file, and linked across the run
by `reslint.project` (RL301: a Post-LN model trained without warmup; RL103: a stream whose final norm
is in the file that builds the stack's class).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

WARMUP_YES, WARMUP_NO, WARMUP_UNKNOWN = "yes", "no", "unknown"


@dataclass(frozen=True)
class PostLNBlock:
    """A class whose own residual adds are Post-LN (or which builds torch's Post-LN layers)."""

    cls: str
    line: int
    column: int
    detail: str = ""  # e.g. "nn.TransformerEncoderLayer with norm_first=False"


@dataclass(frozen=True)
class ModelRef:
    """A model class the training code builds or imports: `GPT`, `model.GPT`, `.models.GPT`."""

    name: str  # dotted, after import aliases; a bare name is a class of the same file
    line: int
    column: int
    post_ln: str = ""  # set for library models known to be Post-LN ("nn.Transformer", "BertModel")
    scope: str = ""  # enclosing function or class ("" at module level: imports)


@dataclass(frozen=True)
class OptimizerSite:
    line: int
    column: int
    api: str  # "torch.optim.AdamW", "TrainingArguments", "deepspeed.initialize"
    target: str = ""  # what it is assigned to ("optimizer", "self.opt"); "@line:col" when built inline
    substitute: str = ""  # why it needs no schedule (RAdam rectifies the variance itself)
    schedule: str = ""  # warmup verdict of a site that is its own schedule (TrainingArguments)
    schedule_detail: str = ""
    config: str = ""  # DeepSpeed JSON config that may hold its schedule ("*": look next to the script)
    scope: str = ""  # enclosing function, e.g. "Trainer.setup"


@dataclass(frozen=True)
class Schedule:
    line: int
    column: int
    api: str  # "LinearLR", "get_cosine_schedule_with_warmup", "manual learning-rate update"
    warmup: str  # WARMUP_YES | WARMUP_NO | WARMUP_UNKNOWN
    detail: str  # why, in a few words
    optimizer: str = ""  # the optimizer argument's text ("" when it applies to every optimizer of the file)
    config: str = ""  # set when the schedule lives in a DeepSpeed JSON config (read when linking)
    scope: str = ""


@dataclass
class FileLinks:
    post_ln_blocks: list[PostLNBlock] = field(default_factory=list)
    class_uses: dict[str, list[str]] = field(default_factory=dict)  # class -> dotted names of classes it builds
    imports: dict[str, str] = field(default_factory=dict)  # imported class name -> dotted source (re-exports)
    model_refs: list[ModelRef] = field(default_factory=list)
    optimizers: list[OptimizerSite] = field(default_factory=list)
    schedules: list[Schedule] = field(default_factory=list)
    open_streams: dict[str, list[str]] = field(default_factory=dict)  # RL103 stack -> classes returning it unnormalised
    stream_ends: dict[str, bool | None] = field(default_factory=dict)  # imported class -> its output normalised here?

    @property
    def is_training_code(self) -> bool:
        return bool(self.optimizers)

    def to_dict(self) -> dict:
        return {
            "post_ln_blocks": [asdict(block) for block in self.post_ln_blocks],
            "class_uses": self.class_uses,
            "imports": self.imports,
            "model_refs": [asdict(ref) for ref in self.model_refs],
            "optimizers": [asdict(site) for site in self.optimizers],
            "schedules": [asdict(schedule) for schedule in self.schedules],
            "open_streams": self.open_streams,
            "stream_ends": self.stream_ends,
        }

    @classmethod
    def from_dict(cls, data: dict) -> FileLinks:
        return cls(
            post_ln_blocks=[PostLNBlock(**block) for block in data.get("post_ln_blocks", ())],
            class_uses={name: list(uses) for name, uses in data.get("class_uses", {}).items()},
            imports=dict(data.get("imports", {})),
            model_refs=[ModelRef(**ref) for ref in data.get("model_refs", ())],
            optimizers=[OptimizerSite(**site) for site in data.get("optimizers", ())],
            schedules=[Schedule(**schedule) for schedule in data.get("schedules", ())],
            open_streams={key: list(roots) for key, roots in data.get("open_streams", {}).items()},
            stream_ends=dict(data.get("stream_ends", {})),
        )
