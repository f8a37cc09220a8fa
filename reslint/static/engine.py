"""Static engine: libcst source → facts. Never imports torch or the checked code.

Facts that need the rest of the project are asked of the project index (`reslint.project_index`):
whether a model of another file builds this file's classes (a convolution module with BatchNorm1d
is part of the sequence model that builds it, RL201), and whether modules of other files call this
file's free functions as norms (RL401 on `def fast_layer_norm(x, ...)` where it is written).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

import libcst as cst

from reslint.facts import AnalysisLimit, FileFacts, LinearChain, ModelFacts, NormOp, ResidualAdd, Span, Stack
from reslint.placement import PLACEMENT_FLAG_WORDS, combined_placement
from reslint.static import torch_api
from itertools import product

from reslint.static.built_elsewhere import site_specs, value_at_sites
from reslint.static.chained_defaults import parameter_value
from reslint.static.dataflow import BudgetExceeded, Evaluator, PlainEvaluations, budget_limits, file_budget
from reslint.static.graph import Graph, Node, strip_passthrough
from reslint.static.group_norm_layers import derives_from_group_norm, non_causal_group_norm
from reslint.static.imported_blocks import imported_block_placement
from reslint.static.index import UNKNOWN, ClassInfo, FileIndex, ModuleSpec
from reslint.static.norms import LAYER, find_hand_written_norms, norm_role
from reslint.static.positions import SourceMap
from reslint.static.residuals import find_residuals
from reslint.static.sequence_context import column_tables, markers_elsewhere
from reslint.static.stream_end import (VERDICTS as STREAM_END_VERDICTS, branch_alternatives, consumed_classes,
                                       final_norm, inherited_forward, inside_blocks_elsewhere, loaded_classes,
                                       reached_into, stack_sources, stream_end, visible_loaders)

FFN_CLASS_HINTS = ("feedforward", "ffn", "mlp", "feed_forward", "positionwise")
FFN_ATTR_PAIRS = {("w1", "w2"), ("fc1", "fc2"), ("c_fc", "c_proj"), ("up_proj", "down_proj"), ("lin1", "lin2"),
                  ("linear1", "linear2"), ("dense_h_to_4h", "dense_4h_to_h"), ("wi", "wo"), ("up", "down"),
                  ("fc_in", "fc_out"), ("intermediate", "output"), ("w_1", "w_2")}
FFN_WIDTH_HINTS = ("d_ff", "ffn", "hidden_dim", "intermediate", "d_inner", "mlp", "4 *", "4*", "* 4", "*4",
                   "dim_feedforward", "ff_dim", "mlp_ratio")
FFN_CONTAINER_HINTS = ("mlp[", "ffn[", "ff[", "feed_forward[", "fc[")
LOW_RANK_HINTS = ("lora", "adapter", "bottleneck", "low_rank", "lowrank")
NOT_FFN_OWNERS = ("attention", "projector", "embed", "head", "classifier", "scaler", "pooler")
STATISTIC_WORDS = ("var", "std", "mean", "rsqrt", "pow")  # a free function without any of them computes no norm
# An affine parameter shaped to broadcast over channels-first maps: `torch.ones(1, dim, 1, 1)`, `[1, C, 1, 1]`,
# `[1, dims[0], 1, dims[1]]` (per channel and frequency, shared over time).
CHANNEL_PARAMETER_SHAPE = re.compile(r"[(\[]1,[A-Za-z_][\w.]*(\[\d+\])?,1(,[\w.]+(\[\d+\])?)?[)\]]")
BUILTIN_LAYERS = ("TransformerEncoderLayer", "TransformerDecoderLayer")
BUILTIN_STACKS = {"TransformerEncoder": "TransformerEncoderLayer", "TransformerDecoder": "TransformerDecoderLayer"}


def extract_facts(path: str, module: cst.Module, source_path: str | None = None, builders: bool = True,
                  text: str | None = None, tree=None) -> FileFacts:
    """`source_path`: where the file lies (default `path`), to read the project files it relates to
    (through `reslint.project_index`). `builders`: whether to look at the classes of other files that
    build this file's classes (off for those other files themselves). `text` and `tree`: the module's
    source and CPython's AST of it, to place only the statements a fact reports (see SourceMap)."""
    return StaticExtractor(path, module, SourceMap(module, text, tree), source_path or path, builders).run()


class StaticExtractor:
    def __init__(self, path: str, module: cst.Module, positions: SourceMap, source_path: str | None = None,
                 builders: bool = False):
        self.path = path
        self.module = module
        self.positions = positions
        self.source_path = source_path
        self.builders = builders and source_path is not None
        self.index = FileIndex(module, source_path, positions.text)
        self.facts = FileFacts(path=path, engine="static", reads=list(self.index.config_reads))
        self.norm_kinds: dict[str, str | None] = {}
        self.builtin_owners: dict[tuple[int, int], str] = {}  # torch layer's place -> the class building it
        self.init_calls: dict[ClassInfo, set[str]] = {}  # _built_in_init's answers: every model's closure asks
        self.plain_evaluations = PlainEvaluations()

    def _evaluator(self, norm_kinds: dict[str, str | None]) -> Evaluator:
        evaluator = Evaluator(self.index, self.positions, self.path)
        evaluator.norm_class_kinds = norm_kinds
        evaluator.plain_evaluations = self.plain_evaluations
        return evaluator

    def span(self, node: cst.CSTNode | None, within: cst.CSTNode | None = None) -> Span:
        """`within`: the class or function the node is written in, when known (see SourceMap.line_column)."""
        start = self.positions.line_column(node, within) if node is not None else None
        if start is None:
            return Span(self.path, 1, 1)
        return Span(self.path, start[0], start[1] + 1)

    def node_span(self, node: Node) -> Span:
        return Span(self.path, node.line, node.column)

    # ----- driver ----------------------------------------------------------------------------

    def run(self) -> FileFacts:
        module_classes = [info for info in self.index.classes.values() if self.index.is_module_class(info)]
        used = self._used_as_submodule(module_classes)
        self.plain_evaluations.built = used
        outermost = [info for info in module_classes if info.name not in used]
        # Facts gathered over every class evaluated as a root; a place seen from several roots is kept once.
        self.residual_facts: dict[tuple, ResidualAdd] = {}
        # Root -> its view of each add: a block two roots build differently (one passes `layer_norm="pre"`)
        # is summarised in each model as that model builds it.
        self.seen_from: dict[str, dict[tuple, ResidualAdd]] = {}
        self.final_norms: dict[str, bool | None] = {}
        self.iterations: dict[str, tuple[int, int] | Callable[[], tuple[int, int]]] = {}  # see Graph.stack_iterations
        self.chains: dict[tuple[int, int], LinearChain] = {}
        self.hand_norms: dict[tuple[int, int], NormOp] = {}
        self.graphs: dict[str, Graph] = {}
        norm_kinds: dict[str, str | None] = {}
        self.norm_kinds_seen = norm_kinds
        # ids of graphs of a class evaluated otherwise than as written and built by default (another file's
        # constructor arguments, an inherited forward): a second look at its default call is not the same graph.
        self.evaluated_otherwise: set[int] = set()
        self.ordinary_calls: dict[tuple, Graph | None] = {}  # RL103: (root, assumed flags) -> graph without optional inputs
        self.alternative_facts: dict[tuple, ResidualAdd] = {}
        self.standalone: dict[tuple, bool] = {}  # residual fact key -> seen only with its block as the root
        self.in_context: set = set()  # blocks, and places of adds, seen inside a class that builds the block
        self.flagged: set[str] = set()  # classes whose forward branches on a placement flag
        self.module_classes = module_classes
        self.wrapper_flags: dict[tuple[str, str], object] = {}  # (class, parameter) -> what its construction sites pass
        consumed = used | consumed_classes(self.index, module_classes)
        self.built_here = used
        self.deferred: dict[str, tuple[str, ...]] = {}
        self.passed_on: set[str] = set()
        self.loaded = loaded_classes(self.index, module_classes)
        self.loaded_streams: dict[str, set[str]] = {}  # stack key -> the roots loaded through a registry passing it on
        self.unclaimed: dict[str, set[str]] = {}  # stack key -> roots passing it on to no module class of this file
        for info in module_classes:
            for graph, assumed, other in self._evaluations(info, norm_kinds):
                if not other:
                    self.graphs.setdefault(info.name, graph)
                self._collect(graph, assumed, other, info.name, info.name in consumed)
        self._streams_through_visible_loaders(module_classes, consumed)
        self._streams_through_inherited_forwards(consumed)
        self._norm_functions_used_elsewhere(norm_kinds)
        run_from_outside = reached_into(self.index)
        for key, roots in self.deferred.items():
            # No class building the root followed the stream (nor runs the stack itself): the root's output stands.
            if key not in self.final_norms and key not in self.passed_on and key.rsplit(".", 1)[-1] not in run_from_outside:
                self.final_norms[key] = False
                self.facts.open_streams[key] = roots
        for key, roots in list(self.facts.open_streams.items()):
            if self.builders and self.final_norms.get(key) is False and all(
                    inside_blocks_elsewhere(self.source_path, root, self.facts.reads, extract_facts) for root in roots):
                self.final_norms[key] = None  # a sub-stack of other files' blocks: their stream ends elsewhere
                del self.facts.open_streams[key]
        self._finish(module_classes, outermost)
        # The files the project index read for defaults while the classes were evaluated: a cached result
        # goes stale when one of them changes.
        self.facts.reads.extend(path for path in self.index.config_reads if path not in self.facts.reads)
        self.facts.limits = [AnalysisLimit(Span(self.path, hit.line, hit.column), hit.budget, budget_limits()[hit.budget])
                             for hit in file_budget(self.index).hits.values()]
        return self.facts

    def _norm_functions_used_elsewhere(self, norm_kinds) -> None:
        """Hand-written norms in free functions that modules of other project files call (`fast_layer_norm`
        imported by a LayerNorm class): judged here, where they are written. A function no module calls
        (a metric, input scaling) is not a norm layer."""
        if not self.builders:
            return
        from reslint.project_index import ProjectIndex, project_path

        project = None
        for name, function in self.index.functions.items():
            if "norm" not in name.lower() or not any(word in self.positions.code(function) for word in STATISTIC_WORDS):
                continue
            project = project or ProjectIndex.for_file(self.source_path)
            callers = [site for site in project.construction_sites(self.source_path, name)
                       if site.scope_is_class and site.path != project_path(self.source_path)]
            if not any(project.is_module_class(site.path, site.scope, type(self.index)) for site in callers):
                continue
            self.facts.reads.extend(dict.fromkeys(str(site.path) for site in callers))
            evaluator = self._evaluator(norm_kinds)
            try:
                graph = evaluator.evaluate_function(function, owner=name)
            except BudgetExceeded:
                continue
            for norm in find_hand_written_norms(graph):
                self._add_hand_norm(self._hand_written_fact(norm, norm_role(norm, graph, model_inputs=False)))

    def _evaluations(self, info: ClassInfo, norm_kinds):
        """One graph per assignment of the configuration flags the forward branches on (at most two flags),
        then one per placement flag whose default is known, with the other value: (graph, assumed, other)."""
        evaluator = self._evaluator(norm_kinds)
        try:  # over the file's work budget: this class yields no graph, the facts found so far stand (RL904)
            graph = evaluator.evaluate_class(info)
        except BudgetExceeded:
            return
        flags = sorted(evaluator.undecided, key=_placement_flag_first)[:2]
        defaults = [flag for flag in evaluator.flag_defaults if _placement_flag_first(flag) == 0]
        if defaults or any(_placement_flag_first(flag) == 0 for flag in evaluator.undecided):
            self.flagged.add(info.name)
        if defaults and not flags and self.builders and info.name not in self.built_here:
            built = yield from self._as_built_elsewhere(info, norm_kinds)
            if built:
                return
        if not flags:
            yield graph, (), ""
        for values in product((True, False), repeat=len(flags)) if flags else ():
            assumed = self._evaluator(norm_kinds)
            assumed.assumptions = dict(zip(flags, values))
            try:
                graph = assumed.evaluate_class(info)
            except BudgetExceeded:
                return
            yield graph, tuple((("flag", flag), 0 if value else 1) for flag, value in zip(flags, values)), ""
        for flag in defaults[:2]:
            other = self._evaluator(norm_kinds)
            other.assumptions = {flag: not evaluator.flag_defaults[flag]}
            try:
                graph = other.evaluate_class(info)
            except BudgetExceeded:
                return
            yield graph, (), flag_text(flag, not evaluator.flag_defaults[flag])

    def _as_built_elsewhere(self, info: ClassInfo, norm_kinds):
        """A block whose placement flag the stacks of other files set: one graph per way they build it
        (their placement is its placement, its own default is not). False when no stack elsewhere builds it
        with other placement arguments than its defaults."""
        specs, sites = site_specs(self.index, self.source_path, info)
        self.facts.reads.extend(path for path in dict.fromkeys(str(site.path) for site in sites)
                                if path not in self.facts.reads)
        for spec in specs:
            evaluator = self._evaluator(norm_kinds)
            try:
                graph = evaluator.evaluate_class(info, spec)
            except BudgetExceeded:
                return True
            self.evaluated_otherwise.add(id(graph))  # its default call would drop how it is built
            yield graph, (), ""
        return bool(specs)

    def _collect(self, graph: Graph, assumed: tuple, other: str = "", root: str = "",
                 consumed: bool = False) -> None:
        if other:
            # The branch a flag takes only when its default is changed: mentioned, never the placement.
            for residual in find_residuals(graph, self.index):
                fact = replace(self._residual_fact(residual), alternative=other)
                self.alternative_facts.setdefault((fact.span.line, fact.span.column, fact.stack, other), fact)
            return
        for norm in find_hand_written_norms(graph):
            self._add_hand_norm(self._hand_written_fact(norm, norm_role(norm, graph, model_inputs=not consumed)))
        residuals = find_residuals(graph, self.index)
        self._collect_residuals(residuals, assumed, root)
        if root and graph.default_call_differs and id(graph) not in self.evaluated_otherwise:
            default_call = self._default_call(root, assumed)
            if default_call is not None:
                self._collect_residuals(find_residuals(default_call, self.index), assumed, root)
        self._collect_stream_ends(graph, root, consumed, assumed)
        for key, where in graph.stack_iterations.items():
            self.iterations.setdefault(key, where)
        for chain in self._linear_chains(graph):
            self.chains.setdefault((chain.span.line, chain.span.column), chain)

    def _collect_residuals(self, residuals, assumed: tuple, root: str) -> None:
        for residual in residuals:
            fact = self._residual_fact(residual, assumed)
            key = (fact.span.line, fact.span.column, fact.stack, fact.condition)
            self.residual_facts[key] = _prefer(self.residual_facts.get(key), fact)
            seen = self.seen_from.setdefault(root, {})
            seen[key] = _prefer(seen.get(key), fact)
            if fact.block == root:
                self.standalone.setdefault(key, True)
            else:
                self.standalone[key] = False
                self.in_context.update((fact.block, key[:2]))

    def _default_call(self, root: str, assumed: tuple) -> Graph | None:
        """`root` called as a user calls it, every forward argument that defaults to None left out: the first
        look takes such an argument as given, so `if residual is None: residual = x` (TFT's gated residual
        network) or `skip = torch.cat((x, tgt))` only when `tgt` is passed hid the identity stream. Its
        residuals join the first look's: an add found either way stands."""
        evaluator = self._evaluator(self.norm_kinds_seen)
        evaluator.assumptions = {flag: value == 0 for (kind, flag), value in assumed if kind == "flag"}
        evaluator.optional_inputs_default = True
        # A second look only: it neither spends the file's work budget nor reports where it ran out (RL904).
        steps, hits = evaluator.budget.steps, dict(evaluator.budget.hits)
        try:
            return evaluator.evaluate_class(self.index.classes[root])
        except BudgetExceeded:
            return None
        finally:
            evaluator.budget.steps, evaluator.budget.hits = steps, hits

    def _collect_stream_ends(self, graph: Graph, root: str, consumed: bool, assumed: tuple = ()) -> None:
        """RL103: whether each stack's stream, and each imported class's output, is normalised before `root`'s
        output. A root another class consumes has no say where the stream merely reaches its output: the
        consumer decides. Where the consumer builds it as a submodule of this file but none of its evaluations
        reaches the stack, the root's output stands; built through AutoModel or another file's constructor,
        nobody decides. A root that loses the stream (drops it, stores it where the engine does not follow) has
        no say either."""
        for key, outputs in graph.stack_outputs.items():
            ending = stream_end(outputs, graph.outputs, stack_sources(graph, key))
            if ending == "reached" and root:
                ending = self._ending_without_optional_inputs(graph, root, key, assumed) or ending
            if ending in ("lost", "branch"):
                continue
            found = STREAM_END_VERDICTS[ending]
            if found is False and consumed:
                if root in self.built_here:
                    self.deferred[key] = tuple(dict.fromkeys(self.deferred.get(key, ()) + (root,)))
                elif root in self.loaded:
                    self.passed_on.add(key)  # to a consumer loading `root` through AutoModel: nobody here decides
                    self.loaded_streams.setdefault(key, set()).add(root)  # unless the loader is visible
                else:
                    self.unclaimed.setdefault(key, set()).add(root)  # see _streams_through_inherited_forwards
                continue
            if found is False:
                self.facts.open_streams[key] = tuple(dict.fromkeys(self.facts.open_streams.get(key, ()) + (root,)))
            self.final_norms[key] = _seen_from_several_roots(found, self.final_norms.get(key, False))
        for node in graph.nodes:
            imported = node.info.get("imported_class")
            if imported:
                found = final_norm([node], graph.outputs)
                if found is False and consumed:
                    continue
                owner = self.index.classes.get(node.owner or root)
                call = node.info.get("name", "")
                alternatives = branch_alternatives(self.index, owner, call, imported) if owner else ()
                for dotted in (imported, *alternatives):
                    self.facts.stream_ends[dotted] = _seen_from_several_roots(
                        found, self.facts.stream_ends.get(dotted, False))

    def _streams_through_visible_loaders(self, module_classes: list[ClassInfo], consumed: set[str]) -> None:
        """A stream a registry-loaded root passes on, followed in the file's consumer that loads it
        (`self.encoder = AutoModel.from_config(config.encoder_config)` with the encoder model defined here): the
        consumer is evaluated again with the loader resolved, and decides as a class building the root would.
        Only RL103 asks: the consumer's other facts keep the registry opaque."""
        if not self.loaded_streams:
            return
        loaders = visible_loaders(self.index, module_classes)
        roots = set().union(*self.loaded_streams.values())
        consumers = sorted({consumer for (consumer, _), loaded in loaders.items() if loaded in roots})
        endings: dict[str, list[str]] = {}
        for name in consumers:
            info = self.index.classes.get(name)
            if info is None or name in consumed or self.index.method(info, "forward") is None:
                continue  # a consumer passing the stream on again: whoever consumes it decides (undecided here)
            evaluator = self._evaluator(self.norm_kinds_seen)
            evaluator.loaded_modules = loaders
            steps, hits = evaluator.budget.steps, dict(evaluator.budget.hits)  # a second look spends no budget
            try:
                graph = evaluator.evaluate_class(info)
            except BudgetExceeded:
                continue
            finally:
                evaluator.budget.steps, evaluator.budget.hits = steps, hits
            for key in self.loaded_streams:
                outputs = graph.stack_outputs.get(key)
                if outputs:
                    endings.setdefault(key, []).append(stream_end(outputs, graph.outputs, stack_sources(graph, key)))
                    if endings[key][-1] == "reached":
                        self.facts.open_streams[key] = tuple(dict.fromkeys(
                            self.facts.open_streams.get(key, ()) + (name,)))
        for key, found in endings.items():
            decided = [STREAM_END_VERDICTS[ending] for ending in found if ending not in ("lost", "branch")]
            if not decided:
                # Every consumer loses the stream: the loaded root's own output stands, as for a built one.
                decided = [False]
                self.facts.open_streams[key] = tuple(sorted(self.loaded_streams[key]))
            verdict = decided[0]
            for other in decided[1:]:
                verdict = _seen_from_several_roots(other, verdict)
            self.final_norms[key] = _seen_from_several_roots(verdict, self.final_norms.get(key, False))

    def _streams_through_inherited_forwards(self, consumed: set[str]) -> None:
        """A stream a root passes on to a class of this file that builds it but inherits its forward from another
        project file (a modular_* copy's `class Step3p7Model(DeepseekOcr2Model)`): that class is evaluated with
        the inherited forward, for RL103 only, and decides as a module class building the root does; where it
        loses the stream the root's output stands. A consumer passing it on again is followed the same way."""
        if self.source_path is None:
            return
        evaluated: set[str] = set()
        while self.unclaimed:
            pending, self.unclaimed = self.unclaimed, {}
            for info in self.index.classes.values():
                built = {inner.name for spec in info.submodules.values() for inner in iter_specs(spec)
                         if inner.kind == "local"}
                keys = [key for key, roots in pending.items() if roots & built]
                if not keys or info.name in evaluated or self.index.is_module_class(info):
                    continue
                inherited = inherited_forward(self.index, info, self.source_path)
                if inherited is None:
                    continue
                evaluated.add(info.name)
                for key in keys:
                    roots = tuple(sorted(pending[key] & built))
                    self.deferred[key] = tuple(dict.fromkeys(self.deferred.get(key, ()) + roots))
                path, forward = inherited
                if path not in self.facts.reads:
                    self.facts.reads.append(path)
                evaluator = self._evaluator(self.norm_kinds_seen)
                steps, hits = evaluator.budget.steps, dict(evaluator.budget.hits)  # a second look spends no budget
                try:
                    graph = evaluator.evaluate_class(replace(info, methods={**info.methods, "forward": forward}))
                except BudgetExceeded:
                    continue
                finally:
                    evaluator.budget.steps, evaluator.budget.hits = steps, hits
                self.evaluated_otherwise.add(id(graph))
                self._collect_stream_ends(graph, info.name, info.name in consumed)

    def _ending_without_optional_inputs(self, graph: Graph, root: str, key: str, assumed: tuple) -> str:
        """The stack's stream end in the model's ordinary call. `root` was evaluated with every forward argument
        given (`graph`), so `if mask is None: x = self.forward_head(x)` skipped the head that a call without the
        optional mask runs; evaluated again with such tests undecided (both branches), a head that normalises
        counts. Where no such test was asked, the second look would take the same way: "" (nothing to add)."""
        if not graph.optional_input_tested and id(graph) not in self.evaluated_otherwise:
            return ""
        if (root, assumed) not in self.ordinary_calls:
            self.ordinary_calls[(root, assumed)] = self._ordinary_call(root, assumed)
        ordinary = self.ordinary_calls[(root, assumed)]
        outputs = ordinary.stack_outputs.get(key) if ordinary is not None else None
        return stream_end(outputs, ordinary.outputs, stack_sources(ordinary, key)) if outputs else ""

    def _ordinary_call(self, root: str, assumed: tuple) -> Graph | None:
        info = self.index.classes.get(root)
        forward = self.index.method(info, "forward") if info is not None else None
        if forward is None or not any(_defaults_to_none(param) for param in forward.params.params):
            return None
        evaluator = self._evaluator(self.norm_kinds_seen)
        evaluator.assumptions = {flag: value == 0 for (kind, flag), value in assumed if kind == "flag"}
        evaluator.optional_inputs_undecided = True
        # A second look only: it neither spends the file's work budget nor reports where it ran out (RL904).
        steps, hits = evaluator.budget.steps, dict(evaluator.budget.hits)
        try:
            return evaluator.evaluate_class(info)
        except BudgetExceeded:
            return None
        finally:
            evaluator.budget.steps, evaluator.budget.hits = steps, hits

    def _finish(self, module_classes: list[ClassInfo], outermost: list[ClassInfo]) -> None:
        # A block seen inside a class that builds it: how that class builds it decides, not the block's
        # own placement flags (a Post-LN default the model overrides is not reported).
        self.facts.residuals = [fact for key, fact in self.residual_facts.items() if not (self.standalone.get(key) and (
            key[:2] in self.in_context or fact.block in self.in_context and fact.block in self.flagged))]
        self.facts.residuals.extend(self._builtin_layer_residuals(module_classes))
        self.facts.residuals.sort(key=lambda r: (r.span.line, r.span.column))
        self.facts.alternatives = sorted(self.alternative_facts.values(), key=lambda r: (r.span.line, r.span.column))
        self.facts.stacks = self._stacks(module_classes)
        self.facts.linear_chains = sorted(self.chains.values(), key=lambda c: (c.span.line, c.span.column))
        sequence_classes = set()
        for info in outermost:
            model = self._model_facts(info)
            if not model.sequence_markers and self.builders and self._builds_sequence_batchnorm(model.classes):
                markers, reads = markers_elsewhere(self.index, self.source_path, model, extract_facts)
                self.facts.reads.extend(path for path in reads if path not in self.facts.reads)
                model = replace(model, sequence_markers=markers)
            self.facts.models.append(model)
            if model.sequence_markers:
                sequence_classes.update(model.classes)
        self.facts.norms = self._module_norms(module_classes, sequence_classes) + [
            _with_sequence(norm, norm.owner in sequence_classes) for norm in self.hand_norms.values()]
        self.facts.norms.sort(key=lambda n: (n.span.line, n.span.column))
        self.facts.post_ln_blocks = self._post_ln_blocks()
        self.facts.class_uses = {info.name: self._uses(info) for info in module_classes}
        self.facts.class_imports = {name: dotted for name, dotted in self.index.aliases.items() if name[:1].isupper()}

    def _post_ln_blocks(self) -> dict[str, ResidualAdd]:
        """Class -> its first Post-LN residual add, for classes that are Post-LN whatever their config flags.

        torch's Post-LN layers count for the class that builds them.
        """
        by_owner: dict[str, list[ResidualAdd]] = {}
        for add in self.facts.residuals:
            owner = self.builtin_owners.get((add.span.line, add.span.column), "") if add.builtin else add.block
            if owner:
                by_owner.setdefault(owner, []).append(add)
        return {
            owner: min((add for add in adds if add.placement == "post"), key=lambda add: (add.span.line, add.span.column))
            for owner, adds in by_owner.items() if combined_placement(adds) == "post"
        }

    def _uses(self, info: ClassInfo) -> tuple[str, ...]:
        """The classes `info` builds or derives from, local names or dotted import paths."""
        names = [base for base in info.bases if base and base != info.name]
        for spec in info.submodules.values():
            names.extend(inner.name for inner in iter_specs(spec) if inner.kind in ("local", "external"))
        return tuple(dict.fromkeys(name for name in names if name != info.name))

    def _used_as_submodule(self, module_classes: list[ClassInfo]) -> set[str]:
        used = set()
        for info in module_classes:
            for spec in info.submodules.values():
                for inner in iter_specs(spec):
                    if inner.kind == "local" and inner.name != info.name:
                        used.add(inner.name)
        return used

    # ----- residuals ---------------------------------------------------------------------------

    def _residual_fact(self, residual, assumed: tuple = ()) -> ResidualAdd:
        add = residual.add
        terms = residual.terms
        skip_text = terms[residual.skip_term] if residual.skip_term < len(terms) else "x"
        branch_text = " + ".join(terms[j] for j in residual.branches if j < len(terms))
        frame = add.stack_frame
        block = frame.name if frame is not None else add.owner
        return ResidualAdd(
            span=self.node_span(add), block=add.owner or block, placement=residual.placement,
            skip=skip_text, branch=branch_text, parallel=residual.parallel,
            skip_scaled=residual.skip_scaled, skip_projection=residual.skip_projection,
            skip_normalised=residual.skip_normalised, gated_branch=residual.gated_branch,
            dropout_on_skip=residual.dropout_on_skip,
            width_mismatch=residual.width_mismatch, stack=frame.key if frame is not None else "",
            condition=add.condition + assumed,
        )

    def _builtin_layer_residuals(self, module_classes) -> list[ResidualAdd]:
        """torch's own TransformerEncoderLayer/DecoderLayer: placement from `norm_first`."""
        facts = []
        for info in module_classes:
            for _, spec in attribute_specs(info):
                for inner, stack_key in self._builtin_layer_specs(info, spec):
                    placement = self._builtin_placement(inner)
                    if placement is None:
                        continue
                    span = self.span(inner.node, info.node)
                    self.builtin_owners.setdefault((span.line, span.column), info.name)
                    for placed, condition in _open_placements(placement):
                        facts.append(ResidualAdd(
                            span=span, block=f"nn.{inner.name}", placement=placed, skip="src",
                            branch="self_attn/feed_forward", stack=stack_key, builtin=f"nn.{inner.name}",
                            condition=condition))
            facts.extend(self._builtin_base_residuals(info))
        unique = {(fact.span.line, fact.span.column, fact.condition): fact for fact in facts}
        return list(unique.values())

    def _builtin_base_residuals(self, info: ClassInfo) -> list[ResidualAdd]:
        """A class derived from torch's Transformer layers: its placement is the `norm_first` it passes
        to `super().__init__` (unknown when `**kwargs` may carry it)."""
        init = info.methods.get("__init__")
        bases = [member for base in info.node.bases if (member := self.index.torch_member(base.value))
                 in BUILTIN_LAYERS + ("Transformer",)]
        if not bases or init is None:
            return []
        for call in _super_init_calls(init):
            spec = ModuleSpec("builtin", bases[0], call, info, tuple(call.args))
            if spec.arg(10_000, "norm_first") is None and any(arg.star for arg in call.args):
                return []
            placement = self._builtin_placement(spec)
            if placement is None:
                return []
            span = self.span(call, init)
            self.builtin_owners.setdefault((span.line, span.column), info.name)
            return [ResidualAdd(span=span, block=info.name, placement=placed, skip="src",
                                branch="self_attn/feed_forward", builtin=f"nn.{bases[0]}", condition=condition)
                    for placed, condition in _open_placements(placement)]
        return []

    def _builtin_layer_specs(self, info: ClassInfo, spec: ModuleSpec):
        if spec.kind == "builtin" and spec.name in BUILTIN_LAYERS:
            yield spec, ""
        elif spec.kind == "builtin" and spec.name in BUILTIN_STACKS:
            layer = self._builtin_stack_layer(info, spec)
            # A project's own layer class in torch's stack (timm's TransformerDecoderLayerOptimal) is
            # checked through its own forward, not as torch's layer.
            if layer is not None and layer.kind == "builtin" and layer.name in BUILTIN_LAYERS:
                yield layer, f"{info.name}.{spec.attr}"
        elif spec.kind == "builtin" and spec.name == "Transformer":
            yield spec, ""
        elif spec.kind == "container":
            for element in spec.elements:
                if element.kind == "builtin" and element.name in BUILTIN_LAYERS:
                    yield element, f"{info.name}.{spec.attr}" if spec.repeated else ""

    def _builtin_stack_layer(self, info: ClassInfo, spec: ModuleSpec) -> ModuleSpec | None:
        layer_expr = spec.arg(0, "encoder_layer" if spec.name == "TransformerEncoder" else "decoder_layer")
        if layer_expr is None:
            return None
        return self.index.spec_from_expr(info, layer_expr, self._init_locals(info))

    def _init_locals(self, info: ClassInfo) -> dict:
        init = info.methods.get("__init__")
        local_specs: dict[str, ModuleSpec] = {}
        if init is None:
            return local_specs
        for statement in init.body.body:
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    if isinstance(small, cst.Assign) and isinstance(small.targets[0].target, cst.Name):
                        found = self.index.spec_from_expr(info, small.value, local_specs)
                        if found is not None:
                            local_specs[small.targets[0].target.value] = found
        return local_specs

    def _builtin_placement(self, spec: ModuleSpec) -> str | None:
        norm_first = spec.arg(10_000, "norm_first")
        if norm_first is None:
            return "post"
        value = self._wrapper_built_with(spec.owner, norm_first)
        if value is UNKNOWN:
            value = self.index.fold(spec.owner, norm_first)
        if value is UNKNOWN and type(norm_first) is cst.Name and spec.owner is not None and \
                spec.owner.init_defaults.get(norm_first.value, UNKNOWN) is None:
            # `norm_first=norm_first`, a required argument: its default up the chain of constructors; with
            # none anywhere it is open, like a hand-written block's undecided flag (both values, rules/RL101.md)
            value = parameter_value(self.index, spec.owner, norm_first.value)
            if value is UNKNOWN:
                return OPEN
        if value is UNKNOWN:
            return None
        return "pre" if value else "post"

    def _wrapper_built_with(self, owner: ClassInfo | None, flag: cst.BaseExpression) -> object:
        """`norm_first=norm_first`, a parameter of the class building torch's layer (a wrapper, or a class derived
        from it): the value every construction site of that class passes decides, its default only where
        nothing builds it (UNKNOWN then, and where the sites differ)."""
        if owner is None or type(flag) is not cst.Name or flag.value not in owner.init_defaults:
            return UNKNOWN
        key = (owner.name, flag.value)
        if key not in self.wrapper_flags:
            self.wrapper_flags[key], sites = value_at_sites(self.index, self.source_path, owner, flag.value,
                                                            self.module_classes, self.builders)
            self.facts.reads.extend(path for path in dict.fromkeys(str(site.path) for site in sites)
                                    if path not in self.facts.reads)
        return self.wrapper_flags[key]

    # ----- stacks --------------------------------------------------------------------------

    def _stacks(self, module_classes) -> dict[str, Stack]:
        residual_stacks = {fact.stack for fact in self.facts.residuals if fact.stack}
        stacks = {}
        for info in module_classes:
            for attr, spec in attribute_specs(info):
                key = f"{info.name}.{attr}"
                builtin_placement = ""
                block_classes: tuple[str, ...] = ()
                depth = spec.depth if spec.depth_known else None
                if spec.kind == "builtin" and spec.name in BUILTIN_STACKS:
                    layer = self._builtin_stack_layer(info, spec)
                    if layer is None:
                        continue
                    if layer.kind == "builtin":
                        builtin_placement = _stack_label(self._builtin_placement(layer))
                        block_classes = (f"nn.{layer.name}",)
                    else:  # the project's own layer class: its placement is its forward's
                        block_classes = (layer.name,)
                        own = [fact for fact in self.facts.residuals if fact.block == layer.name]
                        builtin_placement = combined_placement(own) if own else "unknown"
                    depth = self.index.fold_int(info, spec.arg(1, "num_layers"))
                    has_norm = spec.arg(2, "norm")
                    final = has_norm is not None and not (isinstance(has_norm, cst.Name) and has_norm.value == "None")
                    final_norm = True if final else self.final_norms.get(key)
                elif spec.kind == "container" and spec.repeated and key in residual_stacks:
                    # A block that is a group of modules (`ModuleList([Attention(), FeedForward()])`) is named by them.
                    block_classes = tuple(dict.fromkeys(
                        inner.name for e in spec.elements
                        for inner in (e.elements if e.kind == "container" and not e.repeated and e.elements else (e,))))
                    final_norm = self.final_norms.get(key)
                elif spec.kind == "container" and spec.repeated and any(
                        e.kind == "builtin" and e.name in BUILTIN_LAYERS for e in spec.elements):
                    placements = {_stack_label(self._builtin_placement(e)) for e in spec.elements}
                    builtin_placement = placements.pop() if len(placements) == 1 else "mixed"
                    block_classes = tuple(dict.fromkeys(f"nn.{e.name}" for e in spec.elements))
                    final_norm = self.final_norms.get(key)
                elif spec.kind == "container" and spec.repeated and spec.elements and self.source_path and all(
                        e.kind == "external" for e in spec.elements):
                    # blocks of another project file, placed as this stack builds them
                    imported = [imported_block_placement(self.index, self.source_path, e) for e in spec.elements]
                    if None in imported:
                        continue
                    placements = {placement for placement, _ in imported}
                    builtin_placement = placements.pop() if len(placements) == 1 else "mixed"
                    block_classes = tuple(dict.fromkeys(name for _, name in imported))
                    final_norm = self.final_norms.get(key)
                else:
                    continue
                iteration = self.iterations.get(key)
                if iteration is not None and type(iteration) is not tuple:  # placed when read, as a Node's place
                    iteration = iteration()
                stacks[key] = Stack(
                    key=key, owner=info.name, attribute=f"self.{attr}", span=self.span(spec.node, info.node),
                    block_classes=block_classes, depth=depth,
                    iteration=Span(self.path, *iteration) if iteration else None,
                    final_norm=final_norm, builtin_placement=builtin_placement,
                )
        return stacks

    # ----- models ------------------------------------------------------------------------------

    def _model_facts(self, info: ClassInfo) -> ModelFacts:
        classes = self._closure(info)
        markers = []
        tables = None  # read only for a model with an nn.Embedding
        for name in sorted(classes):  # a set: sorted, so that the message is the same in every run
            owner = self.index.classes[name]
            for spec in owner.submodules.values():
                for inner in iter_specs(spec):
                    if inner.kind == "builtin" and inner.name in torch_api.SEQUENCE_MODULES:
                        if inner.name == "Embedding":
                            tables = column_tables(self.index.classes, classes) if tables is None else tables
                            if id(inner) in tables:
                                continue
                        markers.append(torch_api.SEQUENCE_MODULES[inner.name])
        # The model's own graph, and those of the classes it builds whose forward it reaches only through
        # a wrapper the graph does not inline (`self.attn = PreNorm(dim, Attention(...))`).
        for graph in (self.graphs.get(name) for name in sorted(classes)):
            if graph is None:
                continue
            for node in graph.nodes:
                if node.info.get("attention"):
                    markers.append(f"attention ({node.info.get('name') or 'scaled_dot_product_attention'})")
                elif node.op == "act" and node.info.get("function") == "softmax" and any(
                        n.op == "matmul" for n in _near_ancestors(node, 4)):
                    markers.append("attention (softmax over q @ k)")
        stacks = tuple(key for key, stack in self.facts.stacks.items() if stack.owner in classes)
        stack_blocks = {name for key in stacks for name in self.facts.stacks[key].block_classes}
        seen = self.seen_from.get(info.name, {})
        own = [seen.get((fact.span.line, fact.span.column, fact.stack, fact.condition), fact)
               for fact in self.facts.residuals
               if not fact.stack and fact.block in classes and fact.block not in stack_blocks]
        placement = combined_placement(own) if own else "none"
        if stacks and placement in ("none", "unknown"):
            placement = "none"
        return ModelFacts(name=info.name, span=self.span(info.node.name, info.node),
                          sequence_markers=tuple(dict.fromkeys(markers)), classes=tuple(sorted(classes)),
                          stacks=stacks, placement=placement)

    def _builds_sequence_batchnorm(self, classes) -> bool:
        return any(inner.kind == "builtin" and inner.name in torch_api.SEQUENCE_BATCHNORMS for name in classes
                   for spec in self.index.classes[name].submodules.values() for inner in iter_specs(spec))

    def _closure(self, info: ClassInfo) -> set[str]:
        seen = {info.name}
        pending = [info]
        while pending:
            current = pending.pop()
            for base in current.bases:
                if base in self.index.classes and base not in seen:
                    seen.add(base)
                    pending.append(self.index.classes[base])
            built = {inner.name for spec in current.submodules.values() for inner in iter_specs(spec)
                     if inner.kind == "local"} | self._built_in_init(current)
            for name in sorted(built):
                if name not in seen and name in self.index.classes:
                    seen.add(name)
                    pending.append(self.index.classes[name])
        return seen

    def _built_in_init(self, info: ClassInfo) -> set[str]:
        """The file's classes an `__init__` calls, wherever the result goes: `PreNorm(dim, Attention(...))`
        wraps an Attention the submodule specs name only as an argument (lucidrains' Conformer)."""
        known = self.init_calls.get(info)
        if known is not None:
            return known
        init = info.methods.get("__init__")
        if init is None:
            return set()
        classes = self.index.classes
        found = self.init_calls[info] = {node.func.value for node in self.index.body_nodes(info).init_calls
                                         if type(node.func) is cst.Name and node.func.value in classes}
        return found

    # ----- norms --------------------------------------------------------------------------------

    def _module_norms(self, module_classes, sequence_classes: set[str]) -> list[NormOp]:
        norms = []
        for info in module_classes:
            pooled = None  # read only for a norm of a sequence model: walking the class's graph for it costs
            for spec in info.submodules.values():
                for inner in iter_specs(spec):
                    if inner.kind != "builtin" or inner.name not in torch_api.NORM_MODULES:
                        continue
                    kind = torch_api.NORM_MODULES[inner.name]
                    spans_sequence = None
                    if kind == "layernorm" and info.name in sequence_classes:
                        shape = inner.arg(0, "normalized_shape")
                        if isinstance(shape, (cst.List, cst.Tuple)) and len(shape.elements) >= 2:
                            spans_sequence = self.span(inner.node, info.node)
                    in_sequence_model = info.name in sequence_classes
                    if in_sequence_model:
                        if pooled is None:
                            pooled = {id(spec) for spec in _after_linear(info)} | _feeding_linear(
                                self.graphs.get(info.name))
                        in_sequence_model = id(inner) not in pooled
                    norms.append(NormOp(kind=kind, form="module", span=self.span(inner.node, info.node),
                                        owner=info.name, variant=inner.name, spans_sequence=spans_sequence,
                                        in_sequence_model=in_sequence_model))
        seen = set()
        for name, graph in self.graphs.items():
            for node in graph.nodes:
                if node.op != "norm" or node.info.get("norm_form") != "functional" or id(node) in seen:
                    continue
                seen.add(id(node))
                owner = node.owner or name
                spans_sequence = None
                if node.info.get("norm_kind") == "layernorm" and owner in sequence_classes:
                    call = node.info.get("call")
                    shape_expr = None
                    if isinstance(call, cst.Call):
                        positional = [a for a in call.args if a.keyword is None]
                        keyword = [a for a in call.args if a.keyword and a.keyword.value == "normalized_shape"]
                        shape_expr = keyword[0].value if keyword else (positional[1].value if len(positional) > 1
                                                                        else None)
                    if _spans_several_axes(shape_expr):
                        spans_sequence = self.node_span(node)
                norms.append(NormOp(kind=node.info["norm_kind"], form="functional", span=self.node_span(node),
                                    owner=owner, variant=node.info.get("name", ""), spans_sequence=spans_sequence,
                                    in_sequence_model=owner in sequence_classes))
        unique = {(n.span.line, n.span.column): n for n in norms}
        return list(unique.values())

    def _add_hand_norm(self, fact: NormOp) -> None:
        """A norm seen from several roots: a layer wherever one root sees it as a layer."""
        key = (fact.span.line, fact.span.column)
        if key not in self.hand_norms or fact.role == LAYER != self.hand_norms[key].role:
            self.hand_norms[key] = fact

    def _hand_written_fact(self, norm, role: str) -> NormOp:
        output = norm.output
        unbiased = None
        if norm.variance is not None and _uses_bessel(norm.variance):
            unbiased = self.node_span(norm.variance)
        sequence = None
        channels_first = self._channels_first(output.owner)
        for statistic in () if non_causal_group_norm(self.index, output.owner, self.positions.source_text()) \
                else norm.statistics:
            if _reduces_sequence_axis(statistic, channels_first):
                sequence = self.node_span(statistic)
                break
        kind = "groupnorm" if derives_from_group_norm(self.index, output.owner) else norm.kind
        return NormOp(kind=kind, form="hand-written", span=self.node_span(output), owner=output.owner,
                      variant="hand-written", spans_sequence=sequence, unbiased_variance=unbiased,
                      missing_eps=None if norm.has_eps else self.node_span(output), role=role)

    def _channels_first(self, owner: str) -> bool:
        """A LayerNorm2d-style class (`weight[:, None, None] * x`): dim 1 is channels, not time."""
        info = self.index.classes.get(owner)
        if info is None:
            return False
        text = "".join(self.positions.code(info.node).split())
        return ("[:,None,None]" in text or "2d" in owner.lower() or "channels_first" in text
                or CHANNEL_PARAMETER_SHAPE.search(text) is not None)

    # ----- FFN chains --------------------------------------------------------------------------

    def _linear_chains(self, graph: Graph) -> list[LinearChain]:
        chains = []
        for node in graph.nodes:
            if not _is_linear(node) or not node.inputs:
                continue
            previous, walked = strip_passthrough(node.inputs[0], allow_scale=False)
            if any(step.info.get("width_changing") for step in walked) or not _is_linear(previous):
                continue
            first, second = previous.info["spec"], node.info["spec"]
            chains.append(LinearChain(
                span=self.node_span(node), owner=node.owner, first=first.attr or "linear",
                second=second.attr or "linear", feed_forward=self._looks_like_ffn(node.owner, first, second)))
        return chains

    def _looks_like_ffn(self, owner: str, first: ModuleSpec, second: ModuleSpec) -> bool:
        names = f"{owner} {first.attr} {second.attr}".lower()
        if any(hint in names for hint in LOW_RANK_HINTS) or any(word in owner.lower() for word in NOT_FFN_OWNERS):
            return False
        if any(hint in owner.lower() for hint in FFN_CLASS_HINTS):
            return True
        if (first.attr, second.attr) in FFN_ATTR_PAIRS:
            return True
        if any(first.attr.lower().startswith(hint) for hint in FFN_CONTAINER_HINTS):
            return True
        inner = first.arg(1, "out_features")
        inner_text = self.positions.code(inner, first.owner.node if first.owner else None) if inner is not None else ""
        return any(hint in inner_text for hint in FFN_WIDTH_HINTS)


def _is_linear(node: Node) -> bool:
    return node.op == "module" and node.info.get("module") in torch_api.LINEAR_MODULES and node.info.get("spec")


def iter_specs(spec: ModuleSpec):
    yield spec
    for element in spec.elements:
        yield from iter_specs(element)
    for element in spec.named.values():
        yield from iter_specs(element)


def attribute_specs(info: ClassInfo):
    """(attribute path, spec) for every submodule, ModuleDict entries included ("transformer.h")."""
    for spec in info.submodules.values():
        pending = [spec]
        while pending:
            current = pending.pop()
            yield current.attr, current
            pending.extend(current.named.values())


def _prefer(old: ResidualAdd | None, fact: ResidualAdd) -> ResidualAdd:
    """The same add seen from several roots: keep the most informed view (in a stack, placed, width known)."""
    if old is None:
        return fact
    chosen = fact if (fact.stack and not old.stack) or (old.placement == "none" and fact.placement != "none") else old
    if not chosen.width_mismatch and (fact.width_mismatch or old.width_mismatch):
        from dataclasses import replace

        chosen = replace(chosen, width_mismatch=fact.width_mismatch or old.width_mismatch)
    return chosen


def _defaults_to_none(param: cst.Param) -> bool:
    return isinstance(param.default, cst.Name) and param.default.value == "None"


def _seen_from_several_roots(found: bool | None, known: bool | None) -> bool | None:
    """A norm found from any root wins, then "undecided", then "none"."""
    return True if True in (found, known) else (None if None in (found, known) else False)


def _near_ancestors(node: Node, depth: int) -> list[Node]:
    found, frontier = [], [node]
    for _ in range(depth):
        frontier = [parent for current in frontier for parent in current.inputs]
        found.extend(frontier)
    return found


def _const_of(value):
    from reslint.static.dataflow import Const, TupleValue

    if isinstance(value, Const):
        return value.value
    if isinstance(value, TupleValue):
        items = [_const_of(item) for item in value.items]
        return tuple(items) if all(item is not UNKNOWN for item in items) else UNKNOWN
    return UNKNOWN


def _reduction_argument(node: Node, position: int, keyword: str):
    kwargs = node.info.get("kwargs") or {}
    if keyword in kwargs:
        return _const_of(kwargs[keyword])
    args = node.info.get("args") or []
    if position < len(args):
        return _const_of(args[position])
    return None


def _uses_bessel(variance: Node) -> bool:
    unbiased = _reduction_argument(variance, 99, "unbiased")
    correction = _reduction_argument(variance, 99, "correction")
    if unbiased is False or correction == 0:
        return False
    if unbiased is UNKNOWN or correction is UNKNOWN:
        return False
    positional = _reduction_argument(variance, 2, "")
    if positional is False:
        return False
    return True


def _reduces_sequence_axis(statistic: Node, channels_first: bool = False) -> bool:
    dims = _reduction_argument(statistic, 1, "dim")
    if dims is UNKNOWN:
        return False
    if dims is None:
        args = statistic.info.get("args") or []
        return len(args) <= 1  # x.mean() over every axis, positions included
    if isinstance(dims, int):
        dims = (dims,)
    if not isinstance(dims, tuple):
        return False
    if channels_first:
        return any(d in (-1, -2) for d in dims) and len(dims) >= 2
    return any(d in (1, -2) for d in dims) or len(dims) >= 2


def _spans_several_axes(shape_expr) -> bool:
    if isinstance(shape_expr, (cst.List, cst.Tuple)):
        return len(shape_expr.elements) >= 2
    if isinstance(shape_expr, cst.Subscript):
        # x.shape[1:] / x.size()[1:]: every axis after batch, positions included
        slices = shape_expr.slice
        return len(slices) == 1 and isinstance(slices[0].slice, cst.Slice) and slices[0].slice.lower is not None \
            and isinstance(slices[0].slice.lower, cst.Integer) and slices[0].slice.lower.value == "1"
    return False


def _super_init_calls(init: cst.FunctionDef) -> list[cst.Call]:
    """The `super().__init__(...)` calls of an `__init__`."""
    visitor = _SuperInitCalls()
    init.visit(visitor)
    return visitor.found


# The visitors below are module-level classes, not classes defined per call: a class is a reference cycle, and
# one closing over the file's nodes kept the file's whole libcst tree for the cyclic collector.
class _SuperInitCalls(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[cst.Call] = []

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if (isinstance(func, cst.Attribute) and func.attr.value == "__init__" and isinstance(func.value, cst.Call)
                and isinstance(func.value.func, cst.Name) and func.value.func.value == "super"):
            self.found.append(node)


def _after_linear(info: ClassInfo):
    """BatchNorm1d right after an nn.Linear in an nn.Sequential (CLIP-style projection heads): the Linear's
    features are the last axis and BatchNorm1d normalises axis 1, so the two fit only on (batch, features)
    vectors, pooled or flattened; no positions or padding enter the statistics (the trace engine sees 2-D)."""
    for spec in info.submodules.values():
        for container in iter_specs(spec):
            if container.kind != "container" or container.name != "Sequential" or container.repeated:
                continue
            for before, after in zip(container.elements, container.elements[1:]):
                if before.kind == "builtin" and before.name == "Linear" and after.kind == "builtin" \
                        and after.name in ("BatchNorm1d", "LazyBatchNorm1d", "SyncBatchNorm"):
                    yield after


def _feeding_linear(graph: Graph | None) -> set[int]:
    """ids of the BatchNorm1d specs whose output goes straight into nn.Linear (LeViT's classifier head,
    `self.linear(self.batch_norm(pooled))`): BatchNorm1d normalises axis 1 and Linear reads the last, so
    the two fit only on (batch, features) vectors, pooled; no positions enter the statistics."""
    if graph is None:
        return set()
    users: dict[int, list[Node]] = {}
    for node in graph.nodes:
        for source in node.inputs:
            users.setdefault(id(source), []).append(node)
    found: dict[int, bool] = {}
    for node in graph.nodes:
        spec = node.info.get("spec")
        if node.op != "norm" or spec is None or getattr(spec, "name", "") not in ("BatchNorm1d", "LazyBatchNorm1d"):
            continue
        readers = users.get(id(node), [])
        fits = bool(readers) and all(_is_linear(reader) for reader in readers)
        found[id(spec)] = found.get(id(spec), True) and fits
    return {key for key, fits in found.items() if fits}


def _with_sequence(norm: NormOp, in_sequence_model: bool) -> NormOp:
    from dataclasses import replace

    return replace(norm, in_sequence_model=in_sequence_model)



OPEN = "open"  # torch's layer built with a required `norm_first` that no constructor up the chain defaults


def _open_placements(placement: str) -> list[tuple[str, tuple]]:
    """(placement, condition) of torch's layer: one, or both values of an open `norm_first`, as exclusive
    branches (the Post-LN one is torch's own default, norm_first=False)."""
    if placement != OPEN:
        return [(placement, ())]
    return [("pre", ((("flag", "norm_first"), 0),)), ("post", ((("flag", "norm_first"), 1),))]


def _stack_label(placement: str | None) -> str:
    return "configurable" if placement == OPEN else placement or "unknown"


def flag_text(flag: str, value: bool) -> str:
    """How a summary names a flag's other value: `config.pre_norm = True`, `self.position != 'post'`."""
    name = flag.split(":", 1)[-1]
    if " == " in name and not value:
        return name.replace(" == ", " != ")
    return name if " == " in name else f"{name} = {value}"


def _placement_flag_first(flag: str) -> int:
    """Evaluate both values of the flags most likely to switch norm placement."""
    return 0 if any(word in flag.lower() for word in PLACEMENT_FLAG_WORDS) else 1
