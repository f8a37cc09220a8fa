"""Training-code facts: the optimizers a file builds, their learning-rate schedules, whether
those warm up, and which model classes the file trains.

Read with `ast` (parsing only, nothing runs): these facts need line numbers and expressions,
not libcst's round-trip tree, and `ast` gives them for a fraction of the cost. Files without
optimizer or scheduler vocabulary are not parsed a second time at all.

A warmup is recognised by what the schedule does to the learning rate at the start:
arguments of known schedulers (`LinearLR` start < end, `num_warmup_steps` > 0, ...), and the
shape of hand-written schedule functions (`LambdaLR`, manual `param_group["lr"] = ...`): an
expression that grows with the step, at least at first (`min(step / warmup, 1)`, the Noam
formula, a branch on `step < warmup`). A value that cannot be resolved statically counts as
warmup present: reslint reports only what it can show.
"""

from __future__ import annotations

import ast
import os
import re

from reslint.static.construction_sites import walk_with_parents
from reslint.static.literals import literal_eval
from reslint.static.training_factories import OPTIMIZERS, Factory, factory_of
from reslint.project_facts import (
    WARMUP_NO,
    WARMUP_UNKNOWN,
    WARMUP_YES,
    ModelRef,
    OptimizerSite,
    Schedule,
)
from reslint.project_index import code_nodes

# A file names one of these words when it holds training code; looked for with `in`, a tenth of a regular
# expression's alternation over every checked file's text (the one below runs only on texts holding `optim`).
TRAINING_VOCABULARY = ("Schedul", "schedul", "TrainingArguments", "param_groups", "lr_lambda", "Warmup", "warmup")
# `optim` as training code spells it (`torch.optim`, `optimizer`, `configure_optimizers`, `transformers.optimization`),
# not as prose and other libraries do (`optimized`, `optimal`, `scipy.optimize`, `can_optimize`, "due to
# optimization"): such a word, or `is_deepspeed_zero3_enabled`, was all that sent 31 of the 42 transformers
# `modeling_*.py` the reader parsed to it.
OPTIM_AS_TRAINING_CODE = re.compile(r"optim(?!(?:iz|is)(?:e[sd]?|ing|ations?)\b|al|um\b)"
                                    r"|\.optimization\b|\boptimization(?:\s+import\b|\.\w)|\bimport\s+optimization\b")


def names_training_vocabulary(text: str) -> bool:
    """Whether the text may hold training code: an optimizer, a schedule, training arguments, `deepspeed.initialize`
    (DeepSpeed's schedulers are `Warmup...`). A file without any of these words has none the reader would find."""
    return any(word in text for word in TRAINING_VOCABULARY) or \
        "optim" in text and OPTIM_AS_TRAINING_CODE.search(text) is not None or \
        "deepspeed" in text and "initialize" in text

# Optimizers that need no warmup schedule: RAdam rectifies the variance of Adam's adaptive learning
# rate over the first steps, which is what warmup works around (Liu et al. 2020).
WARMUP_SUBSTITUTES = {"RAdam": "RAdam rectifies the early variance of the adaptive learning rate",
                      "Ranger": "Ranger is RAdam with Lookahead"}
NO_WARMUP_SCHEDULERS = frozenset({
    "StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "CosineAnnealingWarmRestarts", "PolynomialLR",
    "ReduceLROnPlateau", "get_constant_schedule",
})
TRANSFORMERS_WARMUP_SCHEDULES = frozenset({
    "get_linear_schedule_with_warmup", "get_cosine_schedule_with_warmup",
    "get_cosine_with_hard_restarts_schedule_with_warmup", "get_polynomial_decay_schedule_with_warmup",
    "get_constant_schedule_with_warmup", "get_inverse_sqrt_schedule", "get_wsd_schedule",
    "get_cosine_with_min_lr_schedule_with_warmup", "get_cosine_with_min_lr_schedule_with_warmup_lr_rate",
})
TIMM_SCHEDULERS = frozenset({"CosineLRScheduler", "StepLRScheduler", "MultiStepLRScheduler", "TanhLRScheduler",
                             "PolyLRScheduler", "PlateauLRScheduler"})
DEEPSPEED_SCHEDULERS = frozenset({"WarmupLR", "WarmupDecayLR", "WarmupCosineLR"})
NO_WARMUP_SCHEDULER_NAMES = frozenset({"constant", "reduce_lr_on_plateau", "cosine_annealing"})
TRAINING_ARGUMENTS = frozenset({"TrainingArguments", "Seq2SeqTrainingArguments"})

# Library models whose layers are Post-LN, when built from a config rather than loaded pre-trained.
POST_LN_TORCH_LAYERS = frozenset({"Transformer", "TransformerEncoderLayer", "TransformerDecoderLayer"})
POST_LN_TRANSFORMERS = re.compile(
    r"^(Bert|Roberta|XLMRoberta|Electra|Albert|DistilBert|Camembert|Ernie|Bart|Marian)"
    r"(Model|For[A-Za-z]+|LMHeadModel|Config)$")
PRE_LN_LOOKALIKES = re.compile(r"^(RobertaPreLayerNorm|XLMRobertaXL)")
SCHEDULE_LIKE = re.compile(r"sched|warmup", re.I)
STEP_LIKE = re.compile(r"step|iter|epoch|update|^(it|t|i|n)$")

INC, DEC, CONST, UNKNOWN, RAMP = "increasing", "decreasing", "constant", "unknown", "ramp"
# Packages whose functions are no model factories of the checked project.
LIBRARY_ROOTS = frozenset({"torch", "transformers", "numpy", "np", "os", "sys", "math", "random", "json", "yaml",
                           "argparse", "logging", "time", "datasets", "accelerate", "deepspeed", "hydra", "omegaconf",
                           "lightning", "pytorch_lightning", "timm", "functools", "itertools", "pathlib", "wandb"})
FACTORY_RETURN = re.compile(r"\breturn\s+(?:[\w.]*\b[A-Z]\w*\(|\w*model\s*$)", re.MULTILINE)


def child_nodes(node: ast.AST) -> list[ast.AST]:
    """ast.iter_child_nodes(node) as a list, without its generator over ast.iter_fields' generator."""
    found, node_type = [], ast.AST
    for name in node._fields:
        value = getattr(node, name, None)
        if isinstance(value, node_type):
            found.append(value)
        elif isinstance(value, list):
            found.extend(item for item in value if isinstance(item, node_type))
    return found


def factory_returns(text: str, tree: ast.Module | None = None) -> dict[str, list[str]]:
    """Module-level functions that return a class they build (`def build_model(args): return Model(...)`,
    or `model = Model(...); return model`) -> the dotted names of those classes, imports resolved.
    `tree`: CPython's AST of `text`, when the caller parsed it already."""
    if not FACTORY_RETURN.search(text):
        return {}
    try:
        tree = tree if tree is not None else ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    aliases: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            for alias in node.names:
                aliases[alias.asname or alias.name] = base + alias.name if base.endswith(".") or not base \
                    else f"{base}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                aliases[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else \
                    alias.name.split(".")[0]
    factories: dict[str, list[str]] = {}

    def resolve(func: ast.expr) -> str:
        head, _, rest = ast.unparse(func).partition(".")
        return aliases.get(head, head) + (f".{rest}" if rest else "")

    for function in tree.body:
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        nodes = code_nodes(function)  # walked once for the three looks below
        assigned = {target.id: statement.value for statement in nodes
                    if type(statement) is ast.Assign for target in statement.targets if type(target) is ast.Name}
        built = []
        for statement in nodes:
            if type(statement) is not ast.Return or statement.value is None:
                continue
            value = statement.value
            if type(value) is ast.Name:
                value = assigned.get(value.id)
            if type(value) is ast.Call and type(value.func) in (ast.Name, ast.Attribute):
                dotted = resolve(value.func)
                if dotted.rsplit(".", 1)[-1][:1].isupper() and dotted not in built:
                    built.append(dotted)
        if built:
            # and the parts it builds the model from (`Model(encoder=Encoder(...), decoder=Decoder(...))`)
            parts = [resolve(node.func) for node in nodes if type(node) is ast.Call
                     and type(node.func) in (ast.Name, ast.Attribute)]
            factories[function.name] = built + [dotted for dotted in dict.fromkeys(parts)
                                                if dotted.rsplit(".", 1)[-1][:1].isupper() and dotted not in built]
    return factories


def extract_training(text: str, path: str | None = None, root: str | None = None,
                     reads: list[str] | None = None, tree: ast.Module | None = None,
                     ) -> tuple[list[ModelRef], list[OptimizerSite], list[Schedule]]:
    """Model references, optimizer sites and schedules of one file (all empty for non-training code).

    With the file's `path`, values the code takes from YAML/JSON/Hydra configs are read (`warmup_steps`
    in a YAML); the configs read are appended to `reads`. `tree`: CPython's AST of `text`, if parsed.
    """
    if not names_training_vocabulary(text):
        return [], [], []
    if tree is None:
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return [], [], []
    reader = TrainingReader(tree, path, root)
    try:
        reader.read()
    except RecursionError:
        return [], [], []
    if reads is not None:
        reads.extend(read for read in reader.config_reads if read not in reads)
    return reader.model_refs, reader.optimizer_sites(), reader.whole_schedules()


class Scope:
    """Names bound in one function (or the module), for resolving `warmup_steps` and `optimizer`."""

    def __init__(self, node: ast.AST, parent: Scope | None, name: str = ""):
        self.node = node
        self.parent = parent
        self.name = name
        self.values: dict[str, ast.expr] = {}
        body = node.body if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)) else []
        for statement in body:
            self._bind(statement)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for arg, default in zip(reversed(node.args.args), reversed(node.args.defaults)):
                self.values.setdefault(arg.arg, default)

    def _bind(self, statement: ast.stmt) -> None:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target = statement.targets[0]
            if isinstance(target, (ast.Name, ast.Attribute)):
                self.values[ast.unparse(target)] = statement.value
        elif isinstance(statement, (ast.With, ast.AsyncWith)):
            for item in statement.items:
                if isinstance(item.optional_vars, ast.Name):
                    self.values[item.optional_vars.id] = item.context_expr
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            self.values[ast.unparse(statement.target)] = statement.value
        for child in ast.iter_child_nodes(statement):
            if isinstance(child, ast.stmt):
                self._bind(child)

    def lookup(self, name: str) -> ast.expr | None:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.values:
                return scope.values[name]
            scope = scope.parent
        return None


class TrainingReader:
    def __init__(self, tree: ast.Module, path: str | None = None, root: str | None = None):
        self.tree = tree
        self.path = path
        self.root = root
        self.config_reads: list[str] = []
        self._values = None  # construction_sites' evaluator over this file, made when a config value is needed
        self.aliases: dict[str, str] = {}
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.parents: dict[ast.AST, ast.AST] = {}
        self.model_refs: list[ModelRef] = []
        self.optimizers: list[OptimizerSite] = []
        self.training_arguments: list[OptimizerSite] = []
        self.schedules: list[Schedule] = []
        self.explicit_trainer_schedule = False
        self.escaping: set[OptimizerSite] = set()  # returned by a factory function
        self.schedule_targets: dict[tuple[str, str], Schedule] = {}  # (scope, assigned name or @line:col)
        self.stages: set[tuple[str, str]] = set()  # schedules that are stages of a SequentialLR/ChainedScheduler
        self.pending_factories: list[tuple[ast.Call, Scope, str, str]] = []  # calls of project functions

    # ----- walking -------------------------------------------------------------------------------

    def read(self) -> None:
        nodes, self.parents = walk_with_parents(self.tree)
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.setdefault(node.name, node)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    self.aliases[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else \
                        alias.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom):
                base = "." * node.level + (node.module or "")
                for alias in node.names:
                    if alias.name == "*":
                        continue
                    dotted = base + alias.name if base.endswith(".") or not base else f"{base}.{alias.name}"
                    self.aliases[alias.asname or alias.name] = dotted
                    if alias.name[:1].isupper():
                        self.model_refs.append(ModelRef(dotted, node.lineno, node.col_offset + 1))
        self._walk(self.tree, Scope(self.tree, None), model_context=False)
        for call, scope, name, last in self.pending_factories:
            factory = factory_of(self, call)
            if factory is None:
                self._unresolved_call(call, scope, name, last)
            else:
                self._factory_site(call, scope, factory, last)

    def function_scope(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> Scope:
        """The names a module-level function sees: its own, then the module's."""
        return Scope(function, Scope(self.tree, None), function.name)

    def _factory_site(self, call: ast.Call, scope: Scope, factory: Factory, last: str) -> None:
        """An optimizer or a schedule a project factory builds (`reslint.static.training_factories`)."""
        where = (call.lineno, call.col_offset + 1)
        if factory.optimizers:
            built = factory.optimizers[0] + (", ..." if len(factory.optimizers) > 1 else "")
            site = OptimizerSite(*where, api=f"{last}() ({built})", target=self._target(call),
                                 substitute=next((WARMUP_SUBSTITUTES[api.rsplit('.', 1)[-1]] for api in factory.optimizers
                                                  if api.rsplit(".", 1)[-1] in WARMUP_SUBSTITUTES), ""),
                                 scope=scope.name)
            self.optimizers.append(site)
            if self._returned(call, scope):
                self.escaping.add(site)
        elif factory.schedule is not None:
            position, parameter = factory.optimizer_parameter or (10_000, "optimizer")
            schedule = Schedule(*where, api=f"{last}()", warmup=factory.schedule[0], detail=factory.schedule[1],
                                optimizer=self._optimizer_text(argument(call, position, parameter)), scope=scope.name)
            self.schedules.append(schedule)
            self.schedule_targets[(scope.name, self._target(call))] = schedule

    def _walk(self, node: ast.AST, scope: Scope, model_context: bool) -> None:
        for child in child_nodes(node):
            if isinstance(child, ast.ClassDef):
                lightning = self._is_lightning(child)
                class_scope = Scope(child, scope, f"{scope.name}.{child.name}".lstrip("."))
                if lightning:
                    self.model_refs.append(ModelRef(child.name, child.lineno, child.col_offset + 1,
                                                    scope=class_scope.name))
                inside_model = self._is_module_class(child) and not lightning
                self._walk(child, class_scope, model_context=inside_model)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._walk(child, Scope(child, scope, f"{scope.name}.{child.name}".lstrip(".")), model_context)
            else:
                if isinstance(child, ast.Call):
                    self._call(child, scope, model_context)
                elif isinstance(child, (ast.Assign, ast.AugAssign)) and not model_context:
                    self._manual_lr(child, scope)
                self._walk(child, scope, model_context)

    def _is_lightning(self, node: ast.ClassDef) -> bool:
        bases = [self.qualified(base) or "" for base in node.bases]
        methods = {item.name for item in node.body if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))}
        return any(base.endswith("LightningModule") for base in bases) or "configure_optimizers" in methods and \
            "training_step" in methods

    def _is_module_class(self, node: ast.ClassDef) -> bool:
        return any((self.qualified(base) or "").endswith(("Module", "PreTrainedModel")) for base in node.bases)

    def qualified(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.qualified(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    # ----- calls ---------------------------------------------------------------------------------

    def _call(self, call: ast.Call, scope: Scope, model_context: bool) -> None:
        name = self.qualified(call.func) or ""
        last = name.rsplit(".", 1)[-1]
        where = (call.lineno, call.col_offset + 1)
        if model_context:
            return  # a model's own helpers (nanoGPT's GPT.configure_optimizers): the training loop decides
        if last in OPTIMIZERS:
            site = OptimizerSite(*where, api=name, target=self._target(call),
                                 substitute=WARMUP_SUBSTITUTES.get(last, ""), scope=scope.name)
            self.optimizers.append(site)
            if self._returned(call, scope):
                self.escaping.add(site)
        elif last in TRAINING_ARGUMENTS:
            verdict, detail = self._training_arguments(call, scope)
            self.training_arguments.append(OptimizerSite(
                *where, api=last, schedule=verdict, schedule_detail=detail,
                config=self._literal_string(keyword(call, "deepspeed"), scope) or "", scope=scope.name))
        elif last == "Trainer" and self._trainer_has_schedule(call):
            self.explicit_trainer_schedule = True
        elif name.endswith("deepspeed.initialize") or name == "initialize" and "deepspeed" in self.aliases.values():
            self._deepspeed(call, scope)
        else:
            verdict = self.schedule_verdict(call, scope)
            if verdict is not None:
                schedule = Schedule(*where, api=last, warmup=verdict[0], detail=verdict[1],
                                    optimizer=self._optimizer_text(self._optimizer_argument(call, scope)),
                                    scope=scope.name)
                self.schedules.append(schedule)
                self.schedule_targets[(scope.name, self._target(call))] = schedule
            elif isinstance(call.func, ast.Name) and call.func.id[:1].islower() and \
                    isinstance(self.parents.get(call), (ast.Assign, ast.AnnAssign)) and \
                    name.lstrip(".").split(".")[0] not in LIBRARY_ROOTS:
                # `self.scheduler = build_scheduler(cfg, optimizer)`: read once the whole file is walked
                self.pending_factories.append((call, scope, name, last))
            else:
                self._unresolved_call(call, scope, name, last)

    def _unresolved_call(self, call: ast.Call, scope: Scope, name: str, last: str) -> None:
        """A call reslint does not resolve: a schedule made elsewhere, a model class, a model factory."""
        where = (call.lineno, call.col_offset + 1)
        if SCHEDULE_LIKE.search(last) and any("opt" in ast.unparse(arg) for arg in call_arguments(call)):
            # `build_scheduler(optimizer, cfg)`: a schedule made elsewhere, maybe with a warmup.
            self.schedules.append(Schedule(*where, api=last, warmup=WARMUP_UNKNOWN,
                                           detail=f"`{last}()` is not resolved statically", scope=scope.name))
        elif last[:1].isupper():
            self._model_ref(call, name, last, scope)
        elif self._factory_call(call, name):
            # `model = build_model(args)`: the project links it to the classes the factory returns.
            self.model_refs.append(ModelRef(name, call.lineno, call.col_offset + 1, scope=scope.name))

    def _factory_call(self, call: ast.Call, name: str) -> bool:
        """A call of the project's own function whose result the training code keeps: a model factory
        when that function returns a model (see `factory_returns`)."""
        if not isinstance(self.parents.get(call), ast.Assign) or not isinstance(call.func, ast.Name):
            return False
        if call.func.id in self.functions:
            return True
        return call.func.id in self.aliases and not name.split(".")[0] in LIBRARY_ROOTS

    def _model_ref(self, call: ast.Call, name: str, last: str, scope: Scope) -> None:
        where = (call.lineno, call.col_offset + 1)
        post_ln = ""
        if name.startswith("torch.nn.") and last in POST_LN_TORCH_LAYERS:
            if is_true(keyword(call, "norm_first")):
                return
            post_ln = f"`nn.{last}` (norm_first=False)"
        elif name.startswith("transformers") and POST_LN_TRANSFORMERS.match(last) and \
                not PRE_LN_LOOKALIKES.match(last) and not last.endswith("Config"):
            post_ln = f"`{last}` (transformers, Post-LN)"
        self.model_refs.append(ModelRef(name, *where, post_ln=post_ln, scope=scope.name))

    def _target(self, call: ast.Call) -> str:
        parent = self.parents.get(call)
        if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and \
                isinstance(parent.targets[0], (ast.Name, ast.Attribute)):
            return ast.unparse(parent.targets[0])
        if isinstance(parent, ast.AnnAssign):
            return ast.unparse(parent.target)
        return f"@{call.lineno}:{call.col_offset + 1}"

    def _returned(self, call: ast.Call, scope: Scope) -> bool:
        """The optimizer leaves its function (a factory): the caller, maybe in another file, schedules it."""
        function = scope.node
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) or \
                function.name == "configure_optimizers":
            return False
        target = self._target(call)
        for node in ast.walk(function):
            if isinstance(node, ast.Return) and node.value is not None:
                values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
                if any(value is call or ast.unparse(value) == target for value in values):
                    return True
        return False

    def _optimizer_argument(self, call: ast.Call, scope: Scope) -> ast.expr | None:
        last = (self.qualified(call.func) or "").rsplit(".", 1)[-1]
        if last in ("get_scheduler", "create_scheduler", "InverseSquareRootSchedule"):
            return argument(call, 1, "optimizer")
        if last != "ChainedScheduler":
            return argument(call, 0, "optimizer")
        stages = self.resolve(argument(call, 0, "schedulers"), scope)
        if keyword(call, "optimizer") is None and isinstance(stages, (ast.List, ast.Tuple)) and stages.elts:
            first = self.resolve(stages.elts[0], scope)
            return argument(first, 0, "optimizer") if isinstance(first, ast.Call) else None
        return keyword(call, "optimizer")

    def _optimizer_text(self, node: ast.expr | None) -> str:
        if node is None:
            return ""
        if isinstance(node, ast.Call):
            return f"@{node.lineno}:{node.col_offset + 1}"
        return ast.unparse(node)

    def optimizer_sites(self) -> list[OptimizerSite]:
        scheduled_scopes = {schedule.scope for schedule in self.schedules}
        # A factory that returns its optimizer unscheduled leaves the schedule to its caller.
        sites = [site for site in self.optimizers if site not in self.escaping or site.scope in scheduled_scopes]
        if not self.explicit_trainer_schedule:
            sites.extend(self.training_arguments)
        return sorted(sites, key=lambda site: (site.line, site.column))

    def whole_schedules(self) -> list[Schedule]:
        """The schedules, without the stages of composite schedules (read as part of their composite)."""
        stages = {id(self.schedule_targets[key]) for key in self.stages if key in self.schedule_targets}
        return [schedule for schedule in self.schedules if id(schedule) not in stages]

    # ----- schedulers ----------------------------------------------------------------------------

    def schedule_verdict(self, call: ast.Call, scope: Scope, depth: int = 0) -> tuple[str, str] | None:
        """(warmup, why) for a scheduler call; None when the call is no scheduler reslint knows."""
        last = (self.qualified(call.func) or "").rsplit(".", 1)[-1]
        if last in NO_WARMUP_SCHEDULERS:
            return WARMUP_NO, f"{last} only decays the learning rate"
        if last in ("LambdaLR", "MultiplicativeLR"):
            functions = argument(call, 1, "lr_lambda")
            return self._lambda_verdict(functions, scope, multiplicative=last == "MultiplicativeLR")
        if last == "LinearLR":
            start = self.number(argument(call, 1, "start_factor"), scope, default=1 / 3)
            end = self.number(argument(call, 2, "end_factor"), scope, default=1.0)
            iters = self.number(argument(call, 3, "total_iters"), scope, default=5)
            if start is None or end is None or iters is None:
                return WARMUP_UNKNOWN, "LinearLR factors not resolved statically"
            if start < end and iters > 0:
                return WARMUP_YES, f"LinearLR ramps from {start:g} to {end:g}"
            return WARMUP_NO, f"LinearLR goes from start_factor {start:g} to end_factor {end:g}: a decay, not a warmup"
        if last == "ConstantLR":
            factor = self.number(argument(call, 1, "factor"), scope, default=1 / 3)
            iters = self.number(argument(call, 2, "total_iters"), scope, default=5)
            if factor is None or iters is None:
                return WARMUP_UNKNOWN, "ConstantLR factor not resolved statically"
            if factor < 1 and iters > 0:
                return WARMUP_YES, f"ConstantLR holds {factor:g}x the learning rate for the first {iters:g} steps"
            return WARMUP_NO, "ConstantLR does not lower the first steps' learning rate"
        if last in ("SequentialLR", "ChainedScheduler"):
            return self._composite_verdict(call, scope, last, depth)
        if last == "OneCycleLR":
            pct = self.number(argument(call, 4, "pct_start"), scope, default=0.3)
            if pct is None:
                return WARMUP_UNKNOWN, "OneCycleLR pct_start not resolved statically"
            if pct > 0:
                return WARMUP_YES, f"OneCycleLR warms up over the first {pct:g} of training"
            return WARMUP_NO, "OneCycleLR with pct_start=0 starts at the peak learning rate"
        if last == "CyclicLR":
            return WARMUP_YES, "CyclicLR starts at base_lr and rises"
        if last in TRANSFORMERS_WARMUP_SCHEDULES:
            return self._count_verdict(argument(call, 1, "num_warmup_steps"), scope, "num_warmup_steps",
                                       default=None)
        if last == "get_scheduler":
            kind = self._literal_string(argument(call, 0, "name"), scope)
            if kind is not None and kind.rsplit(".", 1)[-1].lower() in NO_WARMUP_SCHEDULER_NAMES:
                return WARMUP_NO, f'get_scheduler("{kind}") has no warmup'
            return self._count_verdict(argument(call, 2, "num_warmup_steps"), scope, "num_warmup_steps", default=0)
        if last in TIMM_SCHEDULERS:
            return self._count_verdict(keyword(call, "warmup_t"), scope, "warmup_t", default=0)
        if last == "create_scheduler_v2":
            return self._count_verdict(keyword(call, "warmup_epochs"), scope, "warmup_epochs", default=5)
        if last == "create_scheduler":
            return WARMUP_UNKNOWN, "timm create_scheduler reads warmup_epochs from its args"
        if last in DEEPSPEED_SCHEDULERS:
            return self._count_verdict(keyword(call, "warmup_num_steps"), scope, "warmup_num_steps", default=1000)
        if last == "LinearWarmupCosineAnnealingLR":
            return self._count_verdict(argument(call, 1, "warmup_epochs"), scope, "warmup_epochs", default=None)
        if last == "InverseSquareRootSchedule":
            config = self.resolve(argument(call, 0, "cfg"), scope)
            if isinstance(config, ast.Call) and (self.qualified(config.func) or "").endswith(
                    "InverseSquareRootLRScheduleConfig"):
                return self._count_verdict(keyword(config, "warmup_updates"), scope, "warmup_updates", default=4000)
            return self._count_verdict(None, scope, "warmup_updates", default=4000)
        if self._literal_string(keyword(call, "lr_scheduler"), scope) == "inverse_sqrt":
            return self._count_verdict(keyword(call, "warmup_updates"), scope, "warmup_updates", default=4000)
        return None

    def _count_verdict(self, node: ast.expr | None, scope: Scope, name: str,
                       default: float | None) -> tuple[str, str]:
        if node is None:
            if default is None:
                return WARMUP_UNKNOWN, f"{name} not given"
            return (WARMUP_YES if default > 0 else WARMUP_NO), f"{name} not set (default {default:g})"
        value = self.number(node, scope)
        if value is None:
            value, config = self.config_number(node, scope)
            if value is not None:
                return (WARMUP_YES if value > 0 else WARMUP_NO), f"{name}={value:g} ({config})"
        if value is None:
            return WARMUP_UNKNOWN, f"{name}={ast.unparse(node)} not resolved statically"
        if value > 0:
            return WARMUP_YES, f"{name}={value:g}"
        return WARMUP_NO, f"{name}={value:g}"

    def _composite_verdict(self, call: ast.Call, scope: Scope, kind: str, depth: int) -> tuple[str, str]:
        stages = argument(call, 1 if kind == "SequentialLR" else 0, "schedulers")
        stages = self.resolve(stages, scope)
        if not isinstance(stages, (ast.List, ast.Tuple)) or not stages.elts or depth > 4:
            return WARMUP_UNKNOWN, f"{kind} stages not resolved statically"
        # SequentialLR runs its stages one after another: only the first one shapes the start.
        elements = stages.elts[:1] if kind == "SequentialLR" else stages.elts
        verdicts = []
        for element in stages.elts:
            self.stages.add((scope.name, ast.unparse(element) if isinstance(element, (ast.Name, ast.Attribute))
                             else f"@{element.lineno}:{element.col_offset + 1}"))
        for element in elements:
            stage = self.resolve(element, scope)
            verdict = self.schedule_verdict(stage, scope, depth + 1) if isinstance(stage, ast.Call) else None
            verdicts.append(verdict or (WARMUP_UNKNOWN, f"stage `{ast.unparse(element)}` not resolved"))
        for verdict in verdicts:
            if verdict[0] == WARMUP_YES:
                return WARMUP_YES, f"{kind} starts with a warmup: {verdict[1]}"
        for verdict in verdicts:
            if verdict[0] == WARMUP_UNKNOWN:
                return verdict
        which = "first stage does" if kind == "SequentialLR" else "stages do"
        return WARMUP_NO, f"{kind}'s {which} not warm up: {verdicts[0][1]}"

    def _lambda_verdict(self, functions: ast.expr | None, scope: Scope, multiplicative: bool) -> tuple[str, str]:
        functions = self.resolve(functions, scope)
        if functions is None:
            return WARMUP_UNKNOWN, "lr_lambda not given"
        elements = functions.elts if isinstance(functions, (ast.List, ast.Tuple)) else [functions]
        verdicts = [self.function_verdict(element, scope, multiplicative) for element in elements]
        for wanted in (WARMUP_YES, WARMUP_UNKNOWN, WARMUP_NO):
            for verdict in verdicts:
                if verdict[0] == wanted:
                    return verdict
        return WARMUP_UNKNOWN, "lr_lambda not resolved statically"

    def function_verdict(self, node: ast.expr, scope: Scope, multiplicative: bool = False) -> tuple[str, str]:
        """Does the schedule function `f(step) -> factor` grow over the first steps?"""
        node = self.resolve(node, scope)
        if isinstance(node, ast.Call) and (self.qualified(node.func) or "").endswith("partial") and node.args:
            node = self.resolve(node.args[0], scope)
        if isinstance(node, ast.Lambda):
            steps = {arg.arg for arg in node.args.args[:1]}
            shape = Shape(self, scope, steps).of(node.body)
            text = f"`{ast.unparse(node)}`"
        elif isinstance(node, ast.Name) and node.id in self.functions:
            function = self.functions[node.id]
            shape = Shape(self, Scope(function, scope), {arg.arg for arg in function.args.args[:1]}).of_function(
                function)
            text = f"`{node.id}()`"
        else:
            return WARMUP_UNKNOWN, "the schedule function is not resolved statically"
        if multiplicative:
            # MultiplicativeLR multiplies the learning rate by f(step) each step: a warmup returns factors > 1.
            grows = shape == CONST and self._constant_factor(node, scope) not in (None,) and \
                self._constant_factor(node, scope) > 1
            if grows or shape in (RAMP, INC):
                return WARMUP_YES, f"{text} grows the learning rate"
            return (WARMUP_NO, f"{text} never raises the learning rate") if shape in (CONST, DEC) else \
                (WARMUP_UNKNOWN, f"{text}: direction not resolved statically")
        if shape in (RAMP, INC):
            return WARMUP_YES, f"{text} ramps the learning rate up"
        if shape in (CONST, DEC):
            return WARMUP_NO, f"{text} never ramps the learning rate up"
        return WARMUP_UNKNOWN, f"{text}: shape not resolved statically"

    def _constant_factor(self, node: ast.expr, scope: Scope) -> float | None:
        return self.number(node.body, scope) if isinstance(node, ast.Lambda) else None

    def _manual_lr(self, statement: ast.Assign | ast.AugAssign, scope: Scope) -> None:
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        if not any(isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant) and t.slice.value == "lr"
                   for t in targets):
            return
        shape = Shape(self, scope, set(), step_like_names=True).of(statement.value)
        text = ast.unparse(statement.value)
        if shape in (RAMP, INC) or re.search(r"warm", text, re.I):
            verdict = (WARMUP_YES, f"the learning rate set to `{text}` ramps up")
        elif shape in (CONST, DEC):
            verdict = (WARMUP_NO, f"the learning rate set to `{text}` never ramps up")
        else:
            verdict = (WARMUP_UNKNOWN, f"`{text}`: shape not resolved statically")
        self.schedules.append(Schedule(statement.lineno, statement.col_offset + 1, "manual learning-rate update",
                                       *verdict, scope=scope.name))

    # ----- transformers, DeepSpeed ---------------------------------------------------------------

    def _training_arguments(self, call: ast.Call, scope: Scope) -> tuple[str, str]:
        kind = self._literal_string(keyword(call, "lr_scheduler_type"), scope)
        if kind is not None and kind.rsplit(".", 1)[-1].lower() in NO_WARMUP_SCHEDULER_NAMES:
            return WARMUP_NO, f'lr_scheduler_type="{kind}" has no warmup'
        verdicts = [self._count_verdict(keyword(call, name), scope, name, default=0)
                    for name in ("warmup_steps", "warmup_ratio")]
        for wanted in (WARMUP_YES, WARMUP_UNKNOWN):
            for verdict in verdicts:
                if verdict[0] == wanted:
                    return verdict
        return WARMUP_NO, "warmup_steps and warmup_ratio are 0 (the default)"

    def _trainer_has_schedule(self, call: ast.Call) -> bool:
        pair = keyword(call, "optimizers")
        return isinstance(pair, ast.Tuple) and len(pair.elts) == 2 and not (
            isinstance(pair.elts[1], ast.Constant) and pair.elts[1].value is None)

    def _deepspeed(self, call: ast.Call, scope: Scope) -> None:
        config = keyword(call, "config") or keyword(call, "config_params")
        path = self._literal_string(config, scope)
        resolved = self.resolve(config, scope)
        where = (call.lineno, call.col_offset + 1)
        if isinstance(resolved, ast.Dict):
            try:
                data = literal_eval(resolved)
            except (ValueError, SyntaxError, TypeError, RecursionError):
                data = None
            verdict = deepspeed_schedule(data) if isinstance(data, dict) else None
            if verdict is not None:
                self._deepspeed_site(call, where, verdict, "", scope.name)
                return
            verdict = (WARMUP_UNKNOWN, "DeepSpeed config not resolved statically")
            self._deepspeed_site(call, where, verdict, "", scope.name)
            return
        self._deepspeed_site(call, where, ("", ""), path if path is not None else "*", scope.name)

    def _deepspeed_site(self, call: ast.Call, where: tuple, verdict: tuple[str, str], config: str,
                        scope: str) -> None:
        if keyword(call, "lr_scheduler") is not None:
            return  # a scheduler object the file builds itself, read where it is built
        if keyword(call, "optimizer") is None:
            self.optimizers.append(OptimizerSite(*where, api="deepspeed.initialize", schedule=verdict[0],
                                                 schedule_detail=verdict[1], config=config, scope=scope))
        elif verdict[0] or config:
            self.schedules.append(Schedule(*where, api="DeepSpeed config", warmup=verdict[0] or WARMUP_UNKNOWN,
                                           detail=verdict[1], config=config, scope=scope))

    # ----- values --------------------------------------------------------------------------------

    def resolve(self, node: ast.expr | None, scope: Scope, depth: int = 0) -> ast.expr | None:
        """Follow a name to the expression last assigned to it (module or enclosing functions)."""
        while isinstance(node, (ast.Name, ast.Attribute)) and depth < 8:
            value = scope.lookup(ast.unparse(node))
            if value is None:
                return node
            node, depth = value, depth + 1
        return node

    def number(self, node: ast.expr | None, scope: Scope, default: float | None = None) -> float | None:
        """A numeric value the source spells (literals, arithmetic, names bound to them); None if unknown."""
        if node is None:
            return default
        return fold_number(self.resolve(node, scope), lambda n: self.resolve(n, scope))

    def config_number(self, node: ast.expr, scope: Scope) -> tuple[float | None, str]:
        """A number the code takes from a YAML/JSON/Hydra config file, and that file's name (None, "")."""
        value, config = self.config_value(node, scope)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None, ""
        return float(value), config

    def config_value(self, node: ast.expr | None, scope: Scope):
        """A value the code takes from a YAML/JSON/Hydra config file (`cfg["train"]["warmup_steps"]`,
        `cfg.optim.warmup_steps` under `@hydra.main`), and the files it was read from; (None, "") otherwise."""
        if self.path is None or not isinstance(node, (ast.Subscript, ast.Attribute, ast.Call, ast.Name)):
            return None, ""
        from reslint.discovery import display_path
        from reslint.static.config_files import CONFIG_SUFFIXES
        from reslint.static.construction_sites import Evaluator, FileReader, Finder, Unevaluable

        if self._values is None:
            finder = Finder(self.path, self.root or ".", set(), set(), local_only=True)
            self._values = FileReader(os.path.abspath(self.path), self.tree, finder)
        evaluator = Evaluator(self._values)
        try:
            value = evaluator.value(node, scope.node)
        except (Unevaluable, RecursionError):
            return None, ""
        configs = sorted(read for read in evaluator.reads if read.endswith(CONFIG_SUFFIXES))
        if not configs:
            return None, ""
        self.config_reads.extend(read for read in configs if read not in self.config_reads)
        return value, ", ".join(display_path(read) for read in configs)

    def _literal_string(self, node: ast.expr | None, scope: Scope) -> str | None:
        resolved = self.resolve(node, scope)
        if isinstance(resolved, ast.Constant) and isinstance(resolved.value, str):
            return resolved.value
        value, _ = self.config_value(node, scope)
        return value if isinstance(value, str) else None


class Shape:
    """How an expression moves as the step grows: increasing, decreasing, constant, a ramp
    (increasing at first, then capped, e.g. `min(step / warmup, 1)`), or unknown."""

    def __init__(self, reader: TrainingReader, scope: Scope, steps: set[str], step_like_names: bool = False,
                 depth: int = 0):
        self.reader = reader
        self.scope = scope
        self.steps = steps
        self.step_like_names = step_like_names
        self.depth = depth

    def is_step(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name) and node.id in self.steps:
            return True
        if self.step_like_names and isinstance(node, (ast.Name, ast.Attribute)):
            name = node.id if isinstance(node, ast.Name) else node.attr
            return bool(STEP_LIKE.search(name))
        return False

    def of_function(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
        shapes = [self.of(node.value) for node in ast.walk(function)
                  if isinstance(node, ast.Return) and node.value is not None]
        if any(shape in (RAMP, INC) for shape in shapes):
            return RAMP
        if shapes and all(shape in (CONST, DEC) for shape in shapes):
            constants = [self.reader.number(node.value, self.scope) for node in ast.walk(function)
                         if isinstance(node, ast.Return) and node.value is not None]
            # `if step < warmup: return 0.1` then `return 1.0`: a step-wise warmup.
            if len(constants) > 1 and None not in constants and constants[0] < constants[-1]:
                return RAMP
            return DEC if DEC in shapes else CONST
        return UNKNOWN

    def of(self, node: ast.expr | None) -> str:
        if node is None or self.depth > 12:
            return UNKNOWN
        self.depth += 1
        try:
            return self._of(node)
        finally:
            self.depth -= 1

    def _of(self, node: ast.expr) -> str:
        if self.is_step(node):
            return INC
        if isinstance(node, ast.Constant):
            return CONST
        if isinstance(node, (ast.Name, ast.Attribute)):
            value = self.scope.lookup(ast.unparse(node))
            if value is not None and not (isinstance(node, ast.Name) and node.id in self.steps):
                return self.of(value)
            return CONST
        if isinstance(node, ast.UnaryOp):
            inner = self.of(node.operand)
            return negate(inner) if isinstance(node.op, ast.USub) else inner
        if isinstance(node, ast.BinOp):
            return self._binary(node)
        if isinstance(node, ast.IfExp):
            test = self.of(node.test)
            body, orelse = self.of(node.body), self.of(node.orelse)
            if test != CONST and (body in (INC, RAMP) or orelse in (INC, RAMP)):
                return RAMP
            return combine(body, orelse) if test == CONST else (body if body == orelse else UNKNOWN)
        if isinstance(node, ast.Compare):
            parts = [self.of(node.left)] + [self.of(c) for c in node.comparators]
            return CONST if all(p == CONST for p in parts) else UNKNOWN
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.Subscript):
            return CONST if all(self.of(n) == CONST for n in (node.value,)) else UNKNOWN
        return UNKNOWN

    def _binary(self, node: ast.BinOp) -> str:
        left, right = self.of(node.left), self.of(node.right)
        op = node.op
        if isinstance(op, ast.Add):
            return combine(left, right)
        if isinstance(op, ast.Sub):
            return combine(left, negate(right))
        if isinstance(op, ast.Mult):
            return combine(left, right) if CONST in (left, right) or left == right else UNKNOWN
        if isinstance(op, (ast.Div, ast.FloorDiv)):
            if right == CONST:
                return left
            if left == CONST:
                return negate(right)
            return UNKNOWN
        if isinstance(op, ast.Pow):
            if right == CONST:
                exponent = self.reader.number(node.right, self.scope)
                if exponent is None:
                    return CONST if left == CONST else UNKNOWN
                return negate(left) if exponent < 0 else (CONST if exponent == 0 else left)
            if left == CONST:
                base = self.reader.number(node.left, self.scope)
                if base is None:
                    return UNKNOWN
                return negate(right) if base < 1 else (right if base > 1 else CONST)
        return UNKNOWN

    def _call(self, node: ast.Call) -> str:
        name = (self.reader.qualified(node.func) or "").rsplit(".", 1)[-1]
        shapes = [self.of(arg) for arg in node.args]
        if name == "min":
            if any(shape in (INC, RAMP) for shape in shapes):
                return RAMP
            return DEC if DEC in shapes and UNKNOWN not in shapes else (CONST if all(
                s == CONST for s in shapes) else UNKNOWN)
        if name == "max":
            if any(shape == INC for shape in shapes) and DEC not in shapes:
                return INC
            if DEC in shapes and all(s in (DEC, CONST) for s in shapes):
                return DEC
            return CONST if all(s == CONST for s in shapes) else UNKNOWN
        if name in ("float", "int", "sqrt", "exp", "log", "floor", "ceil", "tensor", "abs") and len(shapes) == 1:
            return shapes[0]
        if name == "cos" and len(shapes) == 1:
            # cos(pi * progress) over [0, pi]: the cosine decay every schedule library uses.
            return negate(shapes[0]) if shapes[0] == INC else (CONST if shapes[0] == CONST else UNKNOWN)
        function = self.reader.functions.get(name) if isinstance(node.func, ast.Name) else None
        if function is not None and self.depth < 10:
            params = [arg.arg for arg in function.args.args]
            steps = {param for param, shape in zip(params, shapes) if shape == INC}
            inner = Shape(self.reader, Scope(function, self.scope), steps, self.step_like_names, self.depth + 1)
            return inner.of_function(function) if steps else CONST
        return CONST if all(shape == CONST for shape in shapes) and not node.keywords else UNKNOWN


def combine(first: str, second: str) -> str:
    if first == CONST:
        return second
    if second == CONST or first == second:
        return first
    if {first, second} == {INC, RAMP}:
        return RAMP
    return UNKNOWN


def negate(shape: str) -> str:
    return {INC: DEC, DEC: INC, CONST: CONST}.get(shape, UNKNOWN)


def fold_number(node: ast.expr | None, resolve, depth: int = 0) -> float | None:
    if node is None or depth > 16:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.Constant) and node.value is None:
        return 0.0  # `num_warmup_steps=None`: no warmup steps
    if isinstance(node, (ast.Name, ast.Attribute)):
        resolved = resolve(node)
        return None if resolved is node else fold_number(resolved, resolve, depth + 1)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = fold_number(node.operand, resolve, depth + 1)
        return None if value is None else (-value if isinstance(node.op, ast.USub) else value)
    if isinstance(node, ast.BinOp):
        left, right = fold_number(node.left, resolve, depth + 1), fold_number(node.right, resolve, depth + 1)
        if left is None or right is None:
            return None
        try:
            if isinstance(node.op, ast.Add):
                return left + right
            if isinstance(node.op, ast.Sub):
                return left - right
            if isinstance(node.op, ast.Mult):
                return left * right
            if isinstance(node.op, ast.Div):
                return left / right
            if isinstance(node.op, ast.FloorDiv):
                return float(left // right)
            if isinstance(node.op, ast.Pow) and abs(right) < 64:
                result = left ** right
                return float(result) if isinstance(result, (int, float)) else None
        except (ZeroDivisionError, OverflowError, ValueError):
            return None
    return None


def deepspeed_schedule(config: dict) -> tuple[str, str] | None:
    """The warmup verdict of a DeepSpeed config's "scheduler" section (None: the config has none)."""
    scheduler = config.get("scheduler")
    if not isinstance(scheduler, dict):
        return (WARMUP_NO, "the DeepSpeed config has no scheduler") if "optimizer" in config else None
    kind = str(scheduler.get("type", ""))
    params = scheduler.get("params") if isinstance(scheduler.get("params"), dict) else {}
    if kind in DEEPSPEED_SCHEDULERS:
        steps = params.get("warmup_num_steps", 1000)
        if isinstance(steps, (int, float)) and not isinstance(steps, bool):
            return (WARMUP_YES if steps > 0 else WARMUP_NO), f"DeepSpeed {kind} with warmup_num_steps={steps:g}"
        return WARMUP_UNKNOWN, f"DeepSpeed {kind} with warmup_num_steps={steps!r}"
    if kind == "OneCycle":
        return WARMUP_YES, "DeepSpeed OneCycle starts with a rising phase"
    return WARMUP_UNKNOWN, f"DeepSpeed scheduler {kind or '?'} not recognised"


def argument(call: ast.Call, position: int, name: str) -> ast.expr | None:
    found = keyword(call, name)
    if found is not None:
        return found
    positional = [arg for arg in call.args if not isinstance(arg, ast.Starred)]
    if len(positional) == len(call.args) and position < len(positional):
        return positional[position]
    return None


def call_arguments(call: ast.Call) -> list[ast.expr]:
    return [*call.args, *(item.value for item in call.keywords)]


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    for item in call.keywords:
        if item.arg == name:
            return item.value
    return None


def is_true(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True
