"""RL101 fix (unsafe): Post-LN `norm(x + f(x))` → Pre-LN `x + f(norm(x))`, plus the final norm Pre-LN needs.

Every Post-LN residual of the block is rewritten at once (one left Post-LN would make the block
mixed): `x = self.norm(x + f(x))` becomes `h = self.norm(x)` then `x = x + f(h)` (`return` alike).
Each stack built from the block then gets a final norm after its loop (the RL103 fix), unless the
model already applies a norm after it. Only the simple written form is recognised: the norm is
a LayerNorm/RMSNorm attribute of the block, the skip a name the branch reads, the statement an
assignment to that name or a return, in a forward without `if` (a block configurable as Post-LN
keeps its option). Unsafe: it is another architecture; checkpoints load, but
the trained weights no longer compute what they were trained for.
"""

from __future__ import annotations

import libcst as cst

from reslint.findings import Finding
from reslint.fixes.rl103_final_norm import NORM_NAMES, reassigned, with_final_norm
from reslint.fixes.source import Source, dotted, method, owner_class, self_attributes

SAFE = False
TITLE = "move the norm onto the branch (Pre-LN) and add a final norm"
TEMPORARY_NAMES = ("h", "normed", "x_norm")


def fix(source: Source, finding: Finding) -> str | None:
    block = source.class_def(owner_class(finding))
    if block is None or not calls_a_norm_on_a_sum(block):
        return None
    replacements = pre_ln_statements(source, block)
    if not replacements:
        return None
    classes = {block: block.visit(ReplaceStatements(replacements))}
    for model, attribute, loop in stacks_of(source, block.name.value):
        if normed_after(source, model, loop):
            continue
        fixed = with_final_norm(source, model, attribute, loop)
        if fixed is None:
            return None
        classes[model] = fixed
    spliced = source.replaced_statements(classes)
    return spliced if spliced is not None else source.module.visit(ReplaceNodes(classes)).code


def scope(source: Source, finding: Finding) -> list[range]:
    """The block and the models whose stacks it makes up."""
    block = source.class_def(owner_class(finding))
    if block is None:
        return []
    return [source.lines(block), *(source.lines(model) for model, _, _ in stacks_of(source, block.name.value))]


def block_norms(block: cst.ClassDef) -> set[str]:
    return {name for name, assignment in self_attributes(block).items() if isinstance(assignment.value, cst.Call)
            and dotted(assignment.value.func).rsplit(".", 1)[-1] in NORM_NAMES}


def calls_a_norm_on_a_sum(block: cst.ClassDef) -> bool:
    """Whether the block calls one of its norms on a sum, `self.norm(x + f(x))`, the form the fix rewrites: asked
    of the tree first, as most blocks an RL101 finding names write Post-LN otherwise (`x = self.norm(x)` after
    the add) and the positions of the whole module, which `pre_ln_statements` needs, are then spared."""
    wanted = {f"self.{name}" for name in block_norms(block)}
    return bool(wanted) and any(dotted(call.func) in wanted and len(call.args) == 1 and is_sum(call.args[0].value)
                                for call in calls_in(block))


def calls_in(node: cst.CSTNode) -> list[cst.Call]:
    from reslint.static.walk import walk as walk_tree  # libcst's visit, without rebuilding each node

    visitor = _Calls()
    walk_tree(node, visitor)
    return visitor.found


class _Calls:
    """Module-level, not defined per call: a class is a reference cycle, and one holding the calls it found kept
    the file's libcst tree for the cyclic collector."""

    def __init__(self) -> None:
        self.found: list[cst.Call] = []

    def visit_Call(self, call: cst.Call) -> None:
        self.found.append(call)


def is_sum(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add)


def pre_ln_statements(source: Source, block: cst.ClassDef) -> dict[cst.CSTNode, list[cst.BaseStatement]]:
    """Each Post-LN statement of the block with the Pre-LN statements replacing it; {} unless all are simple."""
    norms = block_norms(block)
    used = {node.value for node in source.within(block, cst.Name)}
    temporary = next((name for name in TEMPORARY_NAMES if name not in used), None)
    replacements: dict[cst.CSTNode, list[cst.BaseStatement]] = {}
    for call in source.within(block, cst.Call):
        if dotted(call.func) not in {f"self.{name}" for name in norms} or len(call.args) != 1:
            continue
        add = call.args[0].value
        if not isinstance(add, cst.BinaryOperation) or not isinstance(add.operator, cst.Add):
            continue  # a Pre-LN norm, or one outside any residual
        rewritten = rewrite(source, call, add, temporary)
        if rewritten is None:
            return {}
        statement, new = rewritten
        replacements[statement] = new
    return replacements


def rewrite(source: Source, call: cst.Call, add: cst.BinaryOperation, temporary: str | None):
    skip = next((side for side in (add.left, add.right) if isinstance(side, cst.Name)), None)
    branch = add.right if skip is add.left else add.left
    small = source.parents.get(call)
    line = source.parents.get(small)
    if skip is None or temporary is None or not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
        return None
    if not any(isinstance(node, cst.Name) and node.value == skip.value for node in walk(branch)) or conditional(source, line):
        return None
    if isinstance(small, cst.Assign):
        targets = small.targets
        if len(targets) != 1 or not isinstance(targets[0].target, cst.Name) or targets[0].target.value != skip.value:
            return None
    elif not isinstance(small, cst.Return):
        return None
    normed = cst.parse_statement(f"{temporary} = {cst.Module([]).code_for_node(call.func)}({skip.value})\n")
    new_branch = branch.visit(Rename(skip.value, temporary))
    residual = cst.BinaryOperation(cst.Name(skip.value), add.operator, new_branch)
    return line, [normed.with_changes(leading_lines=line.leading_lines),
                  line.with_changes(body=[small.with_changes(value=residual)], leading_lines=[])]


def conditional(source: Source, node: cst.CSTNode) -> bool:
    """Whether its function branches (`if self.pre_norm: ...`): a block configurable as Post-LN keeps its option."""
    while node is not None and not isinstance(node, cst.FunctionDef):
        node = source.parents.get(node)
    return node is None or bool(source.within(node, cst.If))


def stacks_of(source: Source, block: str) -> list[tuple[cst.ClassDef, str, cst.For]]:
    """(model class, stack attribute, the loop running it) for each stack of blocks built of `block`."""
    builders = {block}
    classes = [node for node in source.module.body if isinstance(node, cst.ClassDef)]
    while True:  # the classes that build `block`, directly or through others (a SublayerConnection's layer)
        more = {cls.name.value for cls in classes if builds(cls, builders)} - builders
        if not more:
            break
        builders |= more
    found = []
    for model in classes:
        if model.name.value == block or method(model, "forward") is None:
            continue
        for attribute, assignment in self_attributes(model).items():
            if not any(isinstance(node, cst.Call) and dotted(node.func) in builders for node in walk(assignment.value)) \
                    or not dotted(assignment.value.func if isinstance(assignment.value, cst.Call) else assignment.value) \
                    .endswith(("ModuleList", "Sequential")):
                continue
            loops = [loop for loop in source.within(method(model, "forward"), cst.For)
                     if f"self.{attribute}" in cst.Module([]).code_for_node(loop.iter) + code_in(loop)]
            if len(loops) == 1 and reassigned(loops[0]) is not None:
                found.append((model, attribute, loops[0]))
    return found


def builds(cls: cst.ClassDef, names: set[str]) -> bool:
    return any(isinstance(node, cst.Call) and dotted(node.func) in names
               for assignment in self_attributes(cls).values() for node in walk(assignment.value))


def code_in(loop: cst.For) -> str:
    return cst.Module([]).code_for_node(loop.body)


def normed_after(source: Source, model: cst.ClassDef, loop: cst.For) -> bool:
    """Whether forward applies one of the model's norms after the loop."""
    norms = {f"self.{name}" for name, assignment in self_attributes(model).items()
             if isinstance(assignment.value, cst.Call) and dotted(assignment.value.func).rsplit(".", 1)[-1] in NORM_NAMES}
    end = source.end(loop)
    return any(dotted(call.func) in norms and source.start(call) >= end
               for call in source.within(method(model, "forward"), cst.Call))


def walk(node: cst.CSTNode):
    yield node
    for child in node.children:
        yield from walk(child)


class Rename(cst.CSTTransformer):
    def __init__(self, old: str, new: str):
        super().__init__()
        self.old, self.new = old, new

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        return updated.with_changes(attr=original.attr)

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        return updated.with_changes(value=self.new) if original.value == self.old else updated


class ReplaceStatements(cst.CSTTransformer):
    def __init__(self, replacements: dict[cst.CSTNode, list[cst.BaseStatement]]):
        super().__init__()
        self.replacements = replacements

    def leave_SimpleStatementLine(self, original, updated):
        new = self.replacements.get(original)
        return cst.FlattenSentinel(new) if new is not None else updated


class ReplaceNodes(cst.CSTTransformer):
    def __init__(self, replacements: dict[cst.CSTNode, cst.CSTNode]):
        super().__init__()
        self.replacements = replacements

    def on_leave(self, original, updated):
        return self.replacements.get(original, updated)
