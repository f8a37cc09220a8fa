"""A cheap text test that lets `reslint check` skip files with no model or training code.

Parsing with libcst is most of a check's cost, and most files of a large repository
(configurations, tokenizers, `__init__.py`) contain nothing the rules look at. A file is skipped
only when its text cannot hold anything a rule reports on:

- a model class: the static engine treats a class as a module when it (or a base defined in the
  file) has a `forward`, or when a base's name, after import aliases, ends in `Module` or
  `PreTrainedModel`; each needs the word `class` and one of those names in the text;
- PyTorch or training code: `torch` (any import of torch, torch.nn or torch.optim names it),
  optimizers, LR schedulers and warmup, Trainer/TrainingArguments, DeepSpeed, Lightning, Accelerate;
- a model factory (`def build_model(args): return Model(...)`): the link from a training script's
  `model = build_model(args)` to the model (RL301) goes through it.

The test errs on the side of analysing. A file that does not parse is never skipped (its RL901
matters more than the time), nor a file that `train` globs or a `--model` spec name.
"""

from __future__ import annotations

import re

SKIP_REASON = "no model or training code"

CLASS = re.compile(r"\bclass\b")
# Words, not regular expressions: `in` finds a literal faster than an alternation finds it (over transformers' models
# tree, 0.42 -> 0.20 s for 2,632 files: most of them hold none of the training words, read to their end).
MODULE_CLASS_HINTS = ("forward", "Module", "PreTrainedModel")
TORCH_OR_TRAINING_HINTS = ("torch", "optim", "Schedul", "schedul", "Warmup", "warmup", "Trainer", "TrainingArguments",
                           "deepspeed", "DeepSpeed", "lightning", "Lightning", "accelerate")
# What nearly every file libcst parses spells (static.without_libcst parses those with `def forward`, a module
# class, or a function named like a norm). Some that spell it need no libcst all the same (`nn.Module` in a
# training script); a file it misses costs each worker of a pool libcst's import, about what the parent's costs.
MAY_NEED_LIBCST = re.compile(rb"def forward|def \w*(?:norm|Norm|NORM)|Module\b")


def may_hold_model_or_training_code(text: str) -> bool:
    """False only when no rule can report anything on a file with this text."""
    if any(word in text for word in TORCH_OR_TRAINING_HINTS):
        return True
    from reslint.static.training import FACTORY_RETURN

    if FACTORY_RETURN.search(text):
        return True
    return CLASS.search(text) is not None and any(word in text for word in MODULE_CLASS_HINTS)


def parses(text: str, path: str) -> bool:
    """Whether CPython's parser accepts the text (nothing is run)."""
    return parsed(text, path) is not None


def parsed(text: str, path: str):
    """CPython's AST of the text, or None when its parser rejects it (nothing is run)."""
    import ast
    import warnings

    try:
        with warnings.catch_warnings():  # invalid escape sequences and the like: not ours to report
            warnings.simplefilter("ignore")
            return ast.parse(text, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # ValueError: null bytes
        return None


def may_need_libcst(path: str) -> bool:
    """Whether the file's text may need libcst's parse (an unreadable file counts as needing it): a pool's parent
    imports libcst before forking only then (runner.preload_engine)."""
    try:
        with open(path, "rb") as file:
            return MAY_NEED_LIBCST.search(file.read()) is not None
    except OSError:
        return True
