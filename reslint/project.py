"""The project stage: link the files of a run after each was analysed on its own.

RL301 needs two places at once: the model (is it Post-LN?) and the code that trains it (does
it warm up?). Each file's analysis records what it offers and asks (`FileLinks`, cached with
the file). This stage resolves a training file's model references through its imports — to
files of the run, or to project files outside it, which are analysed statically on demand —
follows the classes each model builds across files, and reports per optimizer.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from reslint.discovery import (
    SourceFile, display_path, is_fix_temporary, is_skipped_dir, is_special_file, matches_glob, root_relative,
)
from reslint.file_gate import MAX_CONFIG_BYTES, is_inside, read_project_file
from reslint.findings import ModelSummary
from reslint.project_facts import (
    WARMUP_NO,
    WARMUP_UNKNOWN,
    WARMUP_YES,
    FileLinks,
    OptimizerSite,
    PostLNBlock,
    Schedule,
)
from reslint.project_index import ProjectIndex, is_under
from reslint.settings import Settings

ClassKey = tuple[str, str]  # (display path of the file, class name)
MAX_CLASSES = 2000  # bound on a closure: a model graph is far smaller


@dataclass(frozen=True)
class PostLNPlace:
    path: str
    block: PostLNBlock


@dataclass
class TrainingLink:
    """One optimizer of a training file and the Post-LN model it trains."""

    path: str
    site: OptimizerSite
    blocks: list[PostLNPlace]
    models: dict[ClassKey, None]  # every class the optimizer trains, in discovery order
    warmup: str  # "yes", "no", "unknown" or "substitute"
    detail: str
    schedule: Schedule | None = None


@dataclass
class Project:
    settings: Settings
    files: dict[str, FileLinks] = field(default_factory=dict)  # display path -> links
    paths: dict[str, str] = field(default_factory=dict)  # display path -> absolute path
    displays: dict[str, str] = field(default_factory=dict)  # absolute path -> display path (the inverse)
    resolved: dict[tuple[str, str], ClassKey | None] = field(default_factory=dict)  # (importer, dotted) -> resolve's
    # Files reached only through a model's classes (`step`), analysed without their training code: no optimizer of
    # theirs is linked (training_links looks at the run's files and the training scripts, all linked before).
    untrained: set[str] = field(default_factory=set)
    steps: dict[ClassKey, list[ClassKey]] = field(default_factory=dict)  # class -> step's answer

    # ----- files ---------------------------------------------------------------------------------

    def add(self, path: str, display: str, links: FileLinks) -> None:
        self.files[display] = links
        self.register(os.path.abspath(path), display)

    def links_of(self, display: str, training: bool = True) -> FileLinks:
        """The file's links; `training=False`: its model links suffice (its training code may be left unread)."""
        links = self.files.get(display)
        if links is None or training and display in self.untrained:
            links = self.files[display] = analyse_links(self.paths[display], display, self.settings, training)
            (self.untrained.discard if training else self.untrained.add)(display)
        return links

    def known(self, path: Path) -> str:
        """The display path of a project file, registering it (to be analysed when needed)."""
        absolute = os.path.abspath(path)
        display = self.displays.get(absolute)
        if display is None:
            display = display_path(absolute)
            self.register(absolute, display)
        return display

    def register(self, absolute: str, display: str) -> None:
        self.paths[display] = absolute
        self.displays.setdefault(absolute, display)

    # ----- resolution ----------------------------------------------------------------------------

    def resolve(self, display: str, dotted: str) -> ClassKey | None:
        """`model.GPT` / `.layers.Block` / `GPT` as written in `display` -> the file and class it names
        (the project index's resolver: the same files the static engine and the trace loader see)."""
        if "." not in dotted:
            return display, dotted
        importer = self.paths[display]
        key = (importer, dotted)
        if key not in self.resolved:  # asked again for every class reached through the same import
            self.resolved[key] = self._resolve(importer, dotted)
        return self.resolved[key]

    def _resolve(self, importer: str, dotted: str) -> ClassKey | None:
        level = len(dotted) - len(dotted.lstrip("."))
        module, _, name = dotted[level:].rpartition(".")
        index = ProjectIndex.for_file(importer, self.settings.root)
        found = index.module_file(importer, module, level)
        # Only the folders inside the project are skipped (a vendored venv, build/): an installed package's
        # own site-packages, or a checkout under ~/build, is where the project lives.
        if found is None or any(is_skipped_dir(parent) for parent in found.parents
                                if parent != index.root and is_under(parent, index.root)):
            return None
        return self.known(found), name

    def step(self, key: ClassKey) -> list[ClassKey]:
        """The classes one class leads to: where an imported name comes from, what a class builds."""
        if key not in self.steps:  # every model's closure walks the shared classes again (a backbone, its bases)
            self.steps[key] = self._step(key)
        return self.steps[key]

    def _step(self, key: ClassKey) -> list[ClassKey]:
        display, name = key
        links = self.links_of(display, training=False)
        if name in links.imports and links.imports[name] != name:
            target = self.resolve(display, links.imports[name])
            return [target] if target else []
        uses = list(links.class_uses.get(name, ()))
        # a model class its file's factory builds from parts (`def build_model(cfg): ... return Model(enc, dec)`)
        uses.extend(use for factory, built in links.class_uses.items()
                    if factory[:1].islower() and name in built for use in built if use != name)
        targets = [self.resolve(display, use) for use in dict.fromkeys(uses)]
        return [target for target in targets if target is not None]

    def closure(self, start: ClassKey) -> dict[ClassKey, None]:
        """Every class reachable from `start`, breadth first (so the first Post-LN block is the nearest)."""
        seen = {start: None}
        pending = [start]
        while pending and len(seen) < MAX_CLASSES:
            for target in self.step(pending.pop(0)):
                if target not in seen:
                    seen[target] = None
                    pending.append(target)
        return seen

    def post_ln_blocks(self, keys) -> list[PostLNPlace]:
        places = []
        for display, name in keys:
            for block in self.links_of(display, training=False).post_ln_blocks:
                if block.cls == name:
                    places.append(PostLNPlace(display, block))
        return places

    def defines(self, key: ClassKey) -> bool:
        links = self.links_of(key[0], training=False)
        return key[1] in links.class_uses or key[1] in links.imports or any(
            block.cls == key[1] for block in links.post_ln_blocks)

    # ----- final norm ----------------------------------------------------------------------------

    def normalised_elsewhere(self, display: str, stack: str) -> bool:
        """RL103: the stack's stream reaches only the output of classes that other files of the run build,
        and none of them passes that output on unnormalised (an unfollowable use counts as normalised)."""
        links = self.files.get(display)
        roots = links.open_streams.get(stack) if links is not None else None
        if not roots:
            return False
        for root in roots:
            verdicts = [verdict for importer, dotted, verdict in self.stream_ends()
                        if importer != display and self.resolve(importer, dotted) == (display, root)]
            if not verdicts or False in verdicts:
                return False
        return True

    def link_builders(self, display: str, stack: str) -> None:
        """RL103 in a run of some of the project's files (a pre-commit hook's changed ones): the files that build
        the classes whose output the stack's stream reaches are linked as if they were in the run, so that a
        consumer normalising that output in a file left out is seen, as in a check of the whole project."""
        links = self.files.get(display)
        roots = links.open_streams.get(stack) if links is not None else None
        if not roots:
            return
        path = self.paths[display]
        index = ProjectIndex.for_file(path)  # the static engine's own index (stream_end): read once in one process
        for sites in index.construction_sites_of(path, roots).values():
            for builder in dict.fromkeys(self.known(site.path) for site in sites):
                if builder != display:
                    self.links_of(builder, training=False)

    def stream_ends(self) -> list[tuple[str, str, bool | None]]:
        return [(display, dotted, verdict) for display, links in list(self.files.items())
                for dotted, verdict in links.stream_ends.items()]

    # ----- training ------------------------------------------------------------------------------

    def training_links(self, run: set[str], trained_everything: set[str]) -> list[TrainingLink]:
        """Every optimizer that trains a Post-LN model, with its warmup verdict.

        `run`: the files being checked; a training script outside it (found by the `train` globs) counts
        only where it trains a class of the run. `trained_everything`: the `train` scripts, which train
        the run's models when their own references resolve to no project class.
        """
        result = []
        for display in sorted(self.files):
            links = self.links_of(display)
            if not links.is_training_code:
                continue
            fallback: tuple[dict[ClassKey, None], list[PostLNPlace]] | None = None
            if display in trained_everything and not self.trained_models(display, links.model_refs)[0]:
                fallback = self.run_models(display, run)
            for site in links.optimizers:
                refs = [ref for ref in links.model_refs if related(ref.scope, site.scope)] or links.model_refs
                models, blocks = fallback or self.trained_models(display, refs)
                if not blocks or display not in run and not any(key[0] in run for key in models):
                    continue
                warmup, detail, schedule = self.warmup_of(display, links, site)
                result.append(TrainingLink(display, site, blocks, models, warmup, detail, schedule))
        return result

    def run_models(self, training: str, run: set[str]) -> tuple[dict[ClassKey, None], list[PostLNPlace]]:
        """Every class of the run's other files: what a configured training script trains."""
        models: dict[ClassKey, None] = {}
        for display, links in list(self.files.items()):
            if display != training and display in run:
                for name in links.class_uses:
                    models.update(self.closure((display, name)))
        return models, self.post_ln_blocks(models)

    def trained_models(self, display: str, refs) -> tuple[dict[ClassKey, None], list[PostLNPlace]]:
        models: dict[ClassKey, None] = {}
        blocks: list[PostLNPlace] = []
        for ref in refs:
            if ref.post_ln:
                blocks.append(PostLNPlace(display, PostLNBlock(ref.name.rsplit(".", 1)[-1], ref.line, ref.column,
                                                               ref.post_ln)))
                continue
            start = self.resolve(display, ref.name)
            if start is None or not self.defines(start):
                continue
            keys = self.closure(start)
            models.update(keys)
            blocks.extend(self.post_ln_blocks(keys))
        return models, list(dict.fromkeys(blocks))

    def warmup_of(self, display: str, links: FileLinks, site: OptimizerSite) -> tuple[str, str, Schedule | None]:
        if site.substitute:
            return "substitute", site.substitute, None
        schedules = [schedule for schedule in links.schedules if attached(schedule, site, links.optimizers)]
        if site.schedule or site.config:
            schedules.append(Schedule(site.line, site.column, site.api, site.schedule or WARMUP_UNKNOWN,
                                      site.schedule_detail, config=site.config))
        schedules = [self.with_config(display, schedule) for schedule in schedules]
        for wanted in (WARMUP_YES, WARMUP_UNKNOWN, WARMUP_NO):
            for schedule in schedules:
                if schedule.warmup == wanted:
                    return wanted, schedule.detail, schedule
        return WARMUP_NO, "no learning-rate scheduler or manual learning-rate update", None

    def with_config(self, display: str, schedule: Schedule) -> Schedule:
        """A schedule whose verdict lives in a DeepSpeed JSON config, with that config read."""
        if not schedule.config:
            return schedule
        from reslint.static.training import deepspeed_schedule

        config = self.deepspeed_config(display, schedule.config)
        if config is None:
            if schedule.warmup in (WARMUP_YES, WARMUP_NO):
                return schedule
            return dataclasses.replace(schedule, warmup=WARMUP_UNKNOWN,
                                       detail=f"DeepSpeed config {schedule.config!r} not found")
        path, data = config
        verdict = deepspeed_schedule(data)
        if verdict is None or (verdict[0] != WARMUP_YES and schedule.warmup == WARMUP_YES):
            return schedule
        return dataclasses.replace(schedule, warmup=verdict[0], detail=f"{verdict[1]} ({path})")

    def deepspeed_config(self, display: str, name: str) -> tuple[str, dict] | None:
        directory = Path(self.paths[display]).parent
        if name == "*":
            candidates = sorted(directory.glob("*.json"))
        else:
            candidates = [directory / name, Path(self.settings.root) / name, Path(name)]
        configs = []
        for candidate in candidates:
            try:
                data = json.loads(read_project_file(candidate, self.settings.root, MAX_CONFIG_BYTES))
            except (OSError, ValueError):
                continue
            if isinstance(data, dict) and (name != "*" or DEEPSPEED_KEYS & data.keys()):
                configs.append((display_path(candidate), data))
                if name != "*":
                    break
        return configs[0] if len(configs) == 1 else None


def related(first: str, second: str) -> bool:
    """Scopes where one contains the other: a model built in `main` is trained by `main`'s optimizer."""
    if first == second:
        return True
    if not first or not second:
        return False
    return first.startswith(second + ".") or second.startswith(first + ".")


def attached(schedule: Schedule, site: OptimizerSite, sites: list[OptimizerSite]) -> bool:
    """Whether a schedule drives this optimizer: the optimizer it names, in its own function first;
    else the optimizers of its function; else (built elsewhere, passed around) every optimizer."""
    if schedule.optimizer:
        for candidates in ([other for other in sites if other.scope == schedule.scope
                            and other.target == schedule.optimizer],
                           [other for other in sites if other.target == schedule.optimizer]):
            if candidates:
                return site in candidates
    same_scope = [other for other in sites if other.scope == schedule.scope]
    return site in same_scope if same_scope else True


DEEPSPEED_KEYS = {"zero_optimization", "train_batch_size", "train_micro_batch_size_per_gpu", "scheduler"}


def analyse_links(path: str, display: str, settings: Settings, training: bool = True) -> FileLinks:
    """Statically analyse a project file that is not part of the run, for its links only (`training=False`:
    without its training code, which also reads the project files its factories come from)."""
    from reslint.analysis import analyse_source

    static = dataclasses.replace(settings, static=True)
    source = SourceFile(path=path, display=display, relative=root_relative(path, settings.root))
    try:
        result = analyse_source(source, static)[0] if training else model_links_result(source, static)
    except Exception:  # noqa: BLE001 - an unreadable neighbour only means fewer links
        return FileLinks()
    return result.links


def model_links_result(source: SourceFile, settings: Settings):
    """analyse_source's result without the file's training code. Its cache entries have a section of their own:
    a check of the file itself must not load a result that lacks its optimizers."""
    from reslint.analysis import analyze_file
    from reslint.cache import FileCache
    from reslint.file_gate import MAX_SOURCE_BYTES
    from reslint.findings import FileResult

    try:
        data = read_project_file(source.path, None, MAX_SOURCE_BYTES)
    except OSError:
        return FileResult(source.display)
    cache = FileCache(settings.root, settings, section="model-links") if settings.cache else None
    result = cache.load(source.display, data, source.path) if cache else None
    if result is None:
        result = analyze_file(source.display, data, settings, training=False)
        if cache and result.cacheable:
            cache.store(source.display, data, source.path, result)
    return result


def training_scripts(settings: Settings, known: set[str]) -> list[str]:
    """Files under the root matching the config's `train` globs (absolute paths) not already in the run."""
    if not settings.train:
        return []
    found = []
    root = Path(os.path.abspath(settings.root))
    for current, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(name for name in dirnames if not is_skipped_dir(Path(current, name)))
        for name in sorted(filenames):
            path = os.path.join(current, name)
            if not name.endswith(".py") or is_fix_temporary(name) or is_special_file(Path(path)) \
                    or not is_inside(path, root):
                continue
            if path not in known and any(
                    matches_glob(root_relative(path, str(root)), glob) for glob in settings.train):
                found.append(path)
    return found


def model_warmup(project: Project, links: list[TrainingLink], model: ModelSummary, verbose: bool) -> str:
    """The summary's `warmup:` text for a Post-LN model ("" for other models)."""
    key = (model.path, model.name)
    if key[0] not in project.files or not project.post_ln_blocks(project.closure(key)):
        return ""
    training = [link for link in links if key in link.models]
    if not training:
        return "not checked (no training code found)"
    for wanted in ("no", "yes", "unknown", "substitute"):
        for link in training:
            if link.warmup != wanted:
                continue
            if wanted == "no":
                return f"none ({link.path}:{link.site.line}: {link.site.api}; RL301)"
            if wanted == "substitute":
                return f"not needed ({link.path}:{link.site.line}: {link.detail})"
            schedule_line = link.schedule.line if link.schedule else link.site.line
            api = link.schedule.api if link.schedule else link.site.api
            where = f"{link.path}:{schedule_line}: {api}"
            if wanted == "unknown":
                return f"assumed ({where}: {link.detail})" if verbose else f"yes ({where})"
            return f"yes ({where}, {link.detail})"
    return ""
