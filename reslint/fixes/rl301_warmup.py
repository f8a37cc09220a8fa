"""RL301 fix (unsafe): linear warmup added to the optimizer's existing schedule.

torch: `Sched(optimizer, ...)` → `SequentialLR(optimizer, [LinearLR(optimizer, start_factor=0.01,
total_iters=W), Sched(optimizer, ...)], milestones=[W])`; transformers: `num_warmup_steps=0` of a
`get_*_schedule_with_warmup` → W, `TrainingArguments(warmup_steps=0, max_steps=N)` → W. W is 5% of
the training code's own step count (`num_training_steps`, `T_max`, `total_steps`, `max_steps`, or
the `range(N)` of the loop that steps the optimizer), at least 1. Without a schedule, a
`warmup = LinearLR(optimizer, ...)` is built after the optimizer and stepped after `optimizer.step()`
in that loop. Refused where there is no such count or loop. Unsafe: the first steps' learning rate changes.
"""

from __future__ import annotations

import libcst as cst

from reslint.findings import Finding
from reslint.fixes.source import InsertAfter, Source, code_of, dotted, spelled

SAFE = False
TITLE = "warm the learning rate up linearly over the first 5% of the steps"
TORCH_SCHEDULERS = ("CosineAnnealingLR", "StepLR", "MultiStepLR", "ExponentialLR", "PolynomialLR", "LinearLR",
                    "ConstantLR", "LambdaLR", "CosineAnnealingWarmRestarts")
STEP_KEYWORDS = ("num_training_steps", "T_max", "total_steps", "total_iters", "max_steps")


def fix(source: Source, finding: Finding) -> str | None:
    site = next(iter(source.at(finding, cst.Call)), None)
    function = scope_node(source, finding)
    if site is None or function is None:
        return None
    if dotted(site.func).endswith("TrainingArguments"):
        return training_arguments(source, site)
    optimizer = assigned_name(source, site)
    schedules = [call for call in source.within(function, cst.Call) if call.args and optimizer
                 and code_of(call.args[0].value) == optimizer and call.args[0].keyword is None
                 and schedule_kind(call)]
    if not schedules and optimizer:
        return new_schedule(source, function, site, optimizer)
    if len(schedules) != 1:
        return None
    schedule = schedules[0]
    steps = step_count(source, function, schedule, optimizer)
    if steps is None:
        return None
    warmup = f"max(1, {steps} // 20)"
    if schedule_kind(schedule) == "transformers":
        return with_warmup_steps(source, schedule, 1, warmup)
    prefix = dotted(schedule.func).rpartition(".")[0]
    if not prefix:
        return None
    indent = ""  # libcst indents the continuation lines with the enclosing block
    wrapped = cst.parse_expression(
        f"{prefix}.SequentialLR(\n{indent}    {optimizer},\n{indent}    [\n"
        f"{indent}        {prefix}.LinearLR({optimizer}, start_factor=0.01, total_iters={warmup}),\n"
        f"{indent}        {code_of(schedule)},\n{indent}    ],\n"
        f"{indent}    milestones=[{warmup}],\n{indent})")
    return source.replaced(schedule, wrapped)


def new_schedule(source: Source, function: cst.CSTNode, site: cst.Call, optimizer: str) -> str | None:
    """No schedule: a LinearLR warmup built after the optimizer and stepped after it in the training loop."""
    loops = [loop for loop in source.within(function, cst.For) if stepping(source, loop, optimizer)]
    linear = spelled(source.module, "torch.optim.lr_scheduler.LinearLR")
    names = {node.value for node in source.within(function, cst.Name)}
    if len(loops) != 1 or linear is None or "warmup" in names:
        return None
    steps = loop_count(loops[0])
    step_calls = [call for call in source.within(loops[0], cst.Call) if code_of(call.func) == f"{optimizer}.step"]
    if steps is None or len(step_calls) != 1:
        return None
    built, stepped = source.parents.get(site), source.parents.get(step_calls[0])  # the Assign, the Expr
    created = cst.parse_statement(f"warmup = {linear}({optimizer}, start_factor=0.01, total_iters=max(1, {steps} // 20))\n")
    step = cst.parse_statement("warmup.step()\n")

    def addition(statement: cst.CSTNode) -> cst.BaseStatement | None:
        body = getattr(statement, "body", ())
        if isinstance(statement, cst.SimpleStatementLine) and len(body) == 1:
            return created if body[0] is built else step if body[0] is stepped else None
        return None

    return source.replaced(function, function.visit(InsertAfter(addition)))


def stepping(source: Source, loop: cst.For, optimizer: str) -> bool:
    return any(code_of(call.func) == f"{optimizer}.step" for call in source.within(loop, cst.Call))


def loop_count(loop: cst.For) -> str | None:
    if isinstance(loop.iter, cst.Call) and dotted(loop.iter.func) == "range" and len(loop.iter.args) == 1:
        return operand(loop.iter.args[0].value)
    return None


def scope(source: Source, finding: Finding) -> range:
    """The lines the fix may change: the function holding the finding, or the module's."""
    node = scope_node(source, finding)
    return source.lines(node) if node is not None else range(0)


def scope_node(source: Source, finding: Finding) -> cst.CSTNode | None:
    functions = [node for node in source.around(finding.line, cst.FunctionDef) if finding.line in source.lines(node)]
    return min(functions, key=lambda node: len(source.lines(node)), default=source.module)


def schedule_kind(call: cst.Call) -> str:
    name = dotted(call.func).rsplit(".", 1)[-1]
    if name in TORCH_SCHEDULERS:
        return "torch"
    if name.startswith("get_") and name.endswith("_schedule_with_warmup"):
        return "transformers"
    return ""


def assigned_name(source: Source, call: cst.Call) -> str | None:
    parent = source.parents.get(call)
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
        return parent.targets[0].target.value
    return None


def step_count(source: Source, function: cst.CSTNode, schedule: cst.Call, optimizer: str) -> str | None:
    """The training's step count as code: a schedule argument, else the range of the loop stepping the optimizer."""
    for arg in schedule.args:
        if arg.keyword is not None and arg.keyword.value in STEP_KEYWORDS:
            return operand(arg.value)
    if schedule_kind(schedule) == "transformers" and len(schedule.args) > 2 and schedule.args[2].keyword is None:
        return operand(schedule.args[2].value)
    counts = [loop_count(loop) for loop in source.within(function, cst.For) if stepping(source, loop, optimizer)]
    return next((count for count in counts if count is not None), None)


def operand(node: cst.BaseExpression) -> str:
    text = code_of(node)
    return text if isinstance(node, (cst.Name, cst.Integer, cst.Attribute)) else f"({text})"


def with_warmup_steps(source: Source, schedule: cst.Call, position: int, warmup: str) -> str | None:
    args = list(schedule.args)
    for index, arg in enumerate(args):
        if (arg.keyword is not None and arg.keyword.value == "num_warmup_steps") or (arg.keyword is None and index == position):
            if not (isinstance(arg.value, cst.Integer) and int(arg.value.value) == 0):
                return None
            args[index] = arg.with_changes(value=cst.parse_expression(warmup))
            return source.replaced(schedule, schedule.with_changes(args=args))
    return None


def training_arguments(source: Source, call: cst.Call) -> str | None:
    keywords = {arg.keyword.value: arg for arg in call.args if arg.keyword is not None}
    steps = keywords.get("max_steps")
    if steps is None or "warmup_ratio" in keywords:
        return None
    warmup = cst.parse_expression(f"max(1, {operand(steps.value)} // 20)")
    if "warmup_steps" in keywords:
        current = keywords["warmup_steps"].value
        if not (isinstance(current, cst.Integer) and int(current.value) == 0):
            return None
        args = [arg.with_changes(value=warmup) if arg is keywords["warmup_steps"] else arg for arg in call.args]
    else:
        args = [*call.args, cst.Arg(keyword=cst.Name("warmup_steps"), value=warmup,
                                    equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))]
    return source.replaced(call, call.with_changes(args=args))
