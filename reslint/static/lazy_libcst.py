"""libcst for a module that needs it only on some of its paths, imported when first used.

The static engine's index (`index.FileIndex`) and walks serve two kinds of file. A file with a module class is
parsed by libcst and indexed with libcst's nodes; a file whose CPython AST shows none (a training script, a data
module, a configuration: `without_libcst`) is indexed from that AST by `index.ConfigIndex`, a FileIndex that never
touches a libcst node. Importing libcst (0.2 s, two thirds of a one-file check) for the second kind is wasted, so
those modules bind `cst` to a `LazyLibcst`: the first attribute asked of it imports libcst and puts the real module
in the importing module's globals, so that every later `cst.Name` there is a plain module attribute again.
"""

from __future__ import annotations


class LazyLibcst:
    """Stands for `libcst` in the module whose globals it is given, under the name `cst`, until first used."""

    __slots__ = ("_namespace",)

    def __init__(self, namespace: dict) -> None:
        self._namespace = namespace

    def __getattr__(self, name: str):
        import libcst

        self._namespace["cst"] = libcst
        return getattr(libcst, name)
