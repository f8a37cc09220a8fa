"""RL103 fix (unsafe): a final norm after the Pre-LN stack, as GPT-2's `ln_f`.

The constructor gets `self.ln_f = <the blocks' own norm>` after the stack, its width taken from
the blocks' norm with the block's constructor arguments put in (`nn.LayerNorm(d_model)` in
`Block(d_model, n_head)`); forward applies it after the loop over the blocks. Unsafe: the model
gains parameters (old checkpoints lack them) and its outputs change. Refused unless the stack
is run by a `for` loop that reassigns one variable, and the width is an expression of the
model's constructor.
"""

from __future__ import annotations

import libcst as cst

from reslint.findings import Finding
from reslint.fixes.source import InsertAfter, Source, code_of, dotted, method, self_attributes

SAFE = False
TITLE = "add a final norm after the last block"
NORM_NAMES = ("LayerNorm", "RMSNorm")
ATTRIBUTE_NAMES = ("ln_f", "final_norm", "norm_f")


def fix(source: Source, finding: Finding) -> str | None:
    owner, _, attribute = finding.symbol.partition(".")
    cls = source.class_def(owner)
    loop = next(iter(source.at(finding, cst.For)), None) or innermost_loop(source, finding)
    if cls is None or loop is None or method(cls, "__init__") is None:
        return None
    fixed = with_final_norm(source, cls, attribute, loop)
    return source.replaced(cls, fixed) if fixed is not None else None


def with_final_norm(source: Source, cls: cst.ClassDef, attribute: str, loop: cst.For) -> cst.ClassDef | None:
    """`cls` with a final norm built after `self.<attribute>` and applied after `loop`; None: not this form."""
    attributes = self_attributes(cls)
    stack = attributes.get(attribute)
    variable = reassigned(loop)
    name = next((candidate for candidate in ATTRIBUTE_NAMES if candidate not in attributes), None)
    if stack is None or variable is None or name is None:
        return None
    norm = final_norm(source, cls, stack)
    if norm is None:
        return None
    init_line = cst.parse_statement(f"self.{name} = {norm}\n")
    forward_line = cst.parse_statement(f"{variable} = self.{name}({variable})\n")

    def addition(statement: cst.CSTNode) -> cst.BaseStatement | None:
        if isinstance(statement, cst.SimpleStatementLine) and any(small is stack for small in statement.body):
            return init_line
        return forward_line if statement is loop else None

    return cls.visit(InsertAfter(addition))


def innermost_loop(source: Source, finding: Finding) -> cst.For | None:
    """The `for` loop whose body holds the finding's place (`x = self.blocks[i](x)`)."""
    loops = [loop for loop in source.around(finding.line, cst.For) if finding.line in source.lines(loop)]
    return min(loops, key=lambda loop: len(source.lines(loop)), default=None)


def reassigned(loop: cst.For) -> str | None:
    """`x` of `for block in self.blocks: x = block(x)` (the one statement of the loop)."""
    body = loop.body.body if isinstance(loop.body, cst.IndentedBlock) else ()
    if len(body) != 1 or loop.orelse is not None or not isinstance(body[0], cst.SimpleStatementLine):
        return None
    statement = body[0].body[0] if len(body[0].body) == 1 else None
    if not isinstance(statement, cst.Assign) or len(statement.targets) != 1:
        return None
    target = statement.targets[0].target
    return target.value if isinstance(target, cst.Name) and isinstance(statement.value, cst.Call) else None


def final_norm(source: Source, cls: cst.ClassDef, stack: cst.Assign) -> str | None:
    """The blocks' norm, written with the model constructor's own names, e.g. `nn.LayerNorm(d_model)`."""
    built = [call for call in walk(stack.value) if isinstance(call, cst.Call)
             and isinstance(call.func, cst.Name) and source.class_def(call.func.value) is not None]
    if not built:
        return None
    block_call = built[0]
    block = source.class_def(block_call.func.value)
    block_init = method(block, "__init__")
    if block_init is None:
        return None
    norm = next((assignment.value for assignment in self_attributes(block).values()
                 if isinstance(assignment.value, cst.Call) and dotted(assignment.value.func).rsplit(".", 1)[-1] in NORM_NAMES), None)
    if norm is None:
        return None
    arguments = bound_arguments(block_init, block_call)
    if arguments is None:
        return None
    rewritten = norm.visit(Substitute(arguments))
    allowed = model_names(source, cls)
    attributes = {id(node.attr) for node in walk(rewritten) if isinstance(node, cst.Attribute)}
    attributes |= {id(node.keyword) for node in walk(rewritten) if isinstance(node, cst.Arg) and node.keyword}
    free = {node.value for node in walk(rewritten) if isinstance(node, cst.Name) and id(node) not in attributes}
    return code_of(rewritten) if free <= allowed else None


def bound_arguments(init: cst.FunctionDef, call: cst.Call) -> dict[str, cst.BaseExpression] | None:
    """Each parameter of the block's constructor (after self) with the expression the model passes, or its default."""
    params = list(init.params.params)[1:]
    bound: dict[str, cst.BaseExpression] = {}
    positional = [arg for arg in call.args if arg.keyword is None]
    if any(arg.star for arg in call.args) or len(positional) > len(params):
        return None
    for param, arg in zip(params, positional):
        bound[param.name.value] = arg.value
    for arg in call.args:
        if arg.keyword is not None:
            bound[arg.keyword.value] = arg.value
    for param in params:
        if param.name.value not in bound and param.default is not None:
            bound[param.name.value] = param.default
    return bound


class Substitute(cst.CSTTransformer):
    def __init__(self, arguments: dict[str, cst.BaseExpression]):
        super().__init__()
        self.arguments = arguments

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        return updated.with_changes(attr=original.attr)  # only the base of `a.b` is a name to bind

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)  # `eps=` names a parameter, not a value

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        return self.arguments.get(original.value, updated)


def model_names(source: Source, cls: cst.ClassDef) -> set[str]:
    """Names the model's constructor can use: its parameters, module-level names, builtins it needs."""
    init = method(cls, "__init__")
    names = {param.name.value for param in init.params.params}
    for statement in source.module.body:
        if isinstance(statement, (cst.ClassDef, cst.FunctionDef)):
            names.add(statement.name.value)
        for small in getattr(statement, "body", ()) if isinstance(statement, cst.SimpleStatementLine) else ():
            if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
                for alias in small.names:
                    names.add(dotted(alias.asname.name) if alias.asname else dotted(alias.name).split(".")[0])
    return names | {"True", "False", "None", "int"}


def walk(node: cst.CSTNode):
    yield node
    for child in node.children:
        yield from walk(child)
