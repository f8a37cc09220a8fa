"""reslint: lint PyTorch model code for residual, normalization and gradient-flow bugs."""

__version__ = "0.1.0"


def __getattr__(name: str):
    # `reslint.probe` imports the probe (and, when it runs, torch) only when it is used:
    # `import reslint` stays cheap and torch-free for the static engine.
    if name == "probe":
        from reslint.probing.api import probe

        return probe
    raise AttributeError(f"module 'reslint' has no attribute {name!r}")
