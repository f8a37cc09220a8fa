"""reslint: lint PyTorch model code for residual, normalization and gradient-flow bugs.

The Python API (documented in `reslint.api`):

    reslint.check(paths, *, static=False, select=None, ignore=None, config=None, ...) -> Report
    reslint.check_model(model, inputs=None, *, select=None, ignore=None, ...) -> Report
    reslint.probe(model, inputs=None, *, loss="auto", device=None, steps=1, ...) -> ProbeReport
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reslint.version import __version__

# Imported on first use (module __getattr__): `import reslint` stays cheap and torch-free, and the
# static engine (libcst) and torch load only when a check needs them.
API = ("check", "check_model", "probe", "Report", "Finding", "ModelSummary", "ProbeReport", "ReslintError")
__all__ = ["__version__", *API]

if TYPE_CHECKING:
    from reslint.api import (
        Finding,
        ModelSummary,
        ProbeReport,
        Report,
        ReslintError,
        check,
        check_model,
        probe,
    )


def __getattr__(name: str):
    if name in API:
        from reslint import api

        return getattr(api, name)
    raise AttributeError(f"module 'reslint' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *API})
