"""The static facts of a file whose CPython AST shows that libcst's tree cannot add to them.

The static engine evaluates a file's module classes and the free functions named like a norm (`fast_layer_norm`,
judged where they are written); a file with neither (a configuration, an image processor, a training script,
a tokenizer that imports torch) gets only its class imports from the engine, which the `ast` index of the
config reader (`ConfigIndex`) reads as libcst's does: the same classes, bases, methods and aliases, so the
same verdict on every class (`FileIndex.is_module_class` looks at the file alone). Such a file is not parsed
by libcst: its parse was a third of a static check of transformers' models, for no fact.
"""

from __future__ import annotations

import ast

from reslint.facts import FileFacts


def facts_without_libcst(path: str, text: str, tree: ast.Module) -> FileFacts | None:
    """The facts the static engine would extract from `text` (`tree`: CPython's AST of it), or None when
    it may find more than class imports: a module class, or a function whose name says norm."""
    if "def forward" in text:  # a module class, nearly always: not worth indexing to find out
        return None
    from reslint.static.index import ConfigIndex

    try:
        index = ConfigIndex(tree, text)
        if any("norm" in name.lower() for name in index.functions) or any(
                index.is_module_class(info) for info in index.classes.values()):
            return None
    except RecursionError:
        return None
    return FileFacts(path=path, engine="static",
                     class_imports={name: dotted for name, dotted in index.aliases.items() if name[:1].isupper()})
