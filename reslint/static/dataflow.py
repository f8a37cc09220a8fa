"""Abstract interpretation of `forward` into a dataflow graph, inlining the file's own modules.

Follows reassigned and renamed temporaries, `+=`, `torch.add`, submodules from `__init__`
(containers, comprehensions, helper modules), callables and lambdas passed as sublayers,
and modules that receive the skip tensor as an argument. Loops run once; `if`s whose
condition folds to a constant take one branch, others take both and merge.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import libcst as cst

from reslint.placement import PLACEMENT_FLAG_WORDS
from reslint.static import torch_api
from reslint.static.shared_inlines import inlined_forward
from reslint.static.values import (MAX_INLINE_DEPTH, MAX_INTEGER_BITS, MAX_SEQUENCE_LENGTH, MAX_STRING_LENGTH,
                                   MAX_STEPS_PER_FILE, MAX_INLINES_PER_FUNCTION, SelfRef, ModRef, ElemRef, QualName,
                                   Method, Function, Lambda, TensorMethod, TupleValue, Const, Shape, Unknown, SHAPE,
                                   UNKNOWN_VALUE, ZipValue, EnumerateValue, SplitValue, RecordValue, DictValue,
                                   optional_input)
from reslint.static.graph import Frame, Graph, Node
from reslint.static.block_returns import SIDE, STREAM, returned_items
from reslint.static.chained_defaults import NO_MODULE, chosen_submodule, parameter_value
from reslint.static.positions import SourceMap
from reslint.static.walk import walk
from reslint.static.index import (CONFIG_OBJECT_NAMES, UNKNOWN, ClassInfo, FileIndex, ModuleSpec, is_self_attr,
                                  literal_number, small_power, string_value)



class BudgetExceeded(Exception):
    """The file's work budget is spent: the evaluation of this class stops."""


@dataclass(frozen=True)
class LimitHit:
    budget: str  # "integer size", "sequence length", "string length", "inlining fan-out", "work per file"
    line: int
    column: int


class FileBudget:
    """What evaluating one file's classes may still cost, shared by all its evaluators."""

    def __init__(self) -> None:
        self.steps = 0
        self.hits: dict[str, LimitHit] = {}  # budget -> where it was first hit

    def hit(self, budget: str, line: int, column: int) -> None:
        self.hits.setdefault(budget, LimitHit(budget, line, column))


_ABSENT = object()  # a name a branch's environment does not hold
_UNFOLDED = object()  # an attribute that holds no number, bool or None the index can fold


@dataclass(eq=False)
class Scope:
    cls: ClassInfo | None
    self_value: SelfRef | None
    frames: tuple
    condition: tuple
    env: dict = field(default_factory=dict)
    returns: list = field(default_factory=list)
    depth: int = 0


class PlainEvaluations:
    """The graphs of a file's classes evaluated on their own (no flag assumed, no constructor arguments), shared by
    the evaluators of one engine run: a class is evaluated so as a model's root and again, with the same
    outcome, to classify it as a norm or not (`Evaluator.class_graph`). Readers only mark a graph's hand-written
    norms, which is idempotent. An evaluation that read a class whose norm classification was under way (a
    cycle of classes) depends on when it ran, and is not kept."""

    def __init__(self, built: set[str] | None = None) -> None:
        # id of a ClassInfo -> (info, graph, undecided, flag_defaults, steps), until its other reader takes it
        self.graphs: dict[int, tuple] = {}
        self.classifying: set[str] = set()  # classes whose norm classification is under way
        self.rooted: set[str] = set()  # classes evaluated as roots
        self.inlined: dict[tuple, object] = {}  # a submodule's inlined call -> its record (shared_inlines)
        self.held: dict[Node, dict] = {}  # a recorded node -> its info when its innermost recorded call ended
        self.attr_folds: dict[tuple, object] = {}  # (class, attribute) -> what `self.attr` folds to (see
        #                                             `Evaluator.fold_self_attr_value`)
        # The classes other classes build (None: any): only they may be classified after their root evaluation,
        # the graph of another (an outermost model's, the largest) is not held for a reader that never comes.
        self.built = built


class Evaluator:
    index_class = FileIndex  # what the project index parses other files into when this evaluator asks
    _handlers: dict[type, object] = {}  # expression type -> `eval_<type>` (None: no handler), found on first use

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        cls._handlers = {}

    def __init__(self, index: FileIndex, positions, path: str):
        self.index = index
        self.budget = file_budget(index)
        self.inlined: dict[int, int] = {}  # id of a FunctionDef -> times inlined
        self.positions = positions
        self.path = path
        self.graph = Graph()
        self.function: cst.FunctionDef | None = None  # the function being run: where its nodes are placed from
        self.next_if = 1  # the number the next undecided `if` takes in the nodes' conditions
        self.recordings: list = []  # the inlined calls being recorded (shared_inlines), innermost last
        self.loops: tuple[int, ...] = ()  # the loops (ids of their statements) being evaluated
        self.norm_class_kinds: dict[str, str | None] = {}
        # Values assumed for configuration flags (`self.normalize_before`) that do not fold, so that
        # every `if` on one flag takes the same branch within one evaluation.
        self.assumptions: dict[str, bool] = {}
        self.undecided: list[str] = []
        self.flag_defaults: dict[str, bool] = {}  # configurable flags whose default is known -> that default
        # RL103's second look at a root: `mask is None` on a forward argument that defaults to None is left
        # undecided (both branches), so the ordinary call without it is in the graph too.
        self.optional_inputs_undecided = False
        # The root called as a user calls it: a forward argument that defaults to None is None (see
        # engine's `_default_call`), where the first look takes it as given.
        self.optional_inputs_default = False
        # Whether the first look took an optional argument as given where the call without it binds a name to
        # another value as it is (`if residual is None: residual = x`): only then may the default call's stream
        # differ, and the engine looks at that call too.
        self.default_call_aliases = False
        # RL103's look through registry loaders of this file's models (`self.encoder = AutoModel.from_config(
        # config.encoder_config)`): (class, attribute) -> the class of the file the registry builds.
        self.loaded_modules: dict[tuple[str, str], str] = {}
        self.root: SelfRef | None = None  # the class evaluated, and how it is built when that is known
        self.returned = UNKNOWN_VALUE  # what the evaluated forward returns, tuples kept (block_returns reads it)
        self.plain_evaluations: PlainEvaluations | None = None
        self.for_classification = False  # `class_graph`'s evaluation of a class, not a root's
        self.read_unfinished = False  # read a norm classification under way (see PlainEvaluations)
        self.classification_steps = 0  # steps spent inside norm classifications this evaluation started

    # ----- entry points ---------------------------------------------------------

    def evaluate_class(self, info: ClassInfo, spec: ModuleSpec | None = None) -> Graph:
        """`spec`: how the class is built (its constructor arguments); its own defaults without one."""
        memo = self.plain_evaluations
        if memo is None or spec is not None or self.assumptions or self.optional_inputs_undecided \
                or self.optional_inputs_default \
                or self.loaded_modules or self.graph.nodes or self.index.classes.get(info.name) is not info:
            return self._evaluate_class(info, spec)
        if not self.for_classification:
            memo.rooted.add(info.name)
        # Each graph has two readers at most (the root, the classification): the second takes it.
        kept = memo.graphs.pop(id(info), None)
        # Reused only within the file's budget, as the evaluation it replaces (an evaluation over it raises there).
        if kept is not None and self.budget.steps + kept[4] <= MAX_STEPS_PER_FILE:
            _, self.graph, undecided, flag_defaults, steps = kept
            self.budget.steps += steps
            self.undecided, self.flag_defaults = list(undecided), dict(flag_defaults)
            self.root = SelfRef(info, None)
            return self.graph
        start = self.budget.steps
        graph = self._evaluate_class(info, spec)
        other_reader_to_come = info.name not in memo.rooted if self.for_classification else (
            info.name not in self.norm_class_kinds and (memo.built is None or info.name in memo.built))
        if other_reader_to_come and not self.read_unfinished:
            memo.graphs[id(info)] = (info, graph, list(self.undecided), dict(self.flag_defaults),
                                     self.budget.steps - start - self.classification_steps)
        return graph

    def _evaluate_class(self, info: ClassInfo, spec: ModuleSpec | None = None) -> Graph:
        forward = self.index.method(info, "forward")
        if forward is None:
            return self.graph
        self_value = SelfRef(info, spec)
        self.root = self_value
        scope = Scope(info, self_value, (Frame("module", info.name),), ())
        args = [self_value] + self._fresh_params(forward, scope, skip_self=True)
        for position, param in enumerate((list(forward.params.posonly_params) + list(forward.params.params))[1:], 1):
            if type(param.default) is cst.Name and param.default.value == "None":
                if self.optional_inputs_default:
                    args[position] = Const(None)
                else:
                    args[position].info["optional"] = True
        result = self.returned = self._run_function(forward, scope, args, {})
        for node in self._nodes_of(result):
            self.graph.outputs.append(node)
        self.graph.default_call_differs = self.default_call_aliases
        return self.graph

    def evaluate_function(self, func: cst.FunctionDef, owner: str = "") -> Graph:
        """A free function's graph; a parameter with a number default (`eps=1e-5`) holds that number."""
        scope = Scope(None, None, (Frame("module", owner),) if owner else (), ())
        params = list(func.params.posonly_params) + list(func.params.params)
        args = [Const(default) if isinstance(default := self.index.fold(None, param.default), (int, float))
                and not isinstance(default, bool) and param.default is not None else fresh
                for param, fresh in zip(params, self._fresh_params(func, scope, skip_self=False))]
        result = self._run_function(func, scope, args, {})
        for node in self._nodes_of(result):
            self.graph.outputs.append(node)
        return self.graph

    def _fresh_params(self, func: cst.FunctionDef, scope: Scope, skip_self: bool) -> list:
        params = list(func.params.posonly_params) + list(func.params.params)
        if skip_self and params:
            params = params[1:]
        return [self._input(p.name.value, p, scope) for p in params]

    def _input(self, name: str, where: cst.CSTNode, scope: Scope) -> Node:
        return self.graph.add("input", (), self.place(where), scope.frames, scope.condition, name=name)

    # ----- helpers -----------------------------------------------------------------

    def position(self, node: cst.CSTNode) -> tuple[int, int]:
        return _position(self.positions, node, self.function)

    def place(self, node: cst.CSTNode):
        """`position(node)`, found when a graph node's place is first read (not bound to this evaluator: a
        recorded call's nodes outlive it)."""
        return partial(_position, self.positions, node, self.function)

    def code(self, node: cst.CSTNode) -> str:
        return _code(self.positions, node, self.function)

    def _read_unseen(self, expr, scope: Scope) -> None:
        """Values a comprehension reads (`[norm(s) for s in states]`): used by code the graph does not hold."""
        for name in _names_in(expr):
            for node in self._nodes_of(scope.env.get(name)):
                self.mark(node, "read_unseen")

    def _nodes_of(self, value) -> list[Node]:
        kind = type(value)
        if kind is Node:
            return [value]
        if kind in _SEQUENCE_VALUES:
            found = []
            for item in value.items:
                found.extend(self._nodes_of(item))
            return found
        return []

    def tensor(self, value) -> Node | None:
        """The Node a value contributes as a tensor operand (None for shapes/unknowns)."""
        if isinstance(value, Node):
            return value
        if isinstance(value, TupleValue):
            nodes = self._nodes_of(value)
            return nodes[0] if nodes else None
        return None

    def operand(self, value, where: cst.CSTNode, scope: Scope) -> Node:
        node = self.tensor(value)
        if node is not None:
            return node
        place = self.place(where)
        if isinstance(value, Const):
            return self.graph.add("const", (), place, scope.frames, scope.condition, value=value.value)
        if isinstance(value, ModRef):
            return self.graph.add("attr", (), place, scope.frames, scope.condition, name=value.path)
        return self.graph.add("const", (), place, scope.frames, scope.condition, value=None)

    def new(self, op: str, inputs, where: cst.CSTNode, scope: Scope, **info) -> Node:
        if self.loops or self.recordings:  # recorded: an empty tuple tells a replay inside a loop to add it
            info.setdefault("loops", self.loops)
        return self.graph.add_node(op, inputs, self.place(where), scope.frames, scope.condition, info)

    # ----- functions and statements --------------------------------------------------

    def _run_function(self, func: cst.FunctionDef, scope: Scope, args: list, kwargs: dict):
        caller, self.function = self.function, func
        try:
            self._bind_params(func.params, scope, args, kwargs)
            self._run_block(func.body, scope)
            return self._merge_returns(scope, func)
        finally:
            self.function = caller

    def _merge_returns(self, scope: Scope, where: cst.CSTNode):
        values = [v for v in scope.returns if not isinstance(v, (Unknown, Const))]
        if not values:
            return scope.returns[0] if scope.returns else UNKNOWN_VALUE
        if len(values) == 1:
            return values[0]
        nodes = [self.tensor(v) for v in values]
        nodes = [n for n in nodes if n is not None]
        if not nodes:
            return values[0]
        if all(isinstance(v, TupleValue) for v in values):
            return values[-1]
        unique = list(dict.fromkeys(nodes))
        if len(unique) == 1:
            return values[0]
        return self.new("phi", unique, where, scope)

    def _bind_params(self, params: cst.Parameters, scope: Scope, args: list, kwargs: dict) -> None:
        positional = list(params.posonly_params) + list(params.params)
        for index, param in enumerate(positional):
            name = param.name.value
            if index < len(args):
                scope.env[name] = args[index]
            elif name in kwargs:
                scope.env[name] = kwargs.pop(name)
            elif param.default is not None:
                scope.env[name] = self._default(param.default)
            else:
                scope.env[name] = self._input(name, param, scope)
        for param in params.kwonly_params:
            name = param.name.value
            if name in kwargs:
                scope.env[name] = kwargs.pop(name)
            elif param.default is not None:
                scope.env[name] = self._default(param.default)
            else:
                scope.env[name] = self._input(name, param, scope)
        if type(params.star_arg) is cst.Param:
            extra = args[len(positional):]
            scope.env[params.star_arg.name.value] = TupleValue(tuple(extra))
        if type(params.star_kwarg) is cst.Param:
            scope.env[params.star_kwarg.name.value] = UNKNOWN_VALUE

    def _default(self, expr: cst.BaseExpression):
        value = self.index.fold(None, expr)
        return UNKNOWN_VALUE if value is UNKNOWN else Const(value)

    def _run_block(self, block, scope: Scope) -> bool:
        """Run statements; returns False once a `return`/`raise` ends the block."""
        body = block.body if type(block) is cst.IndentedBlock else block
        if type(block) is cst.SimpleStatementSuite:
            body = block.body
        for statement in body:
            if not self._run_statement(statement, scope):
                return False
        return True

    def spend(self, where: cst.CSTNode) -> None:
        self.budget.steps += 1
        if self.budget.steps > MAX_STEPS_PER_FILE:
            self.budget.hit("work per file", *self.position(where))
            raise BudgetExceeded

    def bounded(self, value, where: cst.CSTNode):
        """`value`, or Unknown (with the limit noted) when it is a number, tuple or string too big to keep."""
        budget = None
        if isinstance(value, Const):
            if isinstance(value.value, int) and value.value.bit_length() > MAX_INTEGER_BITS:
                budget = "integer size"
            elif isinstance(value.value, str) and len(value.value) > MAX_STRING_LENGTH:
                budget = "string length"
        elif isinstance(value, TupleValue) and len(value.items) > MAX_SEQUENCE_LENGTH:
            budget = "sequence length"
        if budget is None:
            return value
        self.budget.hit(budget, *self.position(where))
        return UNKNOWN_VALUE

    def _run_statement(self, statement, scope: Scope) -> bool:
        budget = self.budget  # `spend`, inline: this runs for every statement
        budget.steps += 1
        if budget.steps > MAX_STEPS_PER_FILE:
            budget.hit("work per file", *self.position(statement))
            raise BudgetExceeded
        kind = type(statement)
        if kind is cst.SimpleStatementLine:
            for small in statement.body:
                if not self._run_small(small, scope):
                    return False
            return True
        if kind in _SMALL_STATEMENTS:
            return self._run_small(statement, scope)
        if kind is cst.If:
            return self._run_if(statement, scope)
        if kind is cst.For:
            self._run_for(statement, scope)
            return True
        if kind is cst.While:
            self.loops += (id(statement),)
            try:
                self._run_block(statement.body, scope)
            finally:
                self.loops = self.loops[:-1]
            return True
        if type(statement) is cst.With:
            for item in statement.items:
                value = self.eval(item.item, scope)
                if item.asname is not None:
                    self.assign(item.asname.name, value, scope)
            return self._run_block(statement.body, scope)
        if type(statement) is cst.Try:
            return self._run_block(statement.body, scope)
        if type(statement) is cst.FunctionDef:
            scope.env[statement.name.value] = Function(statement)
            return True
        return True

    def _run_small(self, small, scope: Scope) -> bool:
        if type(small) is cst.Return:
            scope.returns.append(self.eval(small.value, scope) if small.value is not None else Const(None))
            return False
        if type(small) is cst.Raise:
            return False
        if type(small) is cst.Assign:
            # `states = []`, then `states.append(x)`: the list holds what is appended (RL103 follows the stream).
            value = TupleValue(()) if type(small.value) is cst.List and not small.value.elements \
                else self.eval(small.value, scope)
            for target in small.targets:
                self.assign(target.target, value, scope)
            return True
        if type(small) is cst.AnnAssign:
            if small.value is not None:
                self.assign(small.target, self.eval(small.value, scope), scope)
            return True
        if type(small) is cst.AugAssign:
            left = self.eval(small.target, scope)
            right = self.eval(small.value, scope)
            operator = {cst.AddAssign: "add", cst.SubtractAssign: "sub", cst.MultiplyAssign: "mul",
                        cst.DivideAssign: "div", cst.MatrixMultiplyAssign: "matmul"}.get(type(small.operator))
            if operator is None:
                return True
            if operator == "add" and isinstance(left, TupleValue):
                # `features += (h,)` concatenates, as `features + (h,)` does
                added = right.items if type(right) is TupleValue else (right,)
                self.assign(small.target, TupleValue(left.items + added), scope)
                return True
            result = self.binary(operator, [(left, small.target), (right, small.value)], small, scope)
            self.assign(small.target, result, scope)
            return True
        if type(small) is cst.Expr and not self._appended(small.value, scope):
            result = self.eval(small.value, scope)
            if isinstance(result, Node):
                self.mark(result, "dropped")  # `self.states.append(x)`: the call keeps x somewhere unseen
        return True

    def _appended(self, call, scope: Scope) -> bool:
        """`states.append(x)` on a local list started as `[]`: the list now holds x."""
        if not (type(call) is cst.Call and type(call.func) is cst.Attribute and call.func.attr.value == "append"
                and type(call.func.value) is cst.Name and len(call.args) == 1):
            return False
        held = scope.env.get(call.func.value.value)
        if type(held) is not TupleValue:
            return False
        scope.env[call.func.value.value] = TupleValue(held.items + (self.eval(call.args[0].value, scope),))
        return True

    def assign(self, target, value, scope: Scope) -> None:
        if type(target) is cst.Name:
            scope.env[target.value] = value
        elif type(target) in (cst.Tuple, cst.List):
            elements = [e.value for e in target.elements]
            if isinstance(value, SplitValue):
                for element in elements:
                    self.assign(element, value.node, scope)
            elif isinstance(value, TupleValue) and not isinstance(value, DictValue) and len(value.items) == len(elements):
                for element, item in zip(elements, value.items):
                    self.assign(element, item, scope)
            else:
                for index, element in enumerate(elements):
                    self.assign(element, self.index_value(value, index, element, scope), scope)

    def index_value(self, value, index, where, scope: Scope):
        if isinstance(value, ElemRef) and _grouped_stack(value) is not None and isinstance(index, int):
            return _group_member(value.container, index)
        if isinstance(value, DictValue):
            return value.fields.get(index, UNKNOWN_VALUE)
        if isinstance(value, TupleValue):
            if isinstance(index, int) and -len(value.items) <= index < len(value.items):
                return value.items[index]
            return UNKNOWN_VALUE
        if isinstance(value, Node):
            return self.new("pass", (value,), where, scope, name="getitem", width_changing=True)
        return value if isinstance(value, Shape) else UNKNOWN_VALUE

    def _run_if(self, statement: cst.If, scope: Scope) -> bool:
        decided = self.fold_condition(statement.test, scope)
        if decided is not None and not self.default_call_aliases and self._tests_optional_input(statement.test, scope):
            skipped = statement.body if decided is False else statement.orelse
            self.default_call_aliases = _binds_a_name_to_a_name(skipped)
        if decided is True:
            return self._run_block(statement.body, scope)
        if decided is False:
            if type(statement.orelse) is cst.Else:
                return self._run_block(statement.orelse.body, scope)
            if type(statement.orelse) is cst.If:
                return self._run_if(statement.orelse, scope)
            return True
        self.eval(statement.test, scope)
        if_id, flipped = self._condition_identity(statement.test, scope)
        before = dict(scope.env)
        branches = []
        continues = []
        alternatives = [statement.body]
        if type(statement.orelse) is cst.Else:
            alternatives.append(statement.orelse.body)
        elif type(statement.orelse) is cst.If:
            alternatives.append(statement.orelse)
        else:
            alternatives.append(None)
        for branch_index, body in enumerate(alternatives):
            scope.env = dict(before)
            saved_condition = scope.condition
            scope.condition = saved_condition + ((if_id, branch_index ^ flipped),)
            if body is None:
                flows = True
            elif type(body) is cst.If:
                flows = self._run_if(body, scope)
            else:
                flows = self._run_block(body, scope)
            scope.condition = saved_condition
            if flows:
                branches.append(scope.env)
            continues.append(flows)
        if not branches:
            scope.env = before
            return False
        scope.env = self._merge_envs(branches, statement, scope)
        if len(continues) == 2 and continues == [False, True]:
            # `if c: return a` then more code: the rest of the function is the else branch.
            scope.condition = scope.condition + ((if_id, 1 ^ flipped),)
        return True

    def _condition_identity(self, test, scope: Scope) -> tuple[object, int]:
        """Ifs on the same flag (`if self.pre_norm` / `if not self.pre_norm`) share one identity."""
        flipped = 0
        while type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
            test, flipped = test.expression, flipped ^ 1
        flag = self.flag_of(test, scope)
        if flag is not None:
            return ("flag", flag[0]), flipped ^ flag[3]
        self.next_if += 1
        return self.next_if - 1, 0

    def flag_of(self, test, scope: Scope):
        """The configuration flag a condition reads: (identity, value or UNKNOWN, configurable, negated), or None.

        A flag set from a config field (`config.pre_norm`, directly or through constructor arguments, or
        `kwargs.get("pre_norm", False)`) is named after that field, so every layer reading it is one flag;
        `self.layer_norm_position == "post"` is a flag too. Configurable: its value is a default someone may
        change (a config field or constructor default), not a literal the code fixes.
        """
        if scope.self_value is None:
            return None
        if type(test) is cst.Attribute and _rooted_at_self(test):
            if is_self_attr(test) and test.attr.value == "training" and self.index.attr_value(
                    scope.self_value.cls, "training") is None:
                return None  # nn.Module's train/eval mode (`0.0 if not self.training else p`): no configuration
            if is_self_attr(test):
                return self.flag_source(scope.self_value, test.attr.value) + (0,)
            field = _config_field(test)
            if field is not None:
                return f"config.{field[0]}", self.index.config_field(field[0]), True, 0
            return f"{scope.self_value.cls.name}:{self.code(test)}", UNKNOWN, False, 0
        if type(test) is cst.Comparison and len(test.comparisons) == 1 and type(
                test.comparisons[0].operator) in (cst.Is, cst.IsNot) and is_self_attr(test.left) and \
                type(test.comparisons[0].comparator) is cst.Name and test.comparisons[0].comparator.value == "None" \
                and test.left.attr.value in scope.self_value.cls.built_if:
            # `self.layer_norm is not None` on a submodule built only when a constructor parameter says so
            parameter, builds = scope.self_value.cls.built_if[test.left.attr.value]
            key, value, configurable = self.parameter_source(scope.self_value, parameter)
            if value is UNKNOWN and not any(word in parameter.lower() for word in PLACEMENT_FLAG_WORDS):
                return None  # an open switch of another kind (`use_dropout`): the submodule is taken as built
            built = UNKNOWN if value is UNKNOWN else bool(value) == builds
            return (key or f"{scope.self_value.cls.name}:{parameter}", built, configurable,
                    int(type(test.comparisons[0].operator) is cst.Is))
        if type(test) is cst.Comparison and len(test.comparisons) == 1 and type(
                test.comparisons[0].operator) in (cst.Equal, cst.NotEqual) and type(
                test.comparisons[0].comparator) in (cst.SimpleString, cst.Attribute):
            comparator = test.comparisons[0].comparator
            # A string, or an enum member whose value is one (`NormPosition.POST`, in a file the project index read).
            literal = string_value(comparator) if type(comparator) is cst.SimpleString else (
                None if _rooted_at_self(comparator) else self.index.fold(None, comparator))
            literal = literal if isinstance(literal, str) else None
            inner = self.flag_of(test.left, scope)
            if inner is None or literal is None:
                return None
            key, value, configurable, _ = inner
            equal = value == literal if isinstance(value, str) else UNKNOWN
            return f"{key} == {literal!r}", equal, configurable, int(type(test.comparisons[0].operator) is cst.NotEqual)
        return None

    def flag_source(self, self_value: SelfRef, attr: str) -> tuple[str, object, bool]:
        """(identity, value, configurable) of `self.attr`, followed to the config field or argument it holds."""
        info = self_value.cls
        own = f"{info.name}:self.{attr}"
        expr = self.index.attr_value(info, attr)
        if expr is None:
            return own, UNKNOWN, False
        if type(expr) is cst.Name and expr.value in info.init_defaults:
            key, value, configurable = self.parameter_source(self_value, expr.value)
            return key or own, value, configurable
        field = _config_field(expr)
        if field is not None:
            return f"config.{field[0]}", self._config_value(info, expr, field), True
        return own, self.index.fold(info, expr), False

    def parameter_source(self, self_value: SelfRef, name: str) -> tuple[str, object, bool]:
        """(config field's identity or "", value, configurable) of the constructor parameter `name` of the class
        `self_value` builds: the argument its construction passes, else its default, followed up the chain of
        constructors where it has none (static/chained_defaults)."""
        info = self_value.cls
        passed = self._constructor_arg(self_value.spec, info, name) if self_value.spec else None
        if passed is None:
            return "", parameter_value(self.index, info, name), True
        field = _config_field(passed)
        if field is not None:
            return f"config.{field[0]}", self._config_value(self_value.spec.owner, passed, field), True
        owner = self_value.spec.owner
        forwarded = type(passed) is cst.Name and owner is not None and passed.value in owner.init_defaults
        if forwarded and self.root is not None and self.root.spec is not None and owner is self.root.cls:
            # `FeedForward(layer_norm=layer_norm)` in a layer evaluated as another file builds it.
            outer = self._constructor_arg(self.root.spec, owner, passed.value)
            if outer is not None:
                return "", self.index.fold(None, outer), False
        value = self.index.fold(owner, passed)
        if value is UNKNOWN and forwarded:
            value = parameter_value(self.index, owner, passed.value)  # the owner's required parameter
        return "", value, forwarded

    def _config_value(self, info, expr, field):
        name, default = field
        value = self.index.config_field(name)
        if value is UNKNOWN and default is not None:
            value = self.index.fold(info, default)
        return value

    def _merge_envs(self, envs: list[dict], where, scope: Scope) -> dict:
        merged = dict(envs[0])
        first, others = envs[0], envs[1:]
        for name in set().union(*envs):
            value = first.get(name, _ABSENT)
            if value is not _ABSENT:
                for env in others:
                    if env.get(name, _ABSENT) is not value:
                        break
                else:
                    continue  # the same value in every branch (most names): merged as it is
            values = [env.get(name) for env in envs if name in env]
            if len(values) != len(envs):
                merged[name] = next(v for v in values if v is not None)
                continue
            nodes = [v for v in values if isinstance(v, Node)]
            if len(nodes) == len(values) and len({id(n) for n in nodes}) > 1:
                merged[name] = self.new("phi", list(dict.fromkeys(nodes)), where, scope)
            elif _grown(values) is not None:
                merged[name] = _grown(values)
            else:
                tensor_values = [v for v in values if isinstance(v, (Node, TupleValue))]
                merged[name] = tensor_values[-1] if tensor_values else values[0]
        return merged

    def fold_condition(self, test, scope: Scope):
        """True/False when the condition folds from literals and constructor defaults; None otherwise."""
        if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
            inner = self.fold_condition(test.expression, scope)
            return None if inner is None else not inner
        if type(test) is cst.Name and test.value in scope.env:
            value = scope.env[test.value]
            return bool(value.value) if isinstance(value, Const) else None
        flag = self.flag_of(test, scope)
        if flag is not None:
            key, value, configurable, negated = flag
            for recording in self.recordings:
                recording.flags.add(key)
            if key in self.assumptions:
                return self.assumptions[key] ^ bool(negated)
            if value is UNKNOWN:
                self.undecided_flag(key)
                return None
            if configurable:
                self.flag_default(key, bool(value))
            return bool(value) ^ bool(negated)
        if type(test) is cst.Comparison and len(test.comparisons) == 1:
            comparison = test.comparisons[0]
            if type(comparison.operator) in (cst.Is, cst.IsNot) and type(comparison.comparator) is cst.Name \
                    and comparison.comparator.value == "None":
                left = self.eval(test.left, scope)
                if isinstance(left, Const):
                    is_none = left.value is None
                    return is_none if type(comparison.operator) is cst.Is else not is_none
                if isinstance(left, Node) and optional_input(left):
                    self.optional_input_tested()
                    if self.optional_inputs_undecided:
                        return None
                if isinstance(left, (ModRef, Node)):
                    return type(comparison.operator) is not cst.Is
        return None

    # What an evaluation does beyond adding nodes, also told to the inlined calls being recorded (shared_inlines).

    def mark(self, node: Node, name: str) -> None:
        for recording in self.recordings:
            recording.events.append(("mark", node, name))
        node.info[name] = True

    def optional_input_tested(self) -> None:
        for recording in self.recordings:
            recording.events.append(("optional_tested",))
        self.graph.optional_input_tested = True

    def undecided_flag(self, key: str) -> None:
        for recording in self.recordings:
            recording.events.append(("undecided", key))
        if key not in self.undecided:
            self.undecided.append(key)

    def flag_default(self, key: str, value: bool) -> None:
        for recording in self.recordings:
            recording.events.append(("default", key, value))
        self.flag_defaults.setdefault(key, value)

    def stack_outputs(self, key: str, nodes: list) -> None:
        for recording in self.recordings:
            recording.events.append(("outputs", key, list(nodes)))
        self.graph.stack_outputs.setdefault(key, []).extend(nodes)

    def stack_iteration(self, key: str, where: cst.CSTNode) -> None:
        for recording in self.recordings:
            recording.events.append(("iteration", key, where))
        if key not in self.graph.stack_iterations:  # placed when a stack reads it: most loops are never read
            self.graph.stack_iterations[key] = self.place(where)

    def _tests_optional_input(self, test, scope: Scope) -> bool:
        """`name is None` / `name is not None` on a forward argument of the root that defaults to None."""
        if type(test) is not cst.Comparison or len(test.comparisons) != 1 or type(test.left) is not cst.Name:
            return False
        comparison = test.comparisons[0]
        value = scope.env.get(test.left.value)
        return type(comparison.operator) in (cst.Is, cst.IsNot) and type(comparison.comparator) is cst.Name \
            and comparison.comparator.value == "None" and isinstance(value, Node) and bool(value.info.get("optional"))

    def _constructor_arg(self, spec: ModuleSpec, info: ClassInfo, name: str):
        init = info.methods.get("__init__")
        if init is None:
            return None
        names = [p.name.value for p in list(init.params.posonly_params) + list(init.params.params)][1:]
        position = names.index(name) if name in names else 10_000
        return spec.arg(position, name)

    def _run_for(self, statement: cst.For, scope: Scope) -> None:
        iterable = self.eval(statement.iter, scope)
        element = self.iteration_element(iterable, statement, scope)
        self.assign(statement.target, element, scope)
        self.loops += (id(statement),)
        stack = _unpacked_stack(statement.target, element)
        key = self.stack_key(stack) if stack is not None else ""
        before, frames = dict(scope.env), scope.frames
        if key:
            # `for attn, ff in self.layers: x = attn(x) + x`: the loop body is the block, its adds the stack's.
            scope.frames = frames + (Frame("stack", scope.cls.name if scope.cls else "", key),)
        try:
            self._run_block(statement.body, scope)
        finally:
            self.loops = self.loops[:-1]
            scope.frames = frames
        if key:  # the stream a block hands to the next: the values the body carries over
            carried = [value for name, value in scope.env.items()
                       if name in before and value is not before[name] and isinstance(value, Node)]
            self.stack_outputs(key, carried)

    def iteration_element(self, iterable, where, scope: Scope):
        if isinstance(iterable, ModRef) and iterable.spec.kind == "container":
            self._note_iteration(iterable, where)
            return ElemRef(iterable, None)
        if isinstance(iterable, TupleValue):
            if iterable.items and all(isinstance(i, (ModRef, ElemRef)) for i in iterable.items):
                return iterable.items[0]
            return iterable.items[0] if iterable.items else UNKNOWN_VALUE
        if isinstance(iterable, ZipValue):
            return TupleValue(tuple(self.iteration_element(part, where, scope) for part in iterable.parts))
        if isinstance(iterable, EnumerateValue):
            return TupleValue((Const(0), self.iteration_element(iterable.inner, where, scope)))
        if isinstance(iterable, Node):
            return self.new("pass", (iterable,), where, scope, name="iter", width_changing=True)
        return UNKNOWN_VALUE

    def _note_iteration(self, ref: ModRef, where) -> None:
        key = self.stack_key(ref)
        if key:
            self.stack_iteration(key, where)

    def stack_key(self, ref: ModRef) -> str:
        spec = ref.spec
        if spec.kind != "container" or spec.owner is None:
            return ""
        return f"{spec.owner.name}.{spec.attr or ref.path}"

    # ----- expressions -----------------------------------------------------------------

    def eval(self, expr, scope: Scope):
        if expr is None:
            return Const(None)
        budget = self.budget  # `spend`, inline: this runs for every expression
        budget.steps += 1
        if budget.steps > MAX_STEPS_PER_FILE:
            budget.hit("work per file", *self.position(expr))
            raise BudgetExceeded
        kind = type(expr)
        handler = self._handlers.get(kind, False)
        if handler is False:
            handler = self._handlers[kind] = getattr(type(self), "eval_" + kind.__name__, None)
        if handler is None:
            if isinstance(expr, COMPREHENSIONS):
                self._read_unseen(expr, scope)
            return UNKNOWN_VALUE
        value = handler(self, expr, scope)
        # Only numbers, strings and collections can outgrow their budget: `bounded` is called for those over it,
        # its tests inlined (this runs for every expression).
        kind = type(value)
        if kind is Const:
            number = value.value
            if isinstance(number, int):
                if number.bit_length() > MAX_INTEGER_BITS:
                    return self.bounded(value, expr)
            elif isinstance(number, str) and len(number) > MAX_STRING_LENGTH:
                return self.bounded(value, expr)
        elif kind in _SEQUENCE_VALUES and len(value.items) > MAX_SEQUENCE_LENGTH:
            return self.bounded(value, expr)
        return value

    def eval_Name(self, expr: cst.Name, scope: Scope):
        name = expr.value
        if name in scope.env:
            return scope.env[name]
        if name == "self" and scope.self_value is not None:
            return scope.self_value
        if name in ("True", "False", "None"):
            return Const({"True": True, "False": False, "None": None}[name])
        if name in self.index.functions:
            return Function(self.index.functions[name])
        if name in self.index.classes:
            return QualName(name)
        if name in self.index.constants:
            value = self.index.fold(None, self.index.constants[name])
            return UNKNOWN_VALUE if value is UNKNOWN else Const(value)
        qualified = self.index.aliases.get(name)
        if qualified is not None:
            return QualName(qualified)
        if name in ("range", "len", "enumerate", "zip", "isinstance", "getattr", "hasattr", "tuple", "list",
                    "int", "float", "min", "max", "sum", "super", "print", "dict"):
            return QualName(name)
        return UNKNOWN_VALUE

    def eval_Integer(self, expr, scope):
        value = literal_number(expr)
        return UNKNOWN_VALUE if value is UNKNOWN else Const(value)

    def eval_Float(self, expr, scope):
        return self.eval_Integer(expr, scope)

    def eval_SimpleString(self, expr, scope):
        value = string_value(expr)
        return UNKNOWN_VALUE if value is None else Const(value)

    def eval_ConcatenatedString(self, expr, scope):
        return Const("")

    def eval_FormattedString(self, expr, scope):
        return Const("")

    def eval_Tuple(self, expr: cst.Tuple, scope):
        return TupleValue(tuple(self.eval(e.value, scope) for e in expr.elements))

    eval_List = eval_Tuple

    def eval_Dict(self, expr, scope):
        """`{"logits": x, ...}`: the values by key, so a returned dict carries the stream to the output (ESM's result)."""
        fields = {}
        for position, element in enumerate(expr.elements):
            value = self.eval(element.value, scope)
            if isinstance(element, cst.DictElement):
                key = self.eval(element.key, scope)
                fields[key.value if isinstance(key, Const) else (position,)] = value
        return DictValue([], fields)

    def eval_ListComp(self, expr, scope):
        """`(part.view(b, t, h, -1) for part in (q, k, v))`: one value per item of a collection the engine holds
        (a tuple, a list built by appends, their zip or enumerate); over anything else (a module list, a
        range), what it reads is used by code the graph does not hold."""
        clause = expr.for_in
        items = self._comprehension_items(self.eval(clause.iter, scope)) if clause.inner_for_in is None else None
        if items is None:
            self._read_unseen(expr, scope)
            return UNKNOWN_VALUE
        outer = scope.env
        scope.env = dict(outer)  # the loop variable stays inside the comprehension
        try:
            results = []
            for item in items:
                self.assign(clause.target, item, scope)
                results.append(self.eval(expr.elt, scope))
        finally:
            scope.env = outer
        return TupleValue(tuple(results))

    eval_GeneratorExp = eval_SetComp = eval_ListComp

    def _comprehension_items(self, iterable) -> list | None:
        if type(iterable) in (TupleValue, SplitValue, RecordValue):
            if any(isinstance(item, (ModRef, ElemRef)) for item in iterable.items):
                return None  # modules run one after another or side by side: not a value's collection
            return list(iterable.items)
        if isinstance(iterable, ZipValue):
            parts = [self._comprehension_items(part) for part in iterable.parts]
            if not parts or any(part is None for part in parts):
                return None
            return [TupleValue(group) for group in zip(*parts)]
        if isinstance(iterable, EnumerateValue):
            inner = self._comprehension_items(iterable.inner)
            return None if inner is None else [TupleValue((Const(position), item)) for position, item in enumerate(inner)]
        return None

    def eval_Lambda(self, expr: cst.Lambda, scope):
        # The lambda's own scope less its names (call_lambda reads the class, self and frames): the scope's names
        # may come to hold the lambda, a cycle keeping the file's tree for the cyclic collector.
        return Lambda(expr, dict(scope.env), Scope(scope.cls, scope.self_value, scope.frames, scope.condition))

    def eval_IfExp(self, expr: cst.IfExp, scope):
        decided = self.fold_condition(expr.test, scope)
        if decided is not None and not self.default_call_aliases and self._tests_optional_input(expr.test, scope):
            self.default_call_aliases = type(expr.body if decided is False else expr.orelse) is cst.Name
        if decided is True:
            return self.eval(expr.body, scope)
        if decided is False:
            return self.eval(expr.orelse, scope)
        body = self.eval(expr.body, scope)
        orelse = self.eval(expr.orelse, scope)
        if isinstance(body, Node) and isinstance(orelse, Node) and body is not orelse:
            return self.new("phi", (body, orelse), expr, scope)
        if isinstance(body, (Node, TupleValue)):
            return body
        return orelse

    def eval_UnaryOperation(self, expr: cst.UnaryOperation, scope):
        value = self.eval(expr.expression, scope)
        if isinstance(value, Const) and isinstance(value.value, (int, float)):
            if type(expr.operator) is cst.Minus:
                return Const(-value.value)
            return value
        if isinstance(value, Node):
            return self.new("neg" if type(expr.operator) is cst.Minus else "pass", (value,), expr, scope)
        return value

    def eval_BooleanOperation(self, expr, scope):
        self.eval(expr.left, scope)
        self.eval(expr.right, scope)
        return UNKNOWN_VALUE

    def eval_Comparison(self, expr, scope):
        self.eval(expr.left, scope)
        return UNKNOWN_VALUE

    def eval_Subscript(self, expr: cst.Subscript, scope):
        value = self.eval(expr.value, scope)
        index = None
        if len(expr.slice) == 1 and type(expr.slice[0].slice) is cst.Index:
            folded = self.eval(expr.slice[0].slice.value, scope)
            if isinstance(folded, Const) and (isinstance(folded.value, int) or isinstance(value, DictValue)):
                index = folded.value
        if isinstance(value, ModRef) and value.spec.named and len(expr.slice) == 1 and type(
                expr.slice[0].slice) is cst.Index:
            key = self.eval(expr.slice[0].slice.value, scope)
            if isinstance(key, Const) and key.value in value.spec.named:
                return ModRef(value.spec.named[key.value], f"{value.path}[{key.value!r}]")
        if isinstance(value, ModRef) and value.spec.kind == "container" and len(expr.slice) == 1 and type(
                expr.slice[0].slice) is cst.Slice:
            return value  # self.layers[:n] still runs the stack
        if isinstance(value, ModRef) and value.spec.kind == "container":
            if value.spec.repeated and index is None:
                self._note_iteration(value, expr)
            return ElemRef(value, index)
        if isinstance(value, (Shape,)):
            return SHAPE
        if isinstance(value, Node):
            # Index tensors (masks, positions) are data too, but slicing a stream keeps its source.
            for element in expr.slice:
                if type(element.slice) is cst.Index:
                    self.eval(element.slice.value, scope)
            return self.new("pass", (value,), expr, scope, name="getitem", width_changing=True)
        return self.index_value(value, index, expr, scope)

    def eval_Attribute(self, expr: cst.Attribute, scope):
        attr = expr.attr.value
        base = self.eval(expr.value, scope)
        if isinstance(base, SelfRef):
            chosen = chosen_submodule(self.index, base.cls, attr, lambda name: self.parameter_source(base, name)[1]) \
                if attr in base.cls.attr_values else None
            if chosen is not None:
                return Const(None) if chosen is NO_MODULE else ModRef(chosen, f"self.{attr}")
            spec = self.index.submodule(base.cls, attr)
            if spec is not None and spec.kind != "passed":
                return ModRef(spec, f"self.{attr}")
            if spec is not None and spec.kind == "passed":
                passed = self._passed_module(base, spec)
                if passed is not None:
                    return passed
                return ModRef(spec, f"self.{attr}")
            method = self.index.method(base.cls, attr) or self._chosen_method(base.cls, attr)
            if method is not None:
                return Method(base, method)
            loaded = self.loaded_modules.get((base.cls.name, attr))
            if loaded is not None:
                return ModRef(ModuleSpec("local", loaded, None, base.cls, attr=attr), f"self.{attr}")
            if attr in ("training",):
                return UNKNOWN_VALUE
            value = self.fold_self_attr_value(base, attr)
            if value is not None:
                return value
            if _activation_lookup(self.index.attr_value(base.cls, attr)):
                return self.new("attr", (), expr, scope, name=f"self.{attr}", activation=True)
            return self.new("attr", (), expr, scope, name=f"self.{attr}")
        if isinstance(base, ModRef) and base.spec.kind == "container" and attr in base.spec.named:
            return ModRef(base.spec.named[attr], f"{base.path}.{attr}")
        if isinstance(base, ModRef) and base.spec.kind == "local" and base.spec.name in self.index.classes:
            # `self.quantizer.encode(x)`, `self.visual.forward_post(x)`: another method of a submodule of this file.
            info = self.index.classes[base.spec.name]
            method = self.index.method(info, attr)
            if method is not None and attr != "forward":
                return Method(SelfRef(info, base.spec), method)
        if isinstance(base, QualName):
            return QualName(f"{base.name}.{attr}")
        if isinstance(base, Node):
            if attr in torch_api.SHAPE_ATTRIBUTES:
                return SHAPE
            if attr in ("T", "mT", "H", "real", "data"):
                return self.new("pass", (base,), expr, scope, name=attr, width_changing=attr != "data")
            return TensorMethod(base, attr)
        if isinstance(base, RecordValue) and attr in base.fields:
            return base.fields[attr]
        if isinstance(base, TupleValue):
            nodes = self._nodes_of(base)
            if nodes and attr not in torch_api.SHAPE_ATTRIBUTES:
                # model outputs with fields (`outputs.last_hidden_state`): the first tensor is the stream
                return nodes[0]
            return SHAPE if nodes else UNKNOWN_VALUE
        if isinstance(base, Shape):
            return SHAPE
        return UNKNOWN_VALUE

    def _chosen_method(self, info: ClassInfo, attr: str) -> cst.FunctionDef | None:
        """`self.compute_att_score = self.compute_attention_score` in `__init__`: the method it names."""
        chosen = self.index.attr_value(info, attr)
        if type(chosen) is cst.Attribute and is_self_attr(chosen) and chosen.attr.value != attr:
            return self.index.method(info, chosen.attr.value)
        return None

    def _passed_module(self, self_value: SelfRef, spec: ModuleSpec):
        """A module handed to the constructor (`self.ffn = ffn`): resolve it from the call site when known."""
        if self_value.spec is None:
            return None
        passed = self._constructor_arg(self_value.spec, self_value.cls, spec.name)
        if passed is None:
            return None
        owner = self_value.spec.owner
        if owner is None:
            return None
        resolved = self.index.spec_from_expr(owner, passed, {})
        if resolved is None and type(passed) is cst.Attribute and is_self_attr(passed):
            resolved = self.index.submodule(owner, passed.attr.value)
        if resolved is None or resolved.kind == "passed":
            return None
        return ModRef(resolved, f"self.{spec.attr}")

    def fold_self_attr_value(self, self_value: SelfRef, attr: str):
        memo = self.plain_evaluations
        if memo is None:
            folded = self._folded_self_attr(self_value.cls, attr)
        else:
            # What the class's `self.attr` folds to reads the file's index only: found once per file.
            key = (self_value.cls, attr)
            folded = memo.attr_folds.get(key, _ABSENT)
            if folded is _ABSENT:
                folded = memo.attr_folds[key] = self._folded_self_attr(self_value.cls, attr)
        return None if folded is _UNFOLDED else Const(folded)  # a Const of its own at each read, as before

    def _folded_self_attr(self, info: ClassInfo, attr: str):
        """The number, bool or None `self.attr` of `info` holds, else _UNFOLDED."""
        expr = self.index.attr_value(info, attr)
        if expr is None:
            return _UNFOLDED
        value = self.index.fold(info, expr)
        if value is UNKNOWN or isinstance(value, bool) is False and not isinstance(value, (int, float)):
            return None if value is None else _UNFOLDED
        return value

    def eval_BinaryOperation(self, expr: cst.BinaryOperation, scope):
        operator = {cst.Add: "add", cst.Subtract: "sub", cst.Multiply: "mul", cst.Divide: "div",
                    cst.MatrixMultiply: "matmul", cst.Power: "pow", cst.FloorDivide: "div",
                    cst.Modulo: "func"}.get(type(expr.operator), "func")
        if operator == "add":
            terms = self._flatten_sum(expr)
            values = [(self.eval(term, scope), term) for term in terms]
            return self.binary("add", values, expr, scope)
        left = self.eval(expr.left, scope)
        right = self.eval(expr.right, scope)
        return self.binary(operator, [(left, expr.left), (right, expr.right)], expr, scope)

    def _flatten_sum(self, expr, top: bool = True) -> list:
        """`a + b + c` → [a, b, c]; a parenthesised inner sum stays one term."""
        if type(expr) is cst.BinaryOperation and type(expr.operator) is cst.Add and (top or not expr.lpar):
            return self._flatten_sum(expr.left, False) + self._flatten_sum(expr.right, False)
        return [expr]

    def binary(self, operator: str, operands: list, where, scope: Scope):
        values = [value for value, _ in operands]
        if all(isinstance(v, Const) and isinstance(v.value, (int, float)) for v in values):
            return self.bounded(self._fold_binary(operator, [v.value for v in values]), where)
        if any(isinstance(v, TupleValue) for v in values) and operator == "add":
            items = ()
            for value in values:
                items += value.items if isinstance(value, TupleValue) else (value,)
                if len(items) > MAX_SEQUENCE_LENGTH:
                    return self.bounded(TupleValue(items), where)
            return TupleValue(items)
        if not any(isinstance(v, Node) for v in values):
            return SHAPE if any(isinstance(v, Shape) for v in values) else UNKNOWN_VALUE
        kept = _unit_scaled(operator, [self._scale_factor(value, scope) for value in values])
        if kept is not None:  # `self.alpha * residual` with alpha's default 1.0: the skip is not scaled
            return kept
        inputs = [self.operand(value, term, scope) for value, term in operands]
        if operator != "add":  # only residual adds show their terms; rendering each level of a chain is quadratic
            return self.new(operator, inputs, where, scope)
        # the terms' text, read only for the adds that are residual connections (see Residual.terms)
        texts = partial(_codes, self.positions, [term for _, term in operands], self.function)
        return self.new(operator, inputs, where, scope, terms=texts)

    def _scale_factor(self, value, scope: Scope):
        """A number stored from a constructor argument (`self.alpha = alpha`, indexed as a possible module):
        the value the class is built with, else the argument's default; any other value as it is."""
        if not (isinstance(value, ModRef) and value.spec.kind == "passed" and scope.self_value is not None):
            return value
        info, built = scope.self_value.cls, scope.self_value.spec
        passed = self._constructor_arg(built, info, value.spec.name) if built is not None else None
        number = self.index.fold(built.owner, passed) if passed is not None else self.index.fold(
            info, info.init_defaults.get(value.spec.name))
        return Const(number) if isinstance(number, (int, float)) else value

    def _fold_binary(self, operator, numbers):
        try:
            result = numbers[0]
            for number in numbers[1:]:
                if operator == "pow" and not small_power(result, number):
                    return UNKNOWN_VALUE
                if isinstance(result, int) and result.bit_length() > MAX_INTEGER_BITS:
                    return Const(result)  # too big already: `bounded` notes it, nothing more is computed
                result = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
                          "div": lambda a, b: a / b, "pow": lambda a, b: a ** b}[operator](result, number)
            return Const(result)
        except (KeyError, ZeroDivisionError, OverflowError, TypeError, ValueError):
            return UNKNOWN_VALUE

    # ----- calls ---------------------------------------------------------------------------

    def eval_Call(self, expr: cst.Call, scope: Scope):
        callee = self.eval(expr.func, scope)
        args, kwargs = [], {}
        for arg in expr.args:
            value = self.eval(arg.value, scope)
            if arg.keyword is not None:
                kwargs[arg.keyword.value] = value
            elif arg.star == "*" and isinstance(value, TupleValue) and not isinstance(value, DictValue):
                args.extend(value.items)
            elif arg.star == "":
                args.append(value)
        return self.call(callee, args, kwargs, expr, scope)

    def call(self, callee, args: list, kwargs: dict, where: cst.Call, scope: Scope):
        called = callee.spec.name if isinstance(callee, ModRef) and callee.spec.kind != "container" else (
            callee.func.name.value if isinstance(callee, Function) else getattr(callee, "name", None))
        if isinstance(called, str) and _is_stochastic_depth(called):
            data = self._data_args(args, kwargs)[:1]
            return self.new("dropout", data, where, scope, name=self.code(where.func)) if data else UNKNOWN_VALUE
        if isinstance(callee, ModRef):
            return self.call_module(callee, args, kwargs, where, scope)
        if isinstance(callee, ElemRef):
            return self.call_element(callee, args, kwargs, where, scope)
        if isinstance(callee, Method):
            return self.inline(callee.func, callee.owner, args, kwargs, where, scope)
        if isinstance(callee, Function):
            return self.inline(callee.func, None, args, kwargs, where, scope)
        if isinstance(callee, Lambda):
            return self.call_lambda(callee, args, kwargs, where, scope)
        if isinstance(callee, TensorMethod):
            return self.call_tensor_method(callee, args, kwargs, where, scope)
        if isinstance(callee, QualName):
            return self.call_qualified(callee.name, args, kwargs, where, scope)
        if isinstance(callee, Node):
            # A callable handed in as an argument (`sublayer(x)`): an opaque sublayer.
            inputs = self._data_args(args, kwargs)
            activation = {"activation": True} if callee.info.get("activation") else {}
            return self.new("call", inputs, where, scope, name=self.code(where.func), **activation)
        inputs = self._data_args(args, kwargs)
        if inputs:
            name = self.code(where.func)
            # An attention kernel picked at run time (`attention_interface(self, q, k, v, mask)`): attention.
            attention = len(inputs) >= 3 and any(word in name.lower() for word in ("attention", "attn"))
            return self.new("func", inputs, where, scope, name=name, **({"attention": True} if attention else {}))
        return UNKNOWN_VALUE

    def _data_args(self, args, kwargs) -> list[Node]:
        nodes = []
        for values in (args, kwargs.values()):
            for value in values:
                kind = type(value)
                if kind is Node:
                    nodes.append(value)
                elif kind in _SEQUENCE_VALUES:
                    nodes.extend(self._nodes_of(value))
        return list(dict.fromkeys(nodes))

    def call_lambda(self, callee: Lambda, args, kwargs, where, scope: Scope):
        inner = Scope(callee.scope.cls, callee.scope.self_value, callee.scope.frames, scope.condition,
                      env=dict(callee.closure), depth=scope.depth + 1)
        self._bind_params(callee.node.params, inner, list(args), dict(kwargs))
        return self.eval(callee.node.body, inner)

    def inline(self, func: cst.FunctionDef, owner: SelfRef | None, args, kwargs, where, scope: Scope):
        self.inlined[id(func)] = self.inlined.get(id(func), 0) + 1
        for recording in self.recordings:
            recording.functions.add(func.name.value)
            recording.depth = max(recording.depth, scope.depth)
            recording.inlines[id(func)] = recording.inlines.get(id(func), 0) + 1
        if self.inlined[id(func)] > MAX_INLINES_PER_FUNCTION:
            self.budget.hit("inlining fan-out", *self.position(where))
        if scope.depth >= MAX_INLINE_DEPTH or self.inlined[id(func)] > MAX_INLINES_PER_FUNCTION or any(
                f.kind == "function" and f.name == func.name.value for f in scope.frames):
            inputs = self._data_args(args, kwargs)
            return self.new("func", inputs, where, scope, name=func.name.value) if inputs else UNKNOWN_VALUE
        frames = scope.frames + (Frame("function", func.name.value),)
        inner = Scope(owner.cls if owner else None, owner, frames, scope.condition, depth=scope.depth + 1)
        call_args = list(args)
        static = any(type(d.decorator) is cst.Name and d.decorator.value == "staticmethod"
                     for d in func.decorators)
        if func.params.params and func.params.params[0].name.value in ("self", "cls") and not static:
            call_args = [owner if owner is not None else UNKNOWN_VALUE] + call_args
        return self._run_function(func, inner, call_args, dict(kwargs))

    def call_element(self, ref: ElemRef, args, kwargs, where, scope: Scope):
        container = ref.container
        elements = container.spec.elements
        if not elements:
            inputs = self._data_args(args, kwargs)
            return self.new("module", inputs, where, scope, name=container.path)
        # `self.layers[i]` in a loop runs a stack; `self.sublayer[0]` picks one module of a container.
        key = self.stack_key(container) if container.spec.repeated and ref.index is None else ""
        if ref.index is not None and not container.spec.repeated and -len(elements) <= ref.index < len(elements):
            chosen = [elements[ref.index]]
        else:
            chosen = list(elements)
        results = []
        for element in chosen:
            results.append(self.call_module(ModRef(element, f"{container.path}[i]"), args, dict(kwargs), where,
                                            scope, stack_key=key))
        if key:
            for result in results:
                self.stack_outputs(key, self._nodes_of(result)[:1])
        nodes = [n for r in results for n in self._nodes_of(r)[:1]]
        if len(results) == 1 or not nodes:
            return results[0]
        if len(set(map(id, nodes))) == 1:
            return results[0]
        return self.new("phi", list(dict.fromkeys(nodes)), where, scope)

    def call_module(self, ref: ModRef, args, kwargs, where, scope: Scope, stack_key: str = ""):
        spec = ref.spec
        if spec.kind == "container":
            return self.call_container(ref, args, kwargs, where, scope)
        if spec.kind == "local":
            # The call's text only where a node keeps it: an inlined module's call has none (placing the
            # statement to read it costs more than the inlining)
            info = self.index.classes[spec.name]
            norm_kind = self.norm_class_kind(info)
            for recording in self.recordings:
                recording.classes.add(info.name)
                recording.modules.add(info.name)
                recording.depth = max(recording.depth, scope.depth)
            data = self._data_args(args, kwargs)
            if norm_kind is not None:
                return self.new("norm", data[:1], where, scope, norm_kind=norm_kind, name=self._call_name(ref, where),
                                norm_form="hand-written", module_class=info.name)
            forward = self.index.method(info, "forward")
            recursive = any(f.kind == "module" and f.name == info.name for f in scope.frames)
            if forward is None or recursive or scope.depth >= MAX_INLINE_DEPTH:
                return self.new("module", data, where, scope, name=self._call_name(ref, where), module_class=info.name)
            frames = scope.frames
            if stack_key:
                frames = frames + (Frame("stack", info.name, stack_key),)
            frames = frames + (Frame("module", info.name),)
            inner = Scope(info, SelfRef(info, spec), frames, scope.condition, depth=scope.depth + 1)
            result = inlined_forward(self, info, spec, forward, inner, SelfRef(info, spec), args, kwargs, scope)
            if not self._nodes_of(result) and data:
                return self.new("module", data, where, scope, name=self._call_name(ref, where), module_class=info.name)
            return result
        name = self._call_name(ref, where)
        data = self._data_args(args, kwargs)
        if spec.kind == "builtin":
            return self.call_builtin_module(spec, data, where, scope, name)
        if spec.kind == "unknown":
            return self.new("func", data, where, scope, name=name) if data else UNKNOWN_VALUE
        if spec.kind == "external" and spec.name in torch_api.SHAPE_ONLY_LAYERS and data:
            # einops' Rearrange/Reduce: views and pooling, with no parameters (the stream goes on through them)
            return self.new("pass" if torch_api.SHAPE_ONLY_LAYERS[spec.name] else "func", data[:1], where, scope,
                            name=name, width_changing=True)
        if spec.kind in ("external", "passed", "classref"):
            kind = (torch_api.norm_kind_from_name(spec.name) or self.index.imported_norm_kind(spec.name, type(self))
                    if spec.kind == "external" else None)
            if kind is not None:
                return self.new("norm", data[:1], where, scope, norm_kind=kind, name=name, norm_form="module")
            if not data:
                return UNKNOWN_VALUE
            if spec.kind == "external":  # a class of another file: RL103 asks whether this one normalises its output
                node = self.new("module", data, where, scope, name=name, module=spec.name, imported_class=spec.name)
                kinds = returned_items(self.index, spec, evaluate_returns) if stack_key else ()
                items = [self._returned_item(node, kind, where, scope) for kind in kinds]
                return (TupleValue(tuple(items)) if len(items) > 1 else items[0]) if items else node
            return self.new("module", data, where, scope, name=name, module=spec.name)
        return self.new("module", data, where, scope, name=name) if data else UNKNOWN_VALUE

    def _returned_item(self, node: Node, kind, where, scope: Scope) -> Node:
        """One item a stack's imported block returns (block_returns): its stream, the stream through the block's
        closing norm, or a side output beside it (attention weights), which RL103 does not follow."""
        if kind == STREAM:
            return node
        if kind == SIDE:
            return self.new("pass", (node,), where, scope, name="side_output", side_output=True, width_changing=True)
        return self.new("pass", (node,), where, scope, name="closing_norm", **kind)

    def _call_name(self, ref: ModRef, where) -> str:
        return self.code(where.func) if type(where) is cst.Call else ref.path

    def call_builtin_module(self, spec, data, where, scope, name):
        member = spec.name
        if not data:
            return UNKNOWN_VALUE
        if member in torch_api.NORM_MODULES:
            return self.new("norm", data[:1], where, scope, norm_kind=torch_api.NORM_MODULES[member],
                            norm_form="module", name=name, spec=spec)
        if member in torch_api.DROPOUT_MODULES:
            return self.new("dropout", data[:1], where, scope, name=name)
        if member in torch_api.ACTIVATION_MODULES:
            return self.new("act", data[:1], where, scope, name=name, function=member)
        if member in torch_api.PASSTHROUGH_MODULES:
            return data[0]
        if member in torch_api.PARAMETRISED_MODULES:
            node = self.new("module", data, where, scope, name=name, module=member, spec=spec)
            if member in torch_api.WIDTH_PRESERVING_MODULES:
                if member in ("TransformerEncoder", "TransformerDecoder") and spec.owner is not None:
                    key = f"{spec.owner.name}.{spec.attr}"
                    self.stack_outputs(key, [node])
                    self.stack_iteration(key, where)
                if member == "MultiheadAttention":
                    # returns (output, weights)
                    weights = self.new("pass", (node,), where, scope, name="attn_weights", width_changing=True)
                    return TupleValue((node, weights))
            return node
        return self.new("func", data, where, scope, name=name, module=member)

    def call_container(self, ref: ModRef, args, kwargs, where, scope: Scope):
        spec = ref.spec
        if spec.name == "Sequential":
            if spec.repeated:
                self._note_iteration(ref, where)
                return self.call_element(ElemRef(ref, None), args, kwargs, where, scope)
            value = args[0] if args else UNKNOWN_VALUE
            for index, element in enumerate(spec.elements):
                value = self.call_module(ModRef(element, f"{ref.path}[{index}]"), [value], {}, where, scope)
            return value
        data = self._data_args(args, kwargs)
        return self.new("module", data, where, scope, name=ref.path) if data else UNKNOWN_VALUE

    def call_tensor_method(self, callee: TensorMethod, args, kwargs, where, scope: Scope):
        target, method = callee.target, callee.name.rstrip("_") if callee.name != "type_as" else callee.name
        if method in torch_api.SHAPE_METHODS:
            return SHAPE
        if method in torch_api.CREATION_FUNCTIONS:
            return self.new("const", (), where, scope, value=None)
        return self.tensor_function(method, [target] + list(args), kwargs, where, scope)

    def call_qualified(self, qualified: str, args, kwargs, where, scope: Scope):
        last = qualified.rsplit(".", 1)[-1]
        if qualified == "super":
            return UNKNOWN_VALUE
        if qualified == "zip":
            return ZipValue(tuple(args))
        if qualified == "enumerate":
            return EnumerateValue(args[0] if args else UNKNOWN_VALUE)
        if qualified in ("range", "len", "isinstance", "hasattr", "int", "print"):
            return SHAPE if qualified in ("range", "len", "int") else UNKNOWN_VALUE
        if qualified in ("getattr",):
            return UNKNOWN_VALUE
        if qualified in ("tuple", "list"):
            return args[0] if args else TupleValue(())
        if qualified in ("min", "max", "sum"):
            nodes = self._data_args(args, kwargs)
            return self.new("func", nodes, where, scope, name=qualified) if nodes else SHAPE
        if qualified in self.index.classes:
            info = self.index.classes[qualified]
            if not self.index.is_module_class(info) and self._data_args(args, kwargs) and (
                    last.endswith(("Output", "Outputs")) or kwargs):
                # A model-output record of this file (`TimesFmOutput(last_hidden_state=h, ...)`): RL103 follows h.
                return RecordValue(list(args), dict(kwargs))
            return UNKNOWN_VALUE
        if qualified.startswith("math."):
            values = [a for a in args if isinstance(a, Const)]
            return SHAPE if len(values) != len(args) else UNKNOWN_VALUE
        member = torch_api.torch_member(qualified)
        if member is None and qualified.startswith(("F.", "nn.functional.")):
            member = qualified.split(".", 1)[1].replace("functional.", "")
        if member is None:
            nodes = self._data_args(args, kwargs)
            if not nodes:
                return UNKNOWN_VALUE
            wrapped = self._wrapped_residual(qualified, args, kwargs, where, scope)
            if wrapped is not None:
                return wrapped
            kind = (torch_api.norm_kind_from_name(last) if last[:1].isupper()
                    else self.index.imported_norm_kind(qualified, type(self)))
            if kind is not None:
                return self.new("norm", nodes[:1], where, scope, norm_kind=kind, norm_form="module", name=last)
            if last[:1].isupper() and (last.endswith("Output") or last.endswith("Outputs") or kwargs):
                # A model-output record (BaseModelOutput(last_hidden_state=h, ...)): fields keep their tensors.
                return RecordValue(list(args), dict(kwargs))
            return self.new("func", nodes, where, scope, name=qualified)
        function = member.rsplit(".", 1)[-1]
        if function in torch_api.CREATION_FUNCTIONS:
            return self.new("const", (), where, scope, value=None)
        return self.tensor_function(function, args, kwargs, where, scope)

    def _wrapped_residual(self, qualified: str, args, kwargs, where: cst.Call, scope: Scope):
        """`chunked(self.norm, x, residual=False)` / `chunked(self.mlp, x, residual=True)` of a helper of another
        file that calls its callable argument on its data argument and adds the data back when its flag is true:
        the call, and the add at this call site. None when the helper is not one or its flag is not a constant."""
        if len(args) + len(kwargs) < 2:
            return None  # no callable and data argument both: not worth reading the helper's file
        wrapper = self.index.residual_wrapper(qualified)
        if wrapper is None:
            return None
        bound = dict(zip(wrapper.params, args)) | kwargs
        function, data = bound.get(wrapper.callable_param), bound.get(wrapper.data_param)
        flag = bound.get(wrapper.flag_param) if wrapper.flag_param is not None else Const(True)
        if self.tensor(data) is None or not isinstance(flag, Const) or function is None:
            return None
        output = self.call(function, [data], {}, where, scope)
        if not flag.value or self.tensor(output) is None:
            return output
        written = {arg.keyword.value if arg.keyword else wrapper.params[position]: arg.value
                   for position, arg in enumerate(where.args) if arg.keyword or position < len(wrapper.params)}
        terms = (written.get(wrapper.data_param, where), written.get(wrapper.callable_param, where))
        return self.binary("add", [(data, terms[0]), (output, terms[1])], where, scope)

    def tensor_function(self, function: str, args, kwargs, where, scope: Scope):
        """torch.X(t, ...), F.X(t, ...) and t.X(...) share one table."""
        data = self._data_args(args, kwargs)
        if not data:
            if function in ("size", "dim"):
                return SHAPE
            return self.new("const", (), where, scope, value=None)
        first = self.tensor(args[0]) if args else data[0]
        first = first or data[0]
        if function in torch_api.FUNCTIONAL_NORMS:
            return self.new("norm", (first,), where, scope, norm_kind=torch_api.FUNCTIONAL_NORMS[function],
                            norm_form="functional", name=function, call=where, args=args, kwargs=kwargs)
        if function in torch_api.DROPOUT_FUNCTIONS:
            return self.new("dropout", (first,), where, scope, name=function)
        if function == "normalize":  # F.normalize: an L2 normalisation, which bounds the stream's scale too
            return self.new("func", (first,), where, scope, name=function, l2_normalise=True)
        if function in torch_api.ACTIVATION_FUNCTIONS or function in ("softmax", "log_softmax"):
            return self.new("act", data, where, scope, function=function)
        if function in torch_api.PARAMETRISED_FUNCTIONS:
            return self.new("module", data, where, scope, name=function, module=function)
        if function in torch_api.ATTENTION_FUNCTIONS:
            return self.new("func", data, where, scope, name=function, attention=True)
        if function in torch_api.REDUCTIONS:
            return self.new("reduce", data, where, scope, function=function, call=where, args=args, kwargs=kwargs)
        if function in torch_api.MATH_UNARY:
            return self.new(torch_api.MATH_UNARY[function], data, where, scope, function=function)
        if function == "pow" or function == "square":
            return self.new("pow", data, where, scope, function=function, args=args)
        if function == "add":
            # torch.add(x, y) and x.add(y): positional operands are the terms (alpha= only scales one).
            positional = [a for a in where.args if a.keyword is None] if type(where) is cst.Call else []
            terms = [self.code(a.value) for a in positional]
            if type(where.func) is cst.Attribute and len(terms) < len(args):
                terms = [self.code(where.func.value)] + terms
            inputs = [self.operand(v, where, scope) for v in args]
            return self.new("add", inputs, where, scope, terms=terms)
        if function in ("mul", "multiply"):
            inputs = [self.operand(v, where, scope) for v in args]
            return self.new("mul", inputs, where, scope)
        if function in ("div", "divide", "true_divide"):
            inputs = [self.operand(v, where, scope) for v in args]
            return self.new("div", inputs, where, scope)
        if function in ("sub", "subtract"):
            inputs = [self.operand(v, where, scope) for v in args]
            return self.new("sub", inputs, where, scope)
        if function in ("matmul", "bmm", "mm", "einsum", "baddbmm"):
            return self.new("matmul", data, where, scope, function=function)
        if function in torch_api.PASSTHROUGH_METHODS:
            return self.new("pass", (first,), where, scope, name=function,
                            width_changing=function in torch_api.WIDTH_CHANGING_METHODS)
        if function in torch_api.CLAMP_FUNCTIONS:
            return self.new("clamp", data, where, scope, function=function)
        if function in ("chunk", "split", "unbind"):
            node = self.new("pass", (first,), where, scope, name=function, width_changing=True)
            return SplitValue(node)
        return self.new("func", data, where, scope, name=function)

    # ----- norm classes ---------------------------------------------------------------------

    def norm_class_kind(self, info: ClassInfo) -> str | None:
        memo = self.plain_evaluations
        if info.name not in self.norm_class_kinds:
            self.norm_class_kinds[info.name] = None  # recursion guard
            from reslint.static.norms import classify_norm_class

            if memo is None:
                self.norm_class_kinds[info.name] = classify_norm_class(self.index, info, self.class_graph)
                return self.norm_class_kinds[info.name]
            start = self.budget.steps
            memo.classifying.add(info.name)
            try:
                self.norm_class_kinds[info.name] = classify_norm_class(self.index, info, self.class_graph)
            finally:
                memo.classifying.discard(info.name)
                self.classification_steps += self.budget.steps - start
        elif memo is not None and info.name in memo.classifying:
            self.read_unfinished = True
        return self.norm_class_kinds[info.name]

    def class_graph(self, info: ClassInfo) -> Graph:
        """The graph of a class's forward evaluated on its own, with `info` guarded against recursion."""
        evaluator = Evaluator(self.index, self.positions, self.path)
        evaluator.plain_evaluations = self.plain_evaluations
        evaluator.for_classification = True
        # Shared: each norm class of a file is classified once (a class under classification reads None).
        evaluator.norm_class_kinds = self.norm_class_kinds
        evaluator.norm_class_kinds.setdefault(info.name, None)
        return evaluator.evaluate_class(info)


def evaluate_returns(index: FileIndex, path: str, info: ClassInfo):
    """(graph, the items its forward returns: one for a single value) of a block class of another file as
    built there (block_returns); None where the evaluation gives up or branches on a value the construction
    leaves open (its placement flag)."""
    evaluator = Evaluator(index, SourceMap(index.module), path)
    try:
        graph = evaluator.evaluate_class(info)
    except (BudgetExceeded, RecursionError):
        return None
    if evaluator.undecided:
        return None
    returned = evaluator.returned
    return graph, returned.items if isinstance(returned, TupleValue) else (returned,)


def _position(positions: SourceMap, node: cst.CSTNode, within: cst.FunctionDef | None = None) -> tuple[int, int]:
    """`within`: the function whose evaluation made the node (its statements are searched first)."""
    start = positions.line_column(node, within)
    return (start[0], start[1] + 1) if start is not None else (0, 0)


def _code(positions: SourceMap, node: cst.CSTNode, within: cst.FunctionDef | None = None) -> str:
    plain = _plain_dotted_name(node)
    return plain if plain is not None else positions.code(node, within).strip()


def _codes(positions: SourceMap, nodes: list, within: cst.FunctionDef | None = None) -> list[str]:
    return [_code(positions, node, within) for node in nodes]


def _plain_dotted_name(node) -> str | None:
    """The code of `x` or `self.dense` written without parentheses or spaces, read off the names (most of the
    calls and terms the graph names: placing their statement to generate it costs more than the evaluation);
    None for anything else."""
    parts = []
    while type(node) is cst.Attribute:
        dot = node.dot
        if node.lpar or type(dot.whitespace_before) is not cst.SimpleWhitespace or dot.whitespace_before.value \
                or type(dot.whitespace_after) is not cst.SimpleWhitespace or dot.whitespace_after.value:
            return None
        parts.append(node.attr.value)
        node = node.value
    if type(node) is not cst.Name or node.lpar:
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def _unpacked_stack(target, element) -> ModRef | None:
    """The stack whose groups of modules the loop's target unpacks (`for attn, ff in self.layers`,
    `for i, (attn, ff) in enumerate(self.layers)`), else None. A group called whole is a module of the loop."""
    if type(target) not in (cst.Tuple, cst.List):
        return None
    parts = [part.value for part in target.elements]
    if isinstance(element, TupleValue) and len(element.items) == len(parts):
        found = [stack for part, item in zip(parts, element.items) if (stack := _unpacked_stack(part, item))]
        return found[0] if found else None
    return _grouped_stack(element)


def _grouped_stack(element) -> ModRef | None:
    """The stack whose repeated element is a group of modules (`ModuleList([Attention(), FeedForward()])`) when
    `element` is one such group, else None."""
    if not (isinstance(element, ElemRef) and element.index is None):
        return None
    spec = element.container.spec
    groups = spec.elements
    if not (spec.kind == "container" and spec.repeated and groups):
        return None
    if all(group.kind == "container" and not group.repeated and group.elements and not group.named
           for group in groups):
        return element.container
    return None


def _group_member(stack: ModRef, position: int) -> ElemRef:
    """Position `position` of every group of the stack: one module, or the alternatives an `if` built."""
    members = tuple(group.elements[position] for group in stack.spec.elements
                    if -len(group.elements) <= position < len(group.elements))
    spec = ModuleSpec("container", "ModuleList", stack.spec.node, stack.spec.owner, elements=members)
    return ElemRef(ModRef(spec, f"{stack.path}[i][{position}]"), None)


CONFIG_OBJECTS = CONFIG_OBJECT_NAMES


def _config_field(expr: cst.BaseExpression):
    """`config.pre_norm`, `self.config.pre_norm`, `kwargs.get("pre_norm", False)`, `getattr(config, "pre_norm",
    False)`: (the field's name, its default expression or None); None for anything else."""
    if type(expr) is cst.Attribute:
        base = expr.value
        if type(base) is cst.Attribute and type(base.value) is cst.Name and base.value.value == "self":
            base = base.attr
        if type(base) is cst.Name and base.value.lower() in CONFIG_OBJECTS:
            return expr.attr.value, None
        return None
    if type(expr) is cst.Call:
        args = [arg.value for arg in expr.args]
        if type(expr.func) is cst.Attribute and expr.func.attr.value == "get" and args \
                and type(args[0]) is cst.SimpleString and _config_field(cst.Attribute(expr.func.value,
                                                                                         cst.Name("x"))):
            return string_value(args[0]), args[1] if len(args) > 1 else None
        if type(expr.func) is cst.Name and expr.func.value == "getattr" and len(args) >= 2 \
                and type(args[1]) is cst.SimpleString:
            return string_value(args[1]), args[2] if len(args) > 2 else None
    return None


def _grown(values: list):
    """`if stage in wanted: features += (h,)`: the branch that appended holds what the others hold and more, so
    the merged collection is the longest (None unless every branch's is a plain tuple or list extending the
    shortest)."""
    if len(values) < 2 or any(type(value) is not TupleValue for value in values):
        return None
    longest = max(values, key=lambda value: len(value.items))
    if all(len(value.items) <= len(longest.items) and all(
            item is longest.items[position] for position, item in enumerate(value.items)) for value in values):
        return longest
    return None


_stochastic_depth: dict[str, bool] = {}  # a called name -> whether it is a stochastic depth (asked at every call)


def _is_stochastic_depth(name: str) -> bool:
    found = _stochastic_depth.get(name)
    if found is None:
        if len(_stochastic_depth) > 65536:  # names of many files in one process: kept bounded
            _stochastic_depth.clear()
        found = _stochastic_depth[name] = torch_api.is_stochastic_depth(name)
    return found


def _rooted_at_self(node: cst.BaseExpression) -> bool:
    while type(node) is cst.Attribute:
        node = node.value
    return type(node) is cst.Name and node.value == "self"


def file_budget(index: FileIndex) -> FileBudget:
    """The budget of the file `index` describes (created with the first evaluator of the file)."""
    budget = getattr(index, "evaluation_budget", None)
    if budget is None:
        budget = index.evaluation_budget = FileBudget()
    return budget


def budget_limits() -> dict[str, int]:
    return {"integer size": MAX_INTEGER_BITS, "sequence length": MAX_SEQUENCE_LENGTH,
            "string length": MAX_STRING_LENGTH, "inlining fan-out": MAX_INLINES_PER_FUNCTION,
            "work per file": MAX_STEPS_PER_FILE}


def _activation_lookup(expr) -> bool:
    """`ACT2FN[config.hidden_act]`, `get_activation(name)`: an activation picked by name from a registry."""
    if type(expr) is cst.Subscript:
        expr = expr.value
    elif type(expr) is cst.Call:
        expr = expr.func
    else:
        return False
    name = expr.attr.value if type(expr) is cst.Attribute else getattr(expr, "value", "")
    return name in ("ACT2FN", "ACT2CLS", "get_activation")


COMPREHENSIONS = (cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp)
_SMALL_STATEMENTS = frozenset((cst.Return, cst.Assign, cst.AugAssign, cst.AnnAssign, cst.Expr, cst.Raise))
_SEQUENCE_VALUES = frozenset((TupleValue, SplitValue, RecordValue, DictValue))  # TupleValue and its subclasses


def _binds_a_name_to_a_name(block) -> bool:
    """Whether an `if` branch (a block, an `else`, an `elif`) holds `name = other_name` among its statements."""
    if type(block) is cst.Else:
        block = block.body
    if type(block) is cst.If:
        return _binds_a_name_to_a_name(block.body) or _binds_a_name_to_a_name(block.orelse)
    if type(block) is cst.SimpleStatementSuite:  # `if residual is None: residual = x`
        smalls = list(block.body)
    elif type(block) is cst.IndentedBlock:
        smalls = [small for statement in block.body if type(statement) is cst.SimpleStatementLine
                  for small in statement.body]
    else:
        return False
    return any(type(small) is cst.Assign and type(small.value) is cst.Name
               and all(type(target.target) is cst.Name for target in small.targets) for small in smalls)


def _names_in(expr) -> set[str]:
    visitor = _Names()
    walk(expr, visitor)
    return visitor.found


class _Names:
    """Module-level, not defined per call: a class is a reference cycle the cyclic collector must find."""

    def __init__(self) -> None:
        self.found: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.found.add(node.value)


def _unit_scaled(operator: str, values: list):
    """The tensor of `1.0 * x`, `x * 1` or `x / 1`; None for any other operation."""
    if operator not in ("mul", "div") or len(values) != 2:
        return None
    for position, (unit, other) in enumerate((values, values[::-1])):
        if operator == "div" and position == 0:
            continue
        if isinstance(unit, Const) and not isinstance(unit.value, bool) and isinstance(unit.value, (int, float)) \
                and unit.value == 1 and isinstance(other, Node):
            return other
    return None
