"""Plan, check and apply fixes: what `--fix`, `--unsafe-fixes`, `--diff` and `--fix-only` do.

A rewrite is offered only when it is checked: the result compiles, changes nothing outside the
finding's class (or the fixer's own `scope`), and re-checking it (static engine, the same
suppressions and selection) no longer reports that finding and reports nothing new (a fix may
repair more than its finding: RL101's also repairs the stack's RL104). Several fixes of one file
are applied one after the other, re-parsing and re-checking between them. When fixes are
written in a full (traced) check, the whole edited file is also traced again and must give the
same findings minus the fixed ones: a model that no longer builds or traces, or that the trace
engine now judges differently, keeps its file unfixed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from reslint.discovery import SourceFile, root_relative
from reslint.file_gate import overlaid
from reslint.findings import FileResult, Finding, ModelSummary
from reslint.fixes import Edit, Fix, fixer
from reslint.fixes.prepared import FileFixes, fix_key, text_digest
from reslint.fixes.source import Source, owner_class
from reslint.settings import Settings

LINKED = ("RL301",)  # findings of the project stage, not of the file's own analysis


@dataclass
class FileFix:
    """The fixed text of one file and the findings (of its original text) the fixes repair."""

    display: str
    path: str
    before: str
    after: str
    fixed: list[Finding] = field(default_factory=list)
    refused: str = ""  # why the checked fixes were dropped (the traced re-check disagreed)

    def diff(self) -> str:
        return "".join(difflib.unified_diff(self.before.splitlines(True), self.after.splitlines(True),
                                            fromfile=self.display, tofile=self.display))


def fix_allowed(code: str, settings: Settings, unsafe: bool) -> bool:
    module = fixer(code)
    if module is None or not configured_fixable(code, settings):
        return False
    return module.SAFE or unsafe


def configured_fixable(code: str, settings: Settings) -> bool:
    fixable = settings.fixable
    return (not fixable or code in fixable) and code not in settings.unfixable


def with_fixes(findings: list[Finding], settings: Settings, models: list[ModelSummary] = (),
               prepared: dict[str, FileFixes] | None = None) -> list[Finding]:
    """The findings, each with the checked fix that would repair it on its own (`Finding.fix`).

    In a full check, a file's fixes are offered only when the file with all of them applied still
    traces as before (`models`: the report's summaries, what it traced before). `prepared`: the fixes a
    static check's workers already checked beside each file's analysis (`prepare_fixes`), by display path."""
    by_path: dict[str, list[Finding]] = {}
    for finding in findings:
        if fix_allowed(finding.code, settings, unsafe=True):
            by_path.setdefault(finding.path, []).append(finding)
    offered: dict[int, Fix] = {}
    for display, wanted in by_path.items():
        text = read_text(display)
        if text is None:
            continue
        linked = any(finding.code in LINKED for finding in wanted)
        ready = (prepared or {}).get(display)
        if ready is not None and not linked and ready.covers(text, wanted):
            offered.update((id(finding), ready.fixes[fix_key(finding)]) for finding in wanted
                           if ready.fixes[fix_key(finding)] is not None)
            continue
        parsed = Parsed(text)
        if settings.static and not linked and not any(candidate(display, text, finding, parsed) for finding in wanted):
            # Exact: in a static check a reported finding is its own counterpart in the re-check (the same
            # text, engine and filters; the project stage only drops RL103 findings and adds LINKED ones),
            # so a fixer that refuses it here refuses it there: no file re-check for no fix.
            continue
        try:
            base = recheck(display, text, settings, linked)
        except Exception:  # noqa: BLE001 - a file the re-check cannot analyse offers no fix; its findings stand
            continue
        fixes = {}
        for finding in wanted:
            target = counterpart(finding, base)
            checked = attempt(display, text, target, base, settings, linked, parsed) if target else None
            if checked is not None:
                module = fixer(finding.code)
                fixes[id(finding)] = Fix("safe" if module.SAFE else "unsafe", module.TITLE,
                                         edits(checked[0], parsed.changes_to(checked[0])))
        if fixes and not settings.static:
            before = traced_before(findings, models, display)
            if not still_traces(fix_file(display, text, settings, unsafe=True, linked=linked), settings, before):
                fixes = {}
        offered.update(fixes)
    return [dataclasses.replace(finding, fix=offered[id(finding)]) if id(finding) in offered else finding
            for finding in findings]


def prepare_fixes(display: str, data: bytes, text: str, module, analysed: list[Finding], findings: list[Finding],
                  settings: Settings, tree=None) -> FileFixes | None:
    """`with_fixes` for one file of a static check, beside its analysis: the fixers read the libcst module
    the engine parsed (`module`, of `text`, decoded from `data`; `tree`, CPython's AST of it, when the engine
    parsed it too), and the re-check of the original text is the analysis's own
    findings (`analysed`, unfiltered), so that only candidate fixes are parsed and analysed again.
    `findings`: the file's reported findings. None when the file is not one `with_fixes` would read as it
    is (not UTF-8 without a BOM, or the engine read another text): it then does the work itself."""
    wanted = [finding for finding in findings if fix_allowed(finding.code, settings, unsafe=True)]
    if not wanted or any(finding.code in LINKED for finding in wanted) or data.startswith(b"\xef\xbb\xbf"):
        return None
    try:
        if module is None or data.decode("utf-8") != text:
            return None
    except UnicodeDecodeError:
        return None
    ready = FileFixes(text_digest(text))
    parsed = Parsed(text, module, tree)
    if not any(candidate(display, text, finding, parsed) for finding in wanted):
        ready.fixes = dict.fromkeys(map(fix_key, wanted))
        return ready
    base = reported(display, analysed, text, settings)  # what recheck(display, text, settings) reports
    for finding in wanted:
        target = counterpart(finding, base)
        checked = attempt(display, text, target, base, settings, False, parsed) if target else None
        module_of = fixer(finding.code)
        ready.fixes[fix_key(finding)] = (Fix("safe" if module_of.SAFE else "unsafe", module_of.TITLE,
                                             edits(checked[0], parsed.changes_to(checked[0])))
                                         if checked is not None else None)
    return ready


def plan(findings: Iterable[Finding], settings: Settings, unsafe: bool, models: list[ModelSummary] = ()) -> list[FileFix]:
    """For each file with fixable findings, its text with every allowed, checked fix applied
    (`models`: the check's summaries, what it traced before)."""
    findings = list(findings)
    paths = sorted({finding.path for finding in findings if fix_allowed(finding.code, settings, unsafe)})
    planned = []
    for display in paths:
        text = read_text(display)
        if text is None:
            continue
        linked = any(finding.path == display and finding.code in LINKED for finding in findings)
        try:
            fixed_file = fix_file(display, text, settings, unsafe, linked)
        except OSError as error:
            planned.append(FileFix(display, os.path.abspath(display), text, text, refused=f"cannot check the fixes: {error}"))
            continue
        if fixed_file.fixed and not settings.static:
            before = traced_before(findings, models, display)
            still_traces(fixed_file, settings, before)
        if fixed_file.fixed or fixed_file.refused:
            planned.append(fixed_file)
    return planned


def fix_file(display: str, text: str, settings: Settings, unsafe: bool, linked: bool = False) -> FileFix:
    result = FileFix(display, os.path.abspath(display), text, text)
    current, findings = text, recheck(display, text, settings, linked)
    parsed = Parsed(current)
    refused: set[tuple] = set()
    while True:
        target = next((finding for finding in findings if key(finding) not in refused
                       and fix_allowed(finding.code, settings, unsafe)), None)
        if target is None:
            return result
        checked = attempt(display, current, target, findings, settings, linked, parsed)
        if checked is None:
            refused.add(key(target))
            continue
        new, after = checked
        gone = Counter(map(key, findings)) - Counter(map(key, after))  # the target, and what its fix also repaired
        for finding in findings:
            if gone[key(finding)] > 0:
                gone[key(finding)] -= 1
                result.fixed.append(finding)
        module = parsed.source.fixed_module(new) if parsed.source is not None else None
        current, findings = new, after
        parsed = Parsed(current, module)
        result.after = current


class Parsed:
    """One text's Source, parsed when a fixer first needs it and then shared by all its findings'
    fixers (fixers only read it: libcst trees are immutable)."""

    def __init__(self, text: str, module=None, tree=None):
        self.text = text
        self.module = module  # the text's libcst module when the engine parsed it already
        self.tree = tree  # and its CPython AST
        self.source: Source | None = None
        self.candidates: dict[tuple, str | None] = {}  # see candidate
        self.rechecked: dict[tuple[str, str, bool], list[Finding]] = {}  # see attempt
        self.changes: dict[str, list[tuple[int, int, int, int]]] = {}  # see changes_to

    def get(self) -> Source:
        if self.source is None:
            self.source = Source(self.text, self.module, self.tree)
        return self.source

    def changes_to(self, after: str) -> list[tuple[int, int, int, int]]:
        """changed_lines(self.text, after), matched once: a candidate's scope check and its fix's edits read them."""
        found = self.changes.get(after)
        if found is None:
            found = self.changes[after] = changed_lines(self.text, after)
        return found


def attempt(display: str, text: str, finding: Finding, base: list[Finding], settings: Settings,
            linked: bool = False, parsed: Parsed | None = None) -> tuple[str, list[Finding]] | None:
    """The file's text with `finding` fixed and what re-checking it reports; None when there is no
    fix or it does not check out. (`parsed`: `text`'s Source, shared between attempts.)"""
    new = candidate(display, text, finding, parsed)
    if new is None:
        return None
    parsed = parsed if parsed is not None and parsed.text == text else Parsed(text)
    asked = (display, new, linked)
    if asked not in parsed.rechecked:  # two findings' fixes may give one text (RL101's and RL104's)
        from reslint.analysis import lent_module

        module = parsed.source.fixed_module(new) if parsed.source is not None and not linked else None
        with lent_module(new, module) if module is not None else contextlib.nullcontext():
            parsed.rechecked[asked] = recheck(display, new, settings, linked)
    after = parsed.rechecked[asked]
    before_keys, after_keys = Counter(map(key, base)), Counter(map(key, after))
    if after_keys[key(finding)] >= before_keys[key(finding)] or after_keys - before_keys:
        return None  # the finding is still there, or the fix brought a new one
    return new, after


def candidate(display: str, text: str, finding: Finding, parsed: Parsed | None = None) -> str | None:
    """The fixer's text for `finding` when it compiles and changes only the finding's scope (not yet
    re-checked); None otherwise. (`parsed`: `text`'s Source, shared between candidates.)"""
    parsed = parsed if parsed is not None and parsed.text == text else Parsed(text)
    asked = (display, *fix_key(finding))  # all a fixer reads of the finding
    if asked not in parsed.candidates:  # asked again by the attempt that re-checks it: the same answer
        from reslint.fixes.handed_back import candidate_of  # or the file's trace child made it

        parsed.candidates[asked] = candidate_of(text, asked, lambda: fixed_text(display, text, finding, parsed))
    return parsed.candidates[asked]


def fixed_text(display: str, text: str, finding: Finding, parsed: Parsed) -> str | None:
    from reslint.analysis import collector_paused

    try:
        with collector_paused():  # a large tree: see collector_paused
            source = parsed.get()
            new = fixer(finding.code).fix(source, finding)
            if new is None or new == text or not compiles(new, display):
                return None
            if not inside_scope(source, parsed.changes_to(new), finding):
                return None
    except Exception:  # noqa: BLE001 - a form the fixer did not foresee: no fix, never a crash
        return None
    return new


def key(finding: Finding) -> tuple:
    return finding.code, finding.symbol, finding.message


def counterpart(finding: Finding, base: list[Finding]) -> Finding | None:
    """The static re-check's finding for a reported one (the trace engine's may word it differently)."""
    same = [other for other in base if other.code == finding.code and other.symbol == finding.symbol]
    return next((other for other in same if other.line == finding.line), same[0] if same else None)


def compiles(text: str, display: str) -> bool:
    try:
        compile(text, display, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


def inside_scope(source: Source, changes: list[tuple[int, int, int, int]], finding: Finding) -> bool:
    """Whether every changed line (`changes`: changed_lines of the source's text) lies in the class the finding
    is about (or the fixer's own `scope`)."""
    own_scope = getattr(fixer(finding.code), "scope", None)
    if own_scope is not None:
        scopes = own_scope(source, finding)
        scopes = scopes if isinstance(scopes, list) else [scopes]
    else:
        cls = source.class_def(owner_class(finding))
        scopes = [source.lines(cls)] if cls is not None else []
    return all(any(lines.start <= i1 + 1 and max(i2, i1 + 1) <= lines.stop for lines in scopes)
               for i1, i2, _, _ in changes)


def changed_lines(before: str, after: str) -> list[tuple[int, int, int, int]]:
    """difflib's opcodes (i1, i2, j1, j2) that turn `before`'s lines into `after`'s, the unchanged runs left out."""
    matcher = difflib.SequenceMatcher(None, before.splitlines(True), after.splitlines(True), autojunk=False)
    return [(i1, i2, j1, j2) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def edits(after: str, changes: list[tuple[int, int, int, int]]) -> tuple[Edit, ...]:
    """Whole-line replacements that turn the text `changes` were matched from into `after`, in its coordinates."""
    new = after.splitlines(True)
    return tuple(Edit(i1 + 1, 1, i2 + 1, 1, "".join(new[j1:j2])) for i1, i2, j1, j2 in changes)


def recheck(display: str, text: str, settings: Settings, linked: bool = False) -> list[Finding]:
    """What the static engine reports for `text` as the file `display`, after suppressions and filters;
    `linked`: with the project stage's findings (RL301), for which the project is checked with `text` read
    as the file (file_gate.overlaid: nothing is written), so that its imports resolve as the file's do."""
    static = static_recheck(settings)
    if linked:
        from reslint.runner import check_sources

        absolute = os.path.abspath(display)
        with overlaid(absolute, text.encode("utf-8")):
            report = check_sources([SourceFile(absolute, display, root_relative(absolute, settings.root))], static)
        return [finding for finding in report.findings if finding.path == display]
    result = cached_analysis(display, text.encode("utf-8"), settings, static, links=False)
    return reported(display, result.findings, text, settings)


def static_recheck(settings: Settings) -> Settings:
    """The settings of a fix's static re-check: one job, no result cache of the check's own (the re-checks keep
    theirs, `fix_check_cache`). A worker's analysis is stored under them (`remember_analysis`), so they must be
    the very settings `recheck` runs with."""
    return dataclasses.replace(settings, static=True, cache=False, jobs=1)


def fix_check_cache(display: str, data: bytes, settings: Settings, engine: Settings):
    """The result cache's section for the fix checks and the slot of `data` as the file `display`."""
    from reslint.cache import FileCache, digest_of

    cache = FileCache(settings.root, dataclasses.replace(engine, cache=True), section="fixes")
    return cache, f"{display}\0fix-check\0{digest_of(data)}"


def remember_analysis(display: str, data: bytes, settings: Settings, result) -> None:
    """Store a static worker's own analysis of the file as `recheck` would: a warm run whose file result
    comes from the cache then offers the same fixes without analysing the file again."""
    if not settings.cache or not result.cacheable:
        return
    cache, slot = fix_check_cache(display, data, settings, static_recheck(settings))
    cache.store(slot, data, os.path.abspath(display), result)


def cached_analysis(display: str, data: bytes, settings: Settings, engine: Settings, links: bool = True):
    """The engines' result (`engine`'s settings) for `data` as the file `display`, from the result cache
    when the check uses it: every run offers the same fixes, and a warm run must not analyse or trace
    each fixable file again. A slot per text, so each candidate fix's text has its own entry; a traced
    entry also follows the project modules the file imports. `links=False`: without the file's links to
    other files (a static re-check reads only the findings)."""
    from reslint.analysis import analyze_file
    from reslint.fixes.handed_back import analysis_of

    def analysed() -> FileResult:  # or handed back by the file's trace child
        return analysis_of(display, data, engine, lambda: analyze_file(display, data, engine, links=links))

    if not settings.cache:
        return analysed()
    cache, slot = fix_check_cache(display, data, settings, engine)
    real_path = os.path.abspath(display)
    result = cache.load(slot, data, real_path)
    if result is None:
        result = analysed()
        if result.cacheable:
            cache.store(slot, data, real_path, result)
    return result


def reported(display: str, findings: list[Finding], text: str, settings: Settings) -> list[Finding]:
    from reslint import filtering

    absolute = os.path.abspath(display)
    source = SourceFile(absolute, display, root_relative(absolute, settings.root))
    return filtering.unique(filtering.reported(findings, source, text, settings))


def still_traces(fixed_file: FileFix, settings: Settings, before_run: tuple | None = None) -> bool:
    """Trace the edited file (its text imported as the file itself, never written: see
    file_gate.overlaid) and the original (unless `before_run` has its findings and models); unless every
    model builds and traces as before and the edited file gives the original's findings minus the fixed
    ones, drop the fixes."""
    if not fixed_file.fixed:
        return True
    before, before_models = before_run or traced(fixed_file.display, fixed_file.before, settings)
    with overlaid(fixed_file.path, fixed_file.after.encode("utf-8")):
        after, after_models = traced(fixed_file.display, fixed_file.after, settings)
    engines = {model.name: model.engine for model in before_models}
    for model in after_models:
        failures = [note for note in model.notes if "failed" in note and note not in before_notes(before_models, model.name)]
        if model.engine != engines.get(model.name, model.engine) or failures:
            problem = failures[0] if failures else f"{model.engine} instead of {engines[model.name]}"
            return refuse(fixed_file, f"`{model.name}` no longer traces as before once fixed ({problem})")
    expected = Counter(map(place_key, before)) - Counter(map(place_key, fixed_file.fixed))
    if Counter(map(place_key, after)) != expected:
        added = sorted(f"{code} in {symbol or 'the file'}" for code, symbol in Counter(map(place_key, after)) - expected)
        return refuse(fixed_file, "the traced re-check of the fixed file "
                      + (f"reports {', '.join(added)}" if added else "does not match the static one"))
    return True


def traced_before(findings: list[Finding], models, display: str) -> tuple[list[Finding], list[ModelSummary]]:
    """What the check already traced for `display`: its findings (less the project stage's) and models."""
    return ([finding for finding in findings if finding.path == display and finding.code not in LINKED],
            [model for model in models if model.path == display])


def before_notes(models, name: str) -> tuple[str, ...]:
    return next((model.notes for model in models if model.name == name), ())


def refuse(fixed_file: FileFix, reason: str) -> bool:
    fixed_file.fixed = []
    fixed_file.after = fixed_file.before
    fixed_file.refused = reason
    return False


def traced(display: str, text: str, settings: Settings) -> tuple[list[Finding], list[ModelSummary]]:
    full = dataclasses.replace(settings, static=False, cache=False)
    result = cached_analysis(display, text.encode("utf-8"), settings, full)
    return reported(display, result.findings, text, settings), result.models


def place_key(finding: Finding) -> tuple:
    return finding.code, finding.symbol


def read_text(display: str) -> str | None:
    """The file as text (UTF-8, as the fixes write it back), or None: not fixable."""
    try:
        with open(display, "rb") as handle:
            data = handle.read()
        return data.decode("utf-8") if not data.startswith(b"\xef\xbb\xbf") else None
    except (OSError, UnicodeDecodeError):
        return None


def write(fixed_files: list[FileFix]) -> None:
    from reslint.errors import ReslintError

    for fixed_file in fixed_files:
        if fixed_file.fixed:
            try:
                with open(fixed_file.path, "w", encoding="utf-8", newline="") as stream:
                    stream.write(fixed_file.after)
            except OSError as error:
                raise ReslintError(f"cannot write the fixes to {fixed_file.display}: {error.strerror or error}") from None
