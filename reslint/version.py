"""reslint's version: a module of its own, so that reporters and the cache can name it without importing
the package's API (`reslint/__init__.py` re-exports it as `reslint.__version__`)."""

__version__ = "0.1.0"
