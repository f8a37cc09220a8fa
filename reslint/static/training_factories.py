"""Optimizer and scheduler factories of the project: `self.optimizer = build_optimizer(cfg, params)`,
`self.scheduler = build_scheduler(cfg, optimizer=self.optimizer)`, in this file or another.

A factory is read where it is written (the project index resolves the call), for what the call
site gets back with the configuration's defaults: a scheduler built under
`if cfg.get("scheduling", None) == "noam"` is not built when the key is unset, so such a factory
returns no scheduler by default and the learning rate stays constant. Branches whose condition
does not fold are all possible; a path that raises returns nothing (a factory that refuses to run
without a configured schedule leaves the choice to the config, which is not known: unknown).
Nothing runs.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
import unicodedata
from dataclasses import dataclass

from reslint.project_facts import WARMUP_NO, WARMUP_UNKNOWN, WARMUP_YES

OTHER = "other"  # an abstract value not known statically, besides a schedule's (warmup, detail) and `Known`
MAX_STATEMENTS = 2000  # bound on the statements one factory's reading visits
OPTIMIZERS = frozenset({
    "SGD", "Adam", "AdamW", "Adamax", "Adagrad", "Adadelta", "RMSprop", "NAdam", "RAdam", "Rprop", "ASGD",
    "LBFGS", "SparseAdam", "Adafactor", "Muon",
    # bitsandbytes, apex, DeepSpeed, torch-optimizer, lion-pytorch
    "AdamW8bit", "Adam8bit", "PagedAdamW", "PagedAdamW8bit", "PagedAdamW32bit", "Lion", "Lion8bit",
    "FusedAdam", "FusedLAMB", "FusedSGD", "DeepSpeedCPUAdam", "Lamb", "LAMB", "Ranger", "AdaBelief", "Sophia",
    "create_optimizer_v2",
})
OPTIMIZER_WORD = re.compile(r"\b(?:%s)\b" % "|".join(sorted(OPTIMIZERS, key=len, reverse=True)))


@dataclass(frozen=True)
class Factory:
    name: str
    path: str  # the file defining it (absolute)
    line: int
    optimizers: tuple[str, ...] = ()  # the optimizers it builds and returns ("torch.optim.Adam")
    schedule: tuple[str, str] | None = None  # (warmup, why) of the scheduler it returns by default
    optimizer_parameter: tuple[int, str] | None = None  # (position, name) of its optimizer argument


def factory_of(reader, call: ast.Call) -> Factory | None:
    """The project function `call` calls, read as an optimizer or scheduler factory; None when it is neither
    (or not the project's). `reader`: the calling file's `TrainingReader`."""
    if not isinstance(call.func, ast.Name) or not call.func.id[:1].islower():
        return None
    name = call.func.id
    if name in reader.functions:
        return read_factory(reader, reader.functions[name], reader.path or "")
    dotted = reader.aliases.get(name)
    if dotted is None or reader.path is None:
        return None
    from reslint.project_index import ProjectIndex

    project = ProjectIndex.for_file(reader.path, reader.root)
    resolved = project.resolve(reader.path, dotted)
    if resolved is None:
        return None
    path, function_name = resolved
    source = project.source(path)
    def read() -> Factory | None:
        tree = project.syntax_tree(path) if source is not None else None
        function = next((node for node in (tree.body if tree is not None else ())
                         if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == function_name),
                        None)
        if function is None or cannot_be_factory(source, tree, function):
            return None
        other = type(reader)(tree, str(path), reader.root)  # the caller's reader class: training.TrainingReader
        try:
            other.read()
            return read_factory(other, function, str(path))
        except RecursionError:
            return None

    if str(path) not in reader.config_reads:
        reader.config_reads.append(str(path))  # the caller's result depends on the file the function is in
    return project.memo(("training factory", path, function_name, hashlib.sha1(source or b"").hexdigest()), read)


def cannot_be_factory(source: bytes, tree: ast.Module, function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """`read_factory` would answer None for `function` whatever the rest of its file holds, so the file need not be
    read: no optimizer parameter (no schedule is read), and no optimizer its scope could build and return. An
    optimizer call's name (or the name an alias imports) is spelled in the file, and a factory's optimizer reaches
    the return only through an assigned call of a lowercase name (`_factory_site`)."""
    if optimizer_parameter(function) is not None or spells_an_optimizer(source):
        return False
    return not any(returns_an_assigned_call(scope_mate)
                   for scope_mate in module_scope_functions(tree, function.name))


def spells_an_optimizer(source: bytes) -> bool:
    """Whether the file's text may name an optimizer reslint knows (CPython reads identifiers NFKC-normalised:
    `Ａｄａｍ` is `Adam`; a text not read as UTF-8, or not decodable as such, may name one)."""
    from reslint.project_index import parses_as_utf8_text

    if source.isascii():
        return OPTIMIZER_WORD.search(source.decode("ascii")) is not None
    if not parses_as_utf8_text(source):
        return True
    try:
        text = unicodedata.normalize("NFKC", source.decode("utf-8"))
    except UnicodeDecodeError:
        return True
    return OPTIMIZER_WORD.search(text) is not None


def module_scope_functions(tree: ast.Module, name: str) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions whose scope `TrainingReader` names `name`: those defined outside any function or class."""
    found, todo = [], list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name == name:
                found.append(node)
        elif not isinstance(node, ast.ClassDef):
            todo.extend(child for child in ast.iter_child_nodes(node) if not isinstance(child, ast.expr))
    return found


def returns_an_assigned_call(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """`x = helper(...)` ... `return x`: the shape in which a factory's optimizer leaves `function`."""
    assigned, returned = set(), set()
    for node in ast.walk(function):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and any(
                isinstance(child, ast.Call) and isinstance(child.func, ast.Name) for child in ast.iter_child_nodes(node)):
            assigned.update(ast.unparse(target) for target in (node.targets if isinstance(node, ast.Assign)
                                                               else [node.target]))
        elif isinstance(node, ast.Return) and node.value is not None:
            values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            returned.update(ast.unparse(value) for value in values)
    return not assigned.isdisjoint(returned)


def read_factory(reader, function: ast.FunctionDef | ast.AsyncFunctionDef, path: str) -> Factory | None:
    scope = function.name
    optimizers = tuple(dict.fromkeys(site.api for site in reader.optimizers
                                     if site.scope == scope and site in reader.escaping))
    parameter = optimizer_parameter(function)
    schedule = None
    if parameter is not None and not optimizers:
        schedule = DefaultReturns(reader, function).verdict()
    if not optimizers and schedule is None:
        return None
    return Factory(function.name, os.path.abspath(path), function.lineno, optimizers, schedule, parameter)


def optimizer_parameter(function: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[int, str] | None:
    positional = [arg.arg for arg in function.args.posonlyargs + function.args.args]
    for position, name in enumerate(positional):
        if "optim" in name:
            return position, name
    for arg in function.args.kwonlyargs:
        if "optim" in arg.arg:
            return 10_000, arg.arg
    return None


class DefaultReturns:
    """What a scheduler factory returns with the defaults of the configuration it reads."""

    def __init__(self, reader, function: ast.FunctionDef | ast.AsyncFunctionDef):
        self.reader = reader
        self.function = function
        self.scope = reader.function_scope(function)
        self.returned: list[frozenset] = []
        self.every: set = set()  # every value any return could give, whatever the config
        self.visited = 0

    def verdict(self) -> tuple[str, str] | None:
        """(warmup, why), or None when the function builds no scheduler at all."""
        self.run(self.function.body, {})
        schedules = [value for value in ordered(self.every) if isinstance(value, tuple)]
        if not schedules:
            return None
        where = f"{os.path.basename(self.reader.path or '')}:{self.function.lineno}"
        by_default = frozenset().union(*self.returned) if self.returned else frozenset()
        if by_default == {NO_SCHEDULER}:
            return WARMUP_NO, (f"`{self.function.name}()` ({where}) returns no scheduler with the configuration's "
                               "defaults: the learning rate stays constant")
        if not by_default:  # every default path raises: the configuration must choose one of the schedules
            if all(value == NO_SCHEDULER or isinstance(value, tuple) and value[0] == WARMUP_NO for value in self.every):
                chosen = schedules[0]
                return WARMUP_NO, f"`{self.function.name}()` ({where}) builds no schedule with warmup: {chosen[1]}"
            return WARMUP_UNKNOWN, f"`{self.function.name}()` ({where}) needs the configuration to choose a schedule"
        for wanted in (WARMUP_YES, WARMUP_UNKNOWN):
            for value in ordered(by_default):
                if isinstance(value, tuple) and value[0] == wanted:
                    return wanted, f"`{self.function.name}()` ({where}) by default: {value[1]}"
        if OTHER in by_default:
            return WARMUP_UNKNOWN, f"`{self.function.name}()` ({where}) not resolved statically"
        chosen = next(value for value in ordered(by_default) if isinstance(value, tuple))
        return WARMUP_NO, f"`{self.function.name}()` ({where}) by default: {chosen[1]}"

    def run(self, statements: list[ast.stmt], env: dict) -> dict | None:
        """Run statements on `env` (name -> frozenset of values); None when every path returned or raised."""
        for statement in statements:
            self.visited += 1
            if self.visited > MAX_STATEMENTS:
                self.returned.append(frozenset({OTHER}))
                return None
            if isinstance(statement, ast.Return):
                value = self.returned_value(statement.value, env)
                self.returned.append(value)
                self.every.update(value)
                return None
            if isinstance(statement, ast.Raise):
                return None
            if isinstance(statement, ast.Assign):
                for target in statement.targets:
                    self.assign(target, statement.value, env)
            elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
                self.assign(statement.target, statement.value, env)
            elif isinstance(statement, ast.If):
                decided = self.condition(statement.test, env)
                branches = [statement.body] if decided is True else [statement.orelse] if decided is False else \
                    [statement.body, statement.orelse]
                self.every_value(statement)
                outcomes = [self.run(branch, dict(env)) for branch in branches]
                live = [outcome for outcome in outcomes if outcome is not None]
                if not live:
                    return None
                env = merge(live)
            elif isinstance(statement, (ast.For, ast.While, ast.With, ast.Try, ast.AsyncFor, ast.AsyncWith)):
                for body in ("body", "orelse", "finalbody"):
                    inner = self.run(getattr(statement, body, []) or [], dict(env))
                    if inner is not None:
                        env = merge([env, inner])
        return env

    def every_value(self, statement: ast.If) -> None:
        """Whatever the config chooses: the schedules every branch builds (for a default that raises)."""
        for node in ast.walk(statement):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                value = self.value(node.value, {})
                if any(isinstance(item, tuple) for item in value):
                    self.every.update(value)

    def assign(self, target: ast.expr, value: ast.expr, env: dict) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = self.value(value, env)
        elif isinstance(target, (ast.Tuple, ast.List)):
            values = value.elts if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) \
                else [None] * len(target.elts)
            for inner, item in zip(target.elts, values):
                if isinstance(inner, ast.Name):
                    env[inner.id] = self.value(item, env) if item is not None else frozenset({OTHER})

    def returned_value(self, node: ast.expr | None, env: dict) -> frozenset:
        """The scheduler among what is returned: `return scheduler, step_at` returns `scheduler`."""
        if isinstance(node, ast.Tuple) and node.elts:
            named = [item for item in node.elts if "sched" in ast.unparse(item).lower()]
            node = (named or node.elts)[0]
        return self.value(node, env)

    def value(self, node: ast.expr | None, env: dict) -> frozenset:
        if node is None:
            return frozenset({NO_SCHEDULER})
        if isinstance(node, ast.Name):
            return env.get(node.id, frozenset({OTHER}))
        constant = self.constant(node, env)
        if constant is not UNSET:
            try:
                return frozenset({Known(constant)})
            except TypeError:  # unhashable
                return frozenset({OTHER})
        if isinstance(node, ast.Call):
            verdict = self.reader.schedule_verdict(node, self.scope)
            if verdict is not None:
                return frozenset({verdict})
            last = (self.reader.qualified(node.func) or "").rsplit(".", 1)[-1]
            if "sched" in last.lower() or "warmup" in last.lower() or last.endswith("LR"):
                return frozenset({(WARMUP_UNKNOWN, f"`{last}` not resolved statically")})
        return frozenset({OTHER})

    def condition(self, test: ast.expr, env: dict) -> bool | None:
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = self.condition(test.operand, env)
            return None if inner is None else not inner
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            left, right = self.constant(test.left, env), self.constant(test.comparators[0], env)
            if left is UNSET or right is UNSET:
                return None
            operator = test.ops[0]
            try:
                if isinstance(operator, (ast.Eq, ast.Is)):
                    return left == right
                if isinstance(operator, (ast.NotEq, ast.IsNot)):
                    return left != right
                if isinstance(operator, ast.In):
                    return left in right
                if isinstance(operator, ast.NotIn):
                    return left not in right
            except TypeError:
                return None
            return None
        value = self.constant(test, env)
        return None if value is UNSET else bool(value)

    def constant(self, node: ast.expr, env: dict):
        """A value known with the defaults: literals, names bound to them, `cfg.get("key", default)` on a
        parameter of the factory (the key left out of the config)."""
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            items = [self.constant(item, env) for item in node.elts]
            return UNSET if any(item is UNSET for item in items) else tuple(items)
        if isinstance(node, ast.Name):
            values = env.get(node.id)
            if values is not None and len(values) == 1:
                (value,) = values
                if isinstance(value, Known):
                    return value.value
            return UNSET
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "lower" \
                and not node.args:
            inner = self.constant(node.func.value, env)
            return inner.lower() if isinstance(inner, str) else UNSET
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and isinstance(node.func.value, ast.Name) and node.func.value.id in self.parameters() \
                and node.args and isinstance(node.args[0], ast.Constant):
            return self.constant(node.args[1], env) if len(node.args) > 1 else None
        return UNSET

    def parameters(self) -> set[str]:
        arguments = self.function.args
        return {arg.arg for arg in arguments.posonlyargs + arguments.args + arguments.kwonlyargs}


class Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET = Unset()


@dataclass(frozen=True)
class Known:
    """A constant a name holds with the defaults (`scheduler_name = cfg.get("scheduling", None)`)."""

    value: object


NO_SCHEDULER = Known(None)


def ordered(values) -> list:
    """A set of abstract values in a fixed order (a message must not change between runs)."""
    return sorted(values, key=repr)


def merge(envs: list[dict]) -> dict:
    merged: dict = {}
    for env in envs:
        for name, values in env.items():
            merged[name] = merged.get(name, frozenset()) | values
    return merged
