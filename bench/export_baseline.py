"""Baseline of the full check of a modeling file: `import torch, transformers` plus one export of
the file's largest model, built as reslint builds it (default config, reduced for tracing, on meta).

    python bench/export_baseline.py transformers/models/bert/modeling_bert.py
"""

from __future__ import annotations

import importlib
import sys

import torch
import transformers  # noqa: F401 - part of the baseline

from reslint.trace.inputs import candidate_inputs, infer_candidates
from reslint.trace.models import build_model, discover_models, outermost, parameter_count


def main(path: str) -> int:
    name = path.rsplit("/models/", 1)[-1].removesuffix(".py").replace("/", ".")
    module = importlib.import_module(f"transformers.models.{name}")
    specs, _ = discover_models(module, path)
    built = []
    for model_spec in specs:
        try:
            built.append(build_model(model_spec, path))
        except Exception:  # noqa: BLE001 - a model reslint cannot build is not the largest one
            continue
    largest = max(outermost(built), key=lambda item: parameter_count(item.model))
    inputs = candidate_inputs(infer_candidates(largest.model)[0], largest.device)
    torch.export.export(largest.model, tuple(inputs.args), dict(inputs.kwargs), strict=False)
    print(largest.spec.name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
