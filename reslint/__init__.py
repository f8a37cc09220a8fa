"""reslint: lint PyTorch model code for residual, normalization and gradient-flow bugs."""

__version__ = "0.1.0"
