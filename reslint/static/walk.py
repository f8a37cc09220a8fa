"""A read-only walk over a libcst tree, several times cheaper than `node.visit(visitor)`.

libcst's visit rebuilds (and validates) every node it passes, even for a visitor that only reads:
on transformers' model files two such walks were over half of the static engine's time beyond the
parse. This follows each node's child fields directly and skips the fields that can only hold
whitespace, comments and punctuation. Visitors keep their `visit_<Node>` methods (returning False
still skips the node's children); `leave_` methods are not called, and the order is not the
source's: for visitors that collect, not for those that track a path.
"""

from __future__ import annotations

import dataclasses

from reslint.static.lazy_libcst import LazyLibcst

cst = LazyLibcst(globals())  # see lazy_libcst: the AST-only index imports this module

# Fields that hold only whitespace, comments, parentheses and punctuation tokens: no name,
# call or attribute can be inside them.
PUNCTUATION_FIELDS = frozenset({
    "lpar", "rpar", "lbracket", "rbracket", "lbrace", "rbrace", "comma", "semicolon", "colon", "equal", "dot",
    "leading_lines", "lines_after_decorators", "trailing_whitespace", "header", "footer", "footer_comments",
    "operator", "comment", "newline", "indent", "star_tok", "arrow", "asynchronous",
})

# Field types that are never a node (`Name.value`, `Integer.value`: text): a leaf has no field to look into.
_LEAF_TYPES = (str, bool, int)
_child_fields: dict[type, tuple[str, ...]] = {}
_is_node: dict[type, bool] = {}


def child_fields(kind: type) -> tuple[str, ...]:
    fields = _child_fields.get(kind)
    if fields is None:
        fields = tuple(field.name for field in dataclasses.fields(kind)
                       if not field.name.startswith("whitespace") and field.name not in PUNCTUATION_FIELDS
                       and field.type not in _LEAF_TYPES)
        _child_fields[kind] = fields
    return fields


def is_node(kind: type) -> bool:
    known = _is_node.get(kind)
    if known is None:
        known = _is_node[kind] = issubclass(kind, cst.CSTNode)
    return known


def walk(root: cst.CSTNode, *visitors) -> None:
    """Call each visitor's `visit_<Node>` on `root` and every node under it (a node's children are
    skipped when every visitor that has a method for it returns False)."""
    methods: dict[type, list] = {}
    pending = [root]
    while pending:
        node = pending.pop()
        kind = type(node)
        calls = methods.get(kind)
        if calls is None:
            name = "visit_" + kind.__name__
            calls = methods[kind] = [method for method in (getattr(visitor, name, None) for visitor in visitors) if method]
        if calls:
            if len(calls) == 1:  # the usual case: no list built per node
                if calls[0](node) is False:
                    continue
            elif [call(node) for call in calls].count(False) == len(calls):
                continue
        try:  # a leaf's fields are (), which `.get(kind) or ...` would look up again
            fields = _child_fields[kind]
        except KeyError:
            fields = child_fields(kind)
        for name in fields:  # the hot loop: no helper calls
            value = getattr(node, name)
            value_kind = type(value)
            if value_kind is tuple or value_kind is list:
                for item in value:
                    known = _is_node.get(type(item))
                    if known or (known is None and is_node(type(item))):
                        pending.append(item)
            else:
                known = _is_node.get(value_kind)
                if known or (known is None and is_node(value_kind)):
                    pending.append(value)


_all_fields: dict[type, tuple[str, ...]] = {}


def parents(root: cst.CSTNode) -> dict[cst.CSTNode, cst.CSTNode]:
    """Each node under `root` -> its parent, every field included (libcst's ParentNodeProvider
    without its rebuilding visit)."""
    found: dict[cst.CSTNode, cst.CSTNode] = {}
    pending = [root]
    while pending:
        node = pending.pop()
        kind = type(node)
        fields = _all_fields.get(kind)
        if fields is None:
            fields = _all_fields[kind] = tuple(field.name for field in dataclasses.fields(kind)
                                               if field.type not in _LEAF_TYPES)
        for name in fields:
            value = getattr(node, name)
            value_kind = type(value)
            if value_kind is tuple or value_kind is list:
                for item in value:
                    known = _is_node.get(type(item))
                    if known or (known is None and is_node(type(item))):
                        found[item] = node
                        pending.append(item)
            else:
                known = _is_node.get(value_kind)
                if known or (known is None and is_node(value_kind)):
                    found[value] = node
                    pending.append(value)
    return found


def gather(root: cst.CSTNode, found: dict[type, list], skipped: cst.CSTNode | None = None) -> None:
    """Append every node under `root` (itself included) whose type is a key of `found` to that key's list, in
    `walk`'s order, leaving out the node `skipped` and what is under it: `walk` with one visitor whose visit
    methods are lists' `append`, without a method lookup and a call per node (gathering the class bodies was
    a tenth of the engine's walks)."""
    pending = [root]
    child_fields_of, is_node_kind = _child_fields, _is_node
    while pending:
        node = pending.pop()
        if node is skipped:
            continue
        kind = type(node)
        bucket = found.get(kind)
        if bucket is not None:
            bucket.append(node)
        try:
            fields = child_fields_of[kind]
        except KeyError:
            fields = child_fields(kind)
        for name in fields:
            value = getattr(node, name)
            value_kind = type(value)
            if value_kind is tuple or value_kind is list:
                for item in value:
                    known = is_node_kind.get(type(item))
                    if known or (known is None and is_node(type(item))):
                        pending.append(item)
            else:
                known = is_node_kind.get(value_kind)
                if known or (known is None and is_node(value_kind)):
                    pending.append(value)
