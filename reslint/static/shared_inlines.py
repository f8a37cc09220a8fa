"""A submodule's inlined forward evaluated once per file and replayed wherever the same call comes again.

Every module class of a file is evaluated as a root with the classes it builds inlined: a backbone is evaluated
for itself and again inside each head class (`...ForMaskedLM`, `...ForSequenceClassification`), a layer inside
its encoder, its model and every head. The first inlining of a class as one submodule (one construction, its
`ModuleSpec`) is recorded: the nodes it added, what it returned, and what it did to the evaluation (stack
outputs and iterations, undecided flags and flag defaults, functions inlined, `if`s numbered, steps spent). A
later call of the same submodule, from any root of the file, with arguments of the same shape (which are one
tensor, which are optional inputs, the constants' values) and the same flags assumed, replays the record: the
nodes are copied under the caller's frames, conditions and loops, with the caller's arguments where the record
has its own, and the `if`s renumbered from the caller's count. The graph is the one the evaluation would build.

A call is evaluated (and not recorded) where its evaluation could depend on where it runs: a module or function
inside it that the caller's frames make recursive, an inlining depth or fan-out limit reached, a norm
classification under way, a value that is not data (a lambda, a module handed in, a record), a replay over the
file's work budget, a root built with constructor arguments or registry loaders followed.
"""

from __future__ import annotations

from reslint.static.graph import Node
from reslint.static.values import (MAX_INLINE_DEPTH, MAX_INLINES_PER_FUNCTION, MAX_STEPS_PER_FILE, Const, DictValue,
                                   EnumerateValue, Lambda, RecordValue, Shape, SplitValue, TensorMethod, TupleValue,
                                   Unknown, ZipValue, optional_input)

MAX_RECORDS_PER_CALL = 4  # one call's records for different assumed flags


class NotShared(Exception):
    """A value the record cannot stand for in another call."""


class Recording:
    """What an inlined call does beyond the nodes it adds, in order (see `Evaluator.recordings`)."""

    __slots__ = ("events", "modules", "functions", "depth", "classes", "inlines", "flags")

    def __init__(self) -> None:
        self.events: list[tuple] = []  # ("outputs", key, nodes) | ("iteration", key, where) | ("undecided", key)
        #                                 | ("default", key, value) | ("mark", node, name)
        #                                 | ("optional_tested",)
        self.flags: set[str] = set()  # the flags whose assumed value was looked up
        self.modules: set[str] = set()  # classes whose recursion check read the frames
        self.functions: set[str] = set()  # functions whose recursion check read the frames
        self.depth = -1  # the deepest scope an inlining depth check read
        self.classes: set[str] = set()  # classes whose norm classification was read
        self.inlines: dict[int, int] = {}  # id of a FunctionDef -> times inlined


class Record:
    __slots__ = ("leaves", "nodes", "returned", "events", "modules", "functions", "depth", "classes",
                 "inlines", "ifs", "if_start", "steps", "assumed", "made")

    def ready(self) -> bool:
        """Whether the record can stand for the call: its nodes are encoded when it is first replayed (most records
        never are)."""
        if self.made is not None:
            made, self.made = self.made, None
            try:
                _fill(self, *made)
            except NotShared:
                self.nodes = None
        return self.nodes is not None


class _Made:  # a node the record added (its position in the record)
    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


class _Given:  # an argument of the call (its position among the arguments' tensors and constants)
    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


class _Rebuilt:  # a value holding nodes: rebuilt from its parts
    __slots__ = ("build", "parts")

    def __init__(self, build, parts) -> None:
        self.build = build
        self.parts = parts


def inlined_forward(evaluator, info, spec, forward, inner, self_value, args: list, kwargs: dict, scope):
    """`evaluator._run_function(forward, inner, [self_value] + args, kwargs)`, replayed when the file's evaluations
    already recorded the same call."""
    memo = evaluator.plain_evaluations
    key = _key(evaluator, memo, info, spec, args, kwargs)
    if key is None:
        return evaluator._run_function(forward, inner, [self_value] + list(args), dict(kwargs))
    shape, leaves = key
    kept = memo.inlined.get(shape)
    if kept is None:  # the spec is kept with its records: its id in the shape is never another's
        kept = memo.inlined[shape] = (spec, [])
    records = kept[1]
    assumptions = evaluator.assumptions
    for record in records:
        if all(assumptions.get(flag) is value for flag, value in record.assumed):
            if _fits(evaluator, memo, record, inner, scope) and record.ready():
                return _replay(evaluator, record, leaves, inner, scope)
            break
    else:
        if len(records) < MAX_RECORDS_PER_CALL:
            return _recorded(evaluator, memo, records, leaves, forward, inner, self_value, args, kwargs, scope)
    return evaluator._run_function(forward, inner, [self_value] + list(args), dict(kwargs))


def _key(evaluator, memo, info, spec, args, kwargs):
    """(the call's shape, the arguments' tensors and constants in order), or None where no record may serve."""
    if memo is None or evaluator.loaded_modules or evaluator.root is None or evaluator.root.spec is not None:
        return None
    found: list = []
    aliases: dict[int, int] = {}
    try:
        optional = evaluator.optional_inputs_undecided
        shape = (id(info), id(spec), tuple(_shape(value, aliases, found) for value in args),
                 tuple((name, _shape(value, aliases, found)) for name, value in kwargs.items()), optional,
                 evaluator.optional_inputs_default)
        hash(shape)
    except (NotShared, TypeError):
        return None
    return shape, found


def _shape(value, aliases: dict[int, int], found: list):

    kind = type(value)
    if kind is Node or kind is Const or kind is TupleValue or kind is SplitValue:
        # The call's tensors, constants and tuples, each once: the record's own stand for them by identity.
        index = aliases.get(id(value))
        if index is None:
            index = aliases[id(value)] = len(found)
            found.append(value)
        if kind is TupleValue:
            return ("t", index) + tuple(_shape(item, aliases, found) for item in value.items)
        if kind is SplitValue:
            return "split", index, _shape(value.node, aliases, found)
        if kind is Const:
            number = value.value
            return "c", index, type(number).__name__, repr(number) if type(number) is float else number
        # What the evaluation reads of a tensor it is handed: whether it is an optional input of the root (a phi
        # of one, for RL103's look at the ordinary call), whether it is a callable activation.
        info = value.info
        return "n", index, bool(info.get("optional")), optional_input(value), bool(info.get("activation"))
    if kind is Unknown:
        return "u"
    if kind is Shape:
        return "s"
    raise NotShared


def _collides(frames, modules: set[str], functions: set[str]) -> bool:
    return any((frame.kind == "module" and frame.name in modules)
               or (frame.kind == "function" and frame.name in functions) for frame in frames)


def _fits(evaluator, memo, record: Record, inner, scope) -> bool:

    if evaluator.budget.steps + record.steps > MAX_STEPS_PER_FILE:
        return False  # evaluated for real: it stops where the budget runs out
    if record.depth >= 0 and scope.depth + record.depth >= MAX_INLINE_DEPTH:
        return False
    if _collides(inner.frames, record.modules, record.functions):
        return False
    if any(evaluator.inlined.get(function, 0) + times > MAX_INLINES_PER_FUNCTION
           for function, times in record.inlines.items()):
        return False
    kinds = evaluator.norm_class_kinds
    return all(name in kinds and name not in memo.classifying for name in record.classes)


def _recorded(evaluator, memo, records: list, leaves, forward, inner, self_value, args, kwargs, scope):
    graph = evaluator.graph
    start, if_start, steps = len(graph.nodes), evaluator.next_if, evaluator.budget.steps
    classified, unfinished, hits = evaluator.classification_steps, evaluator.read_unfinished, len(evaluator.budget.hits)
    # Whether the root's call without its None-default arguments may differ: noted once per evaluation, by the first
    # test that finds it out. A call that could have noted it (it was not noted before) and did not is recorded.
    aliases_noted = evaluator.default_call_aliases
    condition = inner.condition  # the call's own `if c: return` extends its scope's condition as it runs
    recording = Recording()
    evaluator.recordings.append(recording)
    try:
        returned = evaluator._run_function(forward, inner, [self_value] + list(args), dict(kwargs))
    finally:
        evaluator.recordings.pop()
    # A limit hit while recording: a replay would not note it again where a second look forgot it.
    if unfinished or evaluator.read_unfinished or len(evaluator.budget.hits) != hits \
            or aliases_noted or evaluator.default_call_aliases \
            or recording.depth >= MAX_INLINE_DEPTH or _collides(inner.frames, recording.modules, recording.functions) \
            or any(evaluator.inlined.get(function, 0) > MAX_INLINES_PER_FUNCTION for function in recording.inlines):
        return returned
    record = Record()
    made = graph.nodes[start:]
    # What the nodes hold now (the caller may mark them later), kept once per node: a node of a call recorded inside
    # this one keeps what it held when that call ended, this record's marks on it are among its events.
    held = memo.held
    infos = [held.get(node) or held.setdefault(node, dict(node.info)) for node in made]
    record.made = (made, infos, leaves, returned, recording, inner.frames, condition, evaluator.loops)
    record.modules, record.functions = frozenset(recording.modules), frozenset(recording.functions)
    record.depth = recording.depth - scope.depth if recording.depth >= 0 else -1
    record.classes = frozenset(recording.classes)
    record.inlines = dict(recording.inlines)
    record.ifs, record.if_start = evaluator.next_if - if_start, if_start
    record.steps = evaluator.budget.steps - steps - (evaluator.classification_steps - classified)
    assumptions = evaluator.assumptions
    record.assumed = tuple((flag, assumptions.get(flag)) for flag in sorted(recording.flags))
    records.append(record)
    return returned


def _fill(record: Record, made: list, infos: list[dict], leaves: list, returned, recording: Recording, frames: tuple,
          condition: tuple, loops: tuple) -> None:
    positions = {id(node): index for index, node in enumerate(made)}
    arguments = {id(leaf): index for index, leaf in enumerate(leaves)}

    def encode(value):
        return _encode(value, positions, arguments)

    nodes = []
    for node, node_info in zip(made, infos):
        # Nodes made by `Evaluator.new` inside a loop, or while a call is recorded, hold the loops (the caller's
        # first; none: an empty tuple), others no loops at all.
        node_loops = node_info.get("loops")
        if node.frames[:len(frames)] != frames or node.condition[:len(condition)] != condition \
                or node_loops is not None and node_loops[:len(loops)] != loops:
            raise NotShared
        info = {name: encode(value) for name, value in node_info.items() if name != "loops"}
        # Whether a replay rebuilds any of the info's values (most hold only names and flags: copied as they are).
        rebuilt = any(type(value) in _ENCODED for value in info.values())
        nodes.append((node.op, tuple(encode(parent) for parent in node.inputs), node.place,
                      node.frames[len(frames):], node.condition[len(condition):],
                      None if node_loops is None else node_loops[len(loops):], info, rebuilt))
    record.nodes = nodes
    record.leaves = len(leaves)
    record.returned = encode(returned)
    record.events = [(event[0], event[1], [encode(node) for node in event[2]]) if event[0] == "outputs" else
                     (event[0], encode(event[1]), event[2]) if event[0] == "mark" else event
                     for event in recording.events]


_ENCODED = (_Made, _Given, _Rebuilt)  # what `_decode` rebuilds; any other value it gives back as it is


def _encode(value, positions: dict[int, int], arguments: dict[int, int]):

    index = arguments.get(id(value))
    if index is not None:
        return _Given(index)
    kind = type(value)
    if kind is Node:
        index = positions.get(id(value))
        if index is None:
            raise NotShared  # a node of the caller's that the call was not handed
        return _Made(index)
    if kind is Const:
        return _Rebuilt(Const, (value.value,))

    def parts(*values):
        return tuple(_encode(part, positions, arguments) for part in values)

    if kind is TupleValue:
        return _Rebuilt(_tuple_value, parts(*value.items))
    if kind is SplitValue:
        return _Rebuilt(SplitValue, parts(value.node))
    if kind in (RecordValue, DictValue):
        return _Rebuilt(kind, (_Rebuilt(_list, parts(*value.items[:len(value.items) - len(value.fields)])),
                               _Rebuilt(_dict, (tuple(value.fields), _Rebuilt(_tuple, parts(*value.fields.values()))))))
    if kind is TensorMethod:
        return _Rebuilt(TensorMethod, parts(value.target) + (value.name,))
    if kind is ZipValue:
        return _Rebuilt(ZipValue, (_Rebuilt(_tuple, parts(*value.parts)),))
    if kind is EnumerateValue:
        return _Rebuilt(EnumerateValue, parts(value.inner))
    if kind is list:
        return _Rebuilt(_list, parts(*value))
    if kind is tuple:
        return _Rebuilt(_tuple, parts(*value))
    if kind is dict:
        return _Rebuilt(_dict, (tuple(value), _Rebuilt(_tuple, parts(*value.values()))))
    if kind is Lambda:
        raise NotShared  # its closure holds the call's own scope
    return value  # no node inside: strings, numbers, code, specs, module references, places


def _tuple_value(*items):

    return TupleValue(items)


def _list(*items):
    return list(items)


def _tuple(*items):
    return items


def _dict(names, values):
    return dict(zip(names, values))


def _decode(value, made: list, given: list):
    kind = type(value)
    if kind is _Made:
        return made[value.index]
    if kind is _Given:
        return given[value.index]
    if kind is _Rebuilt:
        return value.build(*[_decode(part, made, given) for part in value.parts])
    return value


def _replay(evaluator, record: Record, given: list, inner, scope):
    graph = evaluator.graph
    frames, condition, loops = inner.frames, inner.condition, evaluator.loops
    shift = evaluator.next_if - record.if_start
    first, last = record.if_start, record.if_start + record.ifs
    evaluator.next_if += record.ifs
    made: list[Node] = []
    for op, inputs, place, own_frames, own_condition, own_loops, info, rebuilt in record.nodes:
        parents = tuple([made[parent.index] if type(parent) is _Made else _decode(parent, made, given)
                         for parent in inputs])
        values = {name: _decode(value, made, given) for name, value in info.items()} if rebuilt else dict(info)
        if own_loops is not None:
            values["loops"] = loops + own_loops
        if shift and own_condition:
            own_condition = tuple((test + shift, branch) if type(test) is int and first <= test < last
                                  else (test, branch) for test, branch in own_condition)
        node = Node(op, parents, place, frames + own_frames, condition + own_condition, values, [])
        for parent in parents:
            parent.users.append(node)
        made.append(node)
    graph.nodes.extend(made)
    for event in record.events:
        kind = event[0]
        if kind == "outputs":
            evaluator.stack_outputs(event[1], [_decode(node, made, given) for node in event[2]])
        elif kind == "iteration":
            evaluator.stack_iteration(event[1], event[2])
        elif kind == "mark":
            evaluator.mark(_decode(event[1], made, given), event[2])
        elif kind == "undecided":
            evaluator.undecided_flag(event[1])
        elif kind == "optional_tested":
            evaluator.optional_input_tested()
        else:
            evaluator.flag_default(event[1], event[2])
    for function, times in record.inlines.items():
        evaluator.inlined[function] = evaluator.inlined.get(function, 0) + times
    for recording in evaluator.recordings:
        recording.modules |= record.modules
        recording.functions |= record.functions
        recording.classes |= record.classes
        recording.flags.update(flag for flag, _ in record.assumed)
        if record.depth >= 0:
            recording.depth = max(recording.depth, scope.depth + record.depth)
        for function, times in record.inlines.items():
            recording.inlines[function] = recording.inlines.get(function, 0) + times
    evaluator.budget.steps += record.steps
    return _decode(record.returned, made, given)
