"""libcst's parse without its validation of the nodes its own parser makes.

Every libcst node validates itself when it is made (`CSTNode.__post_init__` calls `_validate`: a whitespace
node matches its text against a regular expression, a name checks it is an identifier, parentheses that
they pair). For a node the parser makes from source that parsed, the checks cannot fail; they were 6 to 11 %
of the parse of transformers' model files (libcst's own comment on `__post_init__` suggests skipping them
when parsing a file). Here they are skipped for the thread that is parsing, and only while it parses: a
node made anywhere else, by a fix or by another library in the same process, is validated as libcst
validates it.

In a process of reslint's own (the console script, a pool worker: `reslint.runner.own_process`) no other
thread makes libcst nodes while one parses (the main thread waits for the deep-stack thread that parses), so
there the check per node is not even asked: during the parse `__post_init__` is object's C-level `__init__`, a
Python call less per node (about 5 % of the parse of transformers' model files).

During the parse each node class also has a faster `__init__` of the same meaning (`faster_init`): a frozen
dataclass's generated `__init__` stores every field with `object.__setattr__`, looked up anew for each field, and
libcst's parser makes every node by calling its class. The one made here stores each field through its slot's
own setter, bound once, and then calls `__post_init__` as the dataclass's does: 8 to 9 % less parse time on
transformers' model files.

In a process of reslint's own the parser is also handed one node for each of the three values that make nearly
half of what it makes: `SimpleWhitespace("")` (31 % of the nodes of transformers' model files), `SimpleWhitespace(" ")`
(9 %) and `Newline(None)` (6 %). libcst's nodes are immutable and a transform rebuilds a tree rather than change
it, so a node used in many places reads as many equal ones (`code`, `deep_equals`); only identity tells them apart,
and no map keyed by node is asked about whitespace here (the engine's walks skip the whitespace fields, positions
and parents are asked of statements and expressions). Making, and later freeing, fewer objects is about 5 % of the
parse.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

_parsing: set[int] = set()  # idents of the threads inside parse_module now
# A forked child has only the thread that forked: another's ident, reused by a thread of the child, must not skip.
os.register_at_fork(after_in_child=lambda: _parsing.intersection_update({threading.get_ident()}))


def _validated_unless_parsing(node: Any, _parsing: set[int] = _parsing, _ident=threading.get_ident) -> None:
    if _ident() not in _parsing:
        node._validate()


def parse_module(source: str | bytes) -> Any:
    """`libcst.parse_module(source)`, its nodes unvalidated."""
    import libcst
    from libcst._nodes.base import CSTNode

    faster, original = _node_inits()  # before the thread counts as parsing: were it to fail, nothing is left skipped
    shared, classes = _shared_nodes()
    ident = threading.get_ident()
    nested = ident in _parsing
    _parsing.add(ident)
    alone = _alone()
    try:
        CSTNode.__post_init__ = object.__init__ if alone else _validated_unless_parsing
        _install(faster)
        if alone:  # no other thread runs meanwhile: one would find functions in libcst's place (`isinstance` fails)
            _expose(libcst, shared)
        return libcst.parse_module(source)
    finally:
        if not nested:
            _parsing.discard(ident)
            CSTNode.__post_init__ = _validated_unless_parsing  # the same function each time: no lock needed
            # Another thread's parse under way meanwhile goes on with libcst's own `__init__`s: slower, not different.
            _install(original)
            _expose(libcst, classes)


def prepare_parse() -> None:
    """Make the faster `__init__`s and the shared nodes now: before a pool forks, so that its workers inherit them
    instead of each making its own at its first parse."""
    _node_inits()
    _shared_nodes()


def _alone() -> bool:
    """Whether this is a process of reslint's own (read from the runner without importing it: a parse for a
    library caller never loads it)."""
    runner = sys.modules.get("reslint.runner")
    return bool(getattr(runner, "own_process", False))


_sharing: tuple[dict[str, Callable], dict[str, type]] | None = None


def _shared_nodes() -> tuple[dict[str, Callable], dict[str, type]]:
    """({name in libcst: what the parser calls instead, handing out one node for each common value}, {name: the
    class}), made once. The parser makes each node by calling the class it looks up in `libcst` by name."""
    global _sharing
    if _sharing is None:
        from libcst._nodes.whitespace import Newline, SimpleWhitespace  # the classes, whatever `libcst` shows now

        common_whitespace = {value: SimpleWhitespace(value) for value in ("", " ")}
        plain_newline = Newline(None)

        def simple_whitespace(value: str) -> SimpleWhitespace:
            node = common_whitespace.get(value)
            return node if node is not None else SimpleWhitespace(value)

        def newline(value: str | None = None) -> Newline:
            return plain_newline if value is None else Newline(value)

        _sharing = ({"SimpleWhitespace": simple_whitespace, "Newline": newline},
                    {"SimpleWhitespace": SimpleWhitespace, "Newline": Newline})
    return _sharing


def _expose(module: types.ModuleType, names: dict[str, Any]) -> None:
    for name, value in names.items():
        setattr(module, name, value)


_inits: tuple[dict[type, Callable], dict[type, Callable]] | None = None


def _node_inits() -> tuple[dict[type, Callable], dict[type, Callable]]:
    """({node class: faster `__init__`}, {node class: libcst's own}) for the classes libcst exports (its parser
    makes nodes of those), made once."""
    global _inits
    if _inits is None:  # two threads' first parses may both make them: alike, and either is kept
        import libcst

        faster, original = {}, {}
        for value in vars(libcst).values():
            if isinstance(value, type) and issubclass(value, libcst.CSTNode):
                init = faster_init(value)
                if init is not None:
                    faster[value], original[value] = init, init.made_from
        _inits = faster, original
    return _inits


def _install(inits: dict[type, Callable]) -> None:
    for cls, init in inits.items():
        cls.__init__ = init


_FROM_FACTORY = object()  # a field's default to be made by its default_factory


def faster_init(cls: type) -> Callable | None:
    """An `__init__` doing what the dataclass `cls`'s own does (same parameters and defaults, a default_factory
    called per node, `__post_init__` called after), storing each field through its slot's setter; None for a class
    whose own `__init__` is not the plain generated one (no dataclass, no Python function, fields kept out of it or
    keyword-only, an `InitVar`, a field without a slot). Its `made_from` is libcst's own, also when `cls` holds a
    faster one now (another thread's parse)."""
    init = cls.__dict__.get("__init__")
    init = getattr(init, "made_from", init)
    if init is None or not dataclasses.is_dataclass(cls):
        return None
    fields = dataclasses.fields(cls)
    code = getattr(init, "__code__", None)  # a C-level or wrapped `__init__` is not the generated one
    if code is None or code.co_kwonlyargcount or \
            list(code.co_varnames[1:code.co_argcount]) != [field.name for field in fields]:
        return None
    namespace: dict[str, Any] = {"_FROM_FACTORY": _FROM_FACTORY}
    parameters, body = [], []
    for field in fields:
        slot = next((klass.__dict__[field.name] for klass in cls.__mro__ if field.name in klass.__dict__), None)
        if type(slot) is not types.MemberDescriptorType:
            return None
        name = field.name
        namespace[f"_set_{name}"] = slot.__set__
        value = name
        if field.default_factory is not dataclasses.MISSING:
            namespace[f"_factory_{name}"] = field.default_factory
            parameters.append(f"{name}=_FROM_FACTORY")
            value = f"_factory_{name}() if {name} is _FROM_FACTORY else {name}"
        elif field.default is not dataclasses.MISSING:
            namespace[f"_default_{name}"] = field.default
            parameters.append(f"{name}=_default_{name}")
        else:
            parameters.append(name)
        body.append(f"    _set_{name}(self, {value})\n")
    if "__post_init__" in code.co_names:
        body.append("    self.__post_init__()\n")
    exec(f"def __init__(self, {', '.join(parameters)}):\n{''.join(body) or '    pass'}\n", namespace)  # noqa: S102
    made = namespace["__init__"]
    made.__qualname__, made.__module__, made.__doc__ = init.__qualname__, init.__module__, init.__doc__
    made.made_from = init
    return made
