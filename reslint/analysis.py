"""One file in, findings and model summaries out: read it (`analyse_source`: from the result cache when
it holds the file), decode, parse, extract facts with the engines, run the file rules. Unfiltered: the
filter stage (reslint.filtering) and the project stage (reslint.runner) come after."""

from __future__ import annotations

import contextlib
import re
import dataclasses
import gc
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from reslint.discovery import SourceFile
from reslint.file_gate import MAX_SOURCE_BYTES, decode_source, read_project_file
from reslint.findings import FileResult, Finding, ModelSummary, TraceOutcome
from reslint.project_facts import FileLinks, PostLNBlock
from reslint.settings import Settings

# Real code nests far less (the deepest file of torch, transformers and sympy: 569 levels, a
# generated polynomial); libcst's time and stack grow faster than linearly with depth.
MAX_NESTING = 1000
# A file CPython rejects may still be newer syntax libcst knows; a statement of more tokens than
# this could nest deeply enough to overflow libcst's native parser, so it is not tried.
MAX_STATEMENT_TOKENS = 1000
# libcst's visitors recurse a few Python frames per nesting level: the static engine runs on a
# thread with room for MAX_NESTING levels.
STACK_BYTES = 512 * 2**20
RECURSION_LIMIT = 40_000
# libcst needs about 1.7 KB of memory per character of source: a larger file is syntax-checked by
# CPython only, and reported (RL904). The largest file of transformers is under 300 KB.
MAX_LIBCST_CHARACTERS = 512 * 1024
NESTING_ERRORS = ("too many nested parentheses", "too many levels of indentation", "too many statically nested blocks")


def analyse_source(source: SourceFile, settings: Settings, cached_only: bool = False,
                   prepare: Callable[[FileResult, bytes], None] | None = None) -> tuple[FileResult | None, bytes | None]:
    """The file's unfiltered result (from the cache when possible; with `cached_only`, None when it is
    not there) and its bytes (None: unreadable). `prepare`: called on a result analysed here before the cache
    keeps it (a static check's fixes go into the cache with the result)."""
    try:
        data = read_project_file(source.path, None, MAX_SOURCE_BYTES)
    except OSError as error:
        if cached_only:
            return None, None
        reason = error.strerror or str(error)
        return FileResult(source.display, [Finding("RL901", f"cannot read file: {reason}", source.display, 1, 1)]), None
    cache = None
    if settings.cache:
        from reslint.cache import FileCache

        cache = FileCache(settings.root, settings)
    result = cache.load(source.display, data, source.path) if cache else None
    if result is None and cached_only:
        return None, data
    if result is None:
        result = analyze_file(source.display, data, settings)
        if prepare is not None:
            prepare(result, data)
        if cache and result.cacheable:
            cache.store(source.display, data, source.path, result)
    return result, data


def analyze_file(path: str, data: bytes, settings: Settings, source_path: str | None = None,
                 links: bool = True, training: bool = True) -> FileResult:
    """Analyze one file: statically, then (unless `settings.static`) with the trace engine.

    `path` is the display path used in findings; `source_path` the file to import (default: `path`);
    `links`: also what the file offers other files (a fix's re-check reads only the findings); `training`: with
    its training code (the project stage reads only the model links of a file it reaches through a model's classes).
    """
    result = FileResult(path=path)
    try:
        text = decode_source(data)
    except (UnicodeDecodeError, SyntaxError, LookupError) as error:
        result.findings.append(Finding("RL901", f"cannot decode file: {error}", path, 1, 1))
        return result
    skipped = skippable(path, text, settings, source_path)
    if skipped is not None:
        result.skipped = True
        result.links = FileLinks(imports=class_reexports(text, skipped))
        return result
    with collector_paused():
        parsed, has_models = on_deep_stack(static_analysis, result, path, text, settings, source_path, links, training)
    if parsed and not settings.static and source_path is None and links:
        from reslint.fixes.handed_back import remember_static

        remember_static(path, data, settings, result)
    if parsed and not settings.static and (has_models or names_file(settings, source_path or path)
                                           or subclasses_a_model(text)):
        add_trace_results(result, path, data, settings, source_path)
    return result


SUBCLASSED_MODEL = re.compile(r"^[ \t]*class\s+\w+\s*\([^)]*?\b\w*(?:Model|For[A-Z]\w*)\b", re.MULTILINE)


def subclasses_a_model(text: str) -> bool:
    """A class derived from an imported model (`class Tiny(LlamaForCausalLM)`), which the static engine
    cannot see as a module but the trace engine can build."""
    return SUBCLASSED_MODEL.search(text) is not None


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection while one file is parsed and analysed.

    libcst builds hundreds of thousands of objects per large file, and the collector, triggered
    every few hundred allocations, walked them again and again: a fifth of the static time. The
    analysis leaves no cycle (graphs are cut when done, `ast.literal_eval` is replaced): its garbage
    is freed by reference counting. Yields whether the collector ran before.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield enabled
    finally:
        if enabled:
            gc.enable()


def static_analysis(result: FileResult, path: str, text: str, settings: Settings,
                    source_path: str | None = None, links: bool = True, training: bool = True) -> tuple[bool, bool]:
    """Parse and analyse one file's text statically into `result` (an RL901 finding when it does not
    parse); (whether it parsed, whether it defines nn.Module classes). A file whose CPython AST shows that
    libcst's tree cannot add to its facts is not parsed by libcst (static.without_libcst)."""
    from reslint.project_index import ProjectIndex
    from reslint.static.without_libcst import facts_without_libcst

    project = ProjectIndex.for_file(source_path or path)
    source = text.encode("utf-8", "surrogatepass")
    key = project.content_key(source_path or path, source)
    checked = project.kept_tree(key, source) or cpython_parse(text)
    refused = refused_before_libcst(path, text, checked)
    tree = None if isinstance(checked, SyntaxError) else checked
    facts = facts_without_libcst(path, text, tree) if refused is None and tree is not None else None
    module = None
    if facts is None:
        module = refused or parsed_by_libcst(path, text, checked)
        if isinstance(module, Finding):
            result.findings.append(module)
            return False, False

    from reslint.rules import run_rules
    from reslint.static.graph import cut_when_done

    # the construction-site search reads this file's own calls: from the tree parsed here, not a second parse
    with project.lent_tree(source_path or path, source, tree, key) if tree is not None else contextlib.nullcontext(), \
            cut_when_done():
        if facts is None:
            from reslint.static.engine import extract_facts  # libcst's engine: not imported for the AST's facts

            facts = extract_facts(path, module, source_path, text=text, tree=tree)
        result.reads = list(facts.reads)
        result.findings.extend(run_rules(facts, settings))
        if settings.static and module is not None and fixable(result.findings):
            result.module, result.syntax_tree = module, tree
        result.models.extend(facts.model_summaries())
        if links:
            result.links = file_links(facts, text, source_path or path, settings.root, result.reads, tree, training)
    if module is not None:  # only the libcst engine keeps a file's references
        from reslint.static.stream_end import forget_references

        forget_references()
    return True, bool(facts.models)


def fixable(findings: list[Finding]) -> bool:
    """Whether a fixer may be asked about one of the findings (a static check keeps the module for it)."""
    from reslint.fixes import FIXERS

    return any(finding.code in FIXERS for finding in findings)


# Texts whose libcst module is made already: a fix's re-check (reslint.fixes.apply.attempt), see lent_module.
_lent_modules: dict[str, object] = {}


@contextlib.contextmanager
def lent_module(text: str, module) -> Iterator[None]:
    """While the block runs, an analysis of `text` uses `module` (libcst's module of that very text) unparsed."""
    _lent_modules[text] = module
    try:
        yield
    finally:
        _lent_modules.pop(text, None)


def parsed_by_libcst(path: str, text: str, checked):
    """libcst's module of a text refused_before_libcst lets through, or the RL901 finding saying why not."""
    import libcst

    from reslint.static.unvalidated_parse import parse_module

    try:
        lent = _lent_modules.get(text)
        return lent if lent is not None else parse_module(text)
    except (libcst.ParserSyntaxError, RecursionError) as error:
        if isinstance(checked, SyntaxError):
            return syntax_finding(path, checked)
        # CPython accepts the file but libcst does not: say so rather than call valid code invalid.
        line, column = getattr(error, "raw_line", 1), getattr(error, "raw_column", 0) + 1
        message = " ".join(str(error).split()) if isinstance(error, libcst.ParserSyntaxError) else "too deeply nested"
        return Finding("RL901", f"cannot analyse: libcst cannot parse this file: {message}", path, line, column)


def refused_before_libcst(path: str, text: str, checked) -> Finding | None:
    """The finding that keeps a text from libcst's parser, given CPython's answer (an AST or a SyntaxError,
    `cpython_parse`): a syntax error, nesting libcst's stack may not survive, a text over the engine's size
    limit; None for none.

    CPython's parser goes first: it is fast, it has hard limits on nesting, and it is the judge
    of what is valid Python. libcst only sees files that cannot exhaust its stack.
    """
    if isinstance(checked, SyntaxError):
        if checked.msg in NESTING_ERRORS or longest_statement(text) > MAX_STATEMENT_TOKENS:
            return syntax_finding(path, checked)
    else:
        depth, line, column = nesting(checked, text, MAX_NESTING)
        if depth > MAX_NESTING:
            return Finding("RL901", f"cannot analyse: code nested {depth} levels deep (the limit is {MAX_NESTING})",
                           path, line, column)
    if len(text) > MAX_LIBCST_CHARACTERS:
        if isinstance(checked, SyntaxError):
            return syntax_finding(path, checked)
        return limit_finding(f"not analysed by the static engine: {len(text)} characters, over its limit of "
                             f"{MAX_LIBCST_CHARACTERS} (the syntax was checked)", path)
    return None


def limit_finding(message: str, path: str, line: int = 1, column: int = 1, symbol: str = "") -> Finding:
    """RL904: reslint went over one of its limits here; what it found elsewhere stands."""
    return Finding("RL904", message, path, line, column, symbol=symbol)


def cpython_parse(text: str):
    """CPython's AST of the text (parsing only: nothing runs), or the SyntaxError saying why not."""
    import ast
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes and the like: not a linter finding
            return ast.parse(text)
    except (SyntaxError, ValueError) as error:  # ValueError: null bytes, before Python 3.11.4
        if isinstance(error, SyntaxError) and error.lineno is not None:
            # without its traceback: its frames (this one holds `error`) are a cycle keeping the whole stack's locals
            return error.with_traceback(None)
        return SyntaxError(error.msg if isinstance(error, SyntaxError) else str(error), ("<unknown>", *null_byte(text), None))
    except (RecursionError, MemoryError) as error:
        return SyntaxError(f"too deeply nested for CPython's parser ({type(error).__name__})", ("<unknown>", 1, 1, None))


def null_byte(text: str) -> tuple[int, int]:
    """Line and column (1-based) of the first null byte, else of the start."""
    where = text.find("\0")
    if where < 0:
        return 1, 1
    return text.count("\n", 0, where) + 1, where - text.rfind("\n", 0, where)


def syntax_finding(path: str, error: SyntaxError) -> Finding:
    return Finding("RL901", f"syntax error: {error.msg}", path, error.lineno or 1, error.offset or 1)


def nesting(tree, text: str | None = None, limit: int | None = None) -> tuple[int, int, int]:
    """The depth of the deepest node of an AST, with the line and column (1-based) of it or its nearest located ancestor.

    Given the tree's source `text` and a `limit`, a statement whose source is too short to hold a node deeper
    than the limit is not walked (`levels_within`), nor the header of a compound statement (what precedes its
    first block: decorators, signature, condition) too short for it (`header_levels`): the answer is then exact
    when deeper than the limit, and at most the limit otherwise (the nodes left out are no deeper than the limit,
    and the walk's order of the others is unchanged, so the first deepest node it meets is the same)."""
    import ast

    line_starts = source_line_starts(text) if text is not None and limit is not None else None
    statement = ast.stmt
    deepest, where = 0, (1, 1)
    stack = [(tree, 1, (1, 1))]
    node_type = ast.AST
    while stack:
        node, depth, position = stack.pop()
        fields = node._fields
        if hasattr(node, "lineno"):
            if line_starts is not None and isinstance(node, statement):
                if depth + levels_within(node, line_starts) <= limit:
                    continue
                if depth + header_levels(node, line_starts) <= limit:
                    fields = BLOCK_FIELDS
            position = (node.lineno, node.col_offset + 1)
        if depth > deepest:
            deepest, where = depth, position
        depth += 1
        for name in fields:  # ast.iter_child_nodes, without its two generators per node
            value = getattr(node, name, None)
            if isinstance(value, node_type):
                stack.append((value, depth, position))
            elif isinstance(value, list):
                stack.extend((item, depth, position) for item in value if isinstance(item, node_type))
    return deepest, *where


# Every level of an AST below a statement but the last few (an `Expr` around an expression, a `Load` or
# an operator under it, a match pattern's `MatchValue`) takes at least one character of its own in the
# statement's source: `-x`, `x[0]`, `f(x)`, `x.y`, `a + b`, `not x`, `lambda: x`, `{x}` in an f-string.
# Checked over every statement of the standard library and transformers' models (bench/nesting_bound.py).
LEVELS_BEYOND_CHARACTERS = 8


def levels_within(statement, line_starts: list[int]) -> int:
    """An upper bound of the levels of `statement`'s subtree below it: the characters from the start of its
    first line (its first decorator's) to its end, and a few levels more (LEVELS_BEYOND_CHARACTERS).
    CPython's end column counts UTF-8 bytes, never fewer than the characters."""
    return levels_up_to(statement, statement.end_lineno, statement.end_col_offset, line_starts)


def levels_up_to(statement, line: int | None, column: int | None, line_starts: list[int]) -> int:
    """The characters from the start of the statement's first line (its first decorator's) to `line`:`column`,
    and LEVELS_BEYOND_CHARACTERS; sys.maxsize where the places are not as expected (the statement is walked)."""
    first = statement.decorator_list[0].lineno if getattr(statement, "decorator_list", None) else statement.lineno
    if line is None or column is None or not 0 < first <= line <= len(line_starts):
        return sys.maxsize
    return line_starts[line - 1] - line_starts[first - 1] + column + LEVELS_BEYOND_CHARACTERS


# The blocks of a compound statement, in the order of its fields (`ast.Try`: body, handlers, orelse, finalbody).
BLOCK_FIELDS = ("body", "handlers", "orelse", "finalbody")


def header_levels(statement, line_starts: list[int]) -> int:
    """An upper bound of the levels under a compound statement outside its blocks (BLOCK_FIELDS): its header
    (decorators, signature, bases, condition, iterable, context managers) lies before its first block's first
    statement, so levels_within's bound holds with the characters up to there. sys.maxsize for a statement
    without such a body (a simple statement, `match`: its cases hold patterns)."""
    body = getattr(statement, "body", None)
    if not isinstance(body, list) or not body:
        return sys.maxsize
    return levels_up_to(statement, body[0].lineno, body[0].col_offset, line_starts)


def source_line_starts(text: str) -> list[int]:
    """The offset (in characters) of the start of each line, as CPython's parser counts lines."""
    import itertools

    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return [0, *itertools.accumulate(len(line) + 1 for line in text.split("\n"))]


def longest_statement(text: str) -> float:
    """The most tokens in one logical line; infinite when the text cannot be tokenized to the end
    (what follows the error is unknown, so libcst must not be given it)."""
    import io
    import tokenize

    longest = count = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            count += 1
            if token.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
                longest, count = max(longest, count), 0
    except (tokenize.TokenError, SyntaxError):
        return float("inf")
    return max(longest, count)


def on_deep_stack(function, *args):
    """`function(*args)` on a thread with a large stack and recursion limit; its exceptions re-raised here."""
    if threading.current_thread() is _deep_stack.thread:  # an analysis inside one: already on the deep stack
        return _with_recursion_limit(function, args)
    jobs = _deep_stack_jobs()
    if jobs is None:  # no such stack on this system: run here, with the usual limits
        return function(*args)
    job = _DeepStackJob(function, args)
    jobs.put(job)
    job.done.wait()
    if job.error is not None:
        error, job.error = job.error, None  # kept in `job`, its traceback would be a reference cycle
        raise error
    return job.value


class _DeepStackJob:
    def __init__(self, function, args) -> None:
        self.function, self.args = function, args
        self.value = self.error = None
        self.done = threading.Event()


class _DeepStack:
    """The process's one deep-stack thread and its queue of jobs. One thread serves every file: a thread
    started per file cost each file's parse and analysis a fresh malloc arena's page faults (about 200,000
    per 68 transformers files, an eighth of libcst's parse time)."""

    def __init__(self) -> None:
        self.thread: threading.Thread | None = None
        self.jobs = None
        self.lock = threading.Lock()


_deep_stack = _DeepStack()
if hasattr(os, "register_at_fork"):  # a forked worker inherits the object but not the thread: it starts its own
    os.register_at_fork(after_in_child=_deep_stack.__init__)


def _deep_stack_jobs():
    """The deep-stack thread's queue, the thread started on first use (in this process); None when it cannot start."""
    import queue

    with _deep_stack.lock:
        if _deep_stack.thread is None or not _deep_stack.thread.is_alive():
            jobs: queue.SimpleQueue = queue.SimpleQueue()
            previous = threading.stack_size()
            try:
                threading.stack_size(STACK_BYTES)
                thread = threading.Thread(target=_serve_deep_stack, args=(jobs,), name="reslint-static", daemon=True)
                thread.start()
            except (RuntimeError, ValueError, MemoryError):
                return None
            finally:
                threading.stack_size(previous)
            _deep_stack.thread, _deep_stack.jobs = thread, jobs
        return _deep_stack.jobs


def _serve_deep_stack(jobs) -> None:
    # Ctrl-C and SIGTERM go to the main thread: one the kernel hands this thread leaves the main thread asleep
    # (in a worker's select on its trace child) with Python's handler pending until it wakes.
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    while True:
        job = jobs.get()
        try:
            job.value = _with_recursion_limit(job.function, job.args)
        except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
            job.error = error
        finally:
            job.function = job.args = None  # nothing of the file outlives its analysis here
            job.done.set()
        del job


def _with_recursion_limit(function, args):
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, RECURSION_LIMIT))
    try:
        return function(*args)
    finally:
        sys.setrecursionlimit(limit)


def class_reexports(text: str, tree=None) -> dict[str, str]:
    """`from .model import GPT` in a file with nothing else to check (a package's __init__.py): the
    link that lets a training script's `from mypkg import GPT` reach the model. (`tree`: CPython's AST of
    the text, when the pre-filter parsed it.)"""
    import ast
    import re

    if not re.search(r"^\s*from\s+\S+\s+import\b", text, re.M):
        return {}
    if tree is None:
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return {}
    exports = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            for alias in node.names:
                if alias.name[:1].isupper():
                    exports[alias.asname or alias.name] = base + alias.name if base.endswith(".") or not base \
                        else f"{base}.{alias.name}"
    return exports


def names_file(settings: Settings, path: str) -> bool:
    """Whether a `--model` spec (or the config's models) targets this file."""
    if not settings.models:
        return False
    from reslint.trace.engine import factories_for

    return bool(factories_for(os.path.abspath(path), settings))


def skippable(path: str, text: str, settings: Settings, source_path: str | None):
    """CPython's AST of a file the pre-filter lets go unanalysed (see reslint.prefilter); None: analyse it."""
    from reslint.prefilter import may_hold_model_or_training_code, parsed

    if may_hold_model_or_training_code(text):
        return None
    real = os.path.abspath(source_path or path)
    if settings.train:
        from reslint.discovery import matches_glob, root_relative

        relative = root_relative(real, settings.root)
        if any(matches_glob(relative, glob) for glob in settings.train):
            return None
    if not settings.static and names_file(settings, real):
        return None
    return parsed(text, path)


def file_links(facts, text: str, path: str | None = None, root: str | None = None,
               reads: list[str] | None = None, tree=None, training: bool = True) -> FileLinks:
    """What the file offers to and asks of other files: Post-LN classes, class uses, training code (unless not
    `training`). Training configs read for it are appended to `reads`; `tree`: CPython's AST of `text`, if parsed."""
    from reslint.static.training import extract_training, factory_returns

    model_refs, optimizers, schedules = extract_training(text, path, root, reads, tree) if training else ([], [], [])
    class_uses = {**{name: list(uses) for name, uses in factory_returns(text, tree).items()},
                  **{cls: [use for use in uses if use not in built_pre_ln(facts, cls)]
                     for cls, uses in facts.class_uses.items()}}
    return FileLinks(
        post_ln_blocks=[PostLNBlock(cls, add.span.line, add.span.column, f"`{add.builtin}` in `{cls}`" if add.builtin else "")
                        for cls, add in facts.post_ln_blocks.items()],
        class_uses=class_uses,
        imports=dict(facts.class_imports),
        model_refs=model_refs if optimizers else [],
        optimizers=optimizers,
        schedules=schedules if optimizers else [],
        open_streams={key: list(roots) for key, roots in facts.open_streams.items()},
        stream_ends=dict(facts.stream_ends),
    )


def built_pre_ln(facts, cls: str) -> set[str]:
    """The imported block classes `cls` stacks Pre-LN (`EncoderLayer(layer_norm="pre")`): whatever their own
    default, the Post-LN blocks of a model reached through `cls` are not among them (RL301)."""
    from reslint.placement import placement_family

    return {facts.class_imports[block] for key, stack in facts.stacks.items() if stack.owner == cls
            and placement_family(facts.stack_placement(key)) == "pre"
            for block in stack.block_classes if block in facts.class_imports}


def torch_available() -> bool:
    """A torch with the trace engine's needs (torch.export, torch.fx); else static facts only."""
    try:
        import torch
        import torch.export
        import torch.fx
    except Exception:  # noqa: BLE001 - a broken torch install raises more than ImportError
        return False
    return hasattr(torch, "nn") and hasattr(torch.export, "export")


@dataclass
class TracedFile:
    """What the trace engine found in one file, in plain values that cross a process boundary."""

    findings: list[Finding] = field(default_factory=list)
    summaries: list[ModelSummary] = field(default_factory=list)
    static_only: dict[str, str] = field(default_factory=dict)  # model name -> why it was not traced
    notes: list[str] = field(default_factory=list)
    imported: bool = False
    timed_out: bool = False  # a time limit cut something short: the result may differ next time
    traces: list[TraceOutcome] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)  # files construction sites were read from (model discovery)
    exported: bool = False  # torch.export ran (see warm_for_tracing)

    def to_dict(self) -> dict:
        return {"reads": list(self.reads), "findings": [finding.to_dict() for finding in self.findings],
                "summaries": [summary.to_dict() for summary in self.summaries],
                "static_only": dict(self.static_only), "notes": list(self.notes),
                "imported": self.imported, "timed_out": self.timed_out,
                "traces": [trace.to_dict() for trace in self.traces], "exported": self.exported}

    @classmethod
    def from_dict(cls, data: dict) -> TracedFile:
        """Raises KeyError, TypeError or ValueError for data that is not a to_dict() document."""
        return cls(findings=[Finding.from_dict(finding) for finding in data["findings"]],
                   summaries=[ModelSummary.from_dict(summary) for summary in data["summaries"]],
                   static_only={str(name): str(reason) for name, reason in data["static_only"].items()},
                   notes=[str(note) for note in data["notes"]],
                   imported=bool(data["imported"]), timed_out=bool(data["timed_out"]),
                   traces=[TraceOutcome.from_dict(trace) for trace in data["traces"]],
                   reads=[str(path) for path in data.get("reads", ())], exported=bool(data.get("exported")))


def add_trace_results(result: FileResult, path: str, data: bytes, settings: Settings,
                      source_path: str | None) -> None:
    """Run the trace engine in an isolated child and merge: one finding per (path, line, code), the
    trace engine's preferred. Whatever the checked code does, the static findings stay."""
    from reslint.fixes import handed_back
    from reslint.isolation import ChildFailure, run_isolated_then
    from reslint.trace.engine import file_timeout, needs_import

    if not torch_available() or not needs_import(path, data, settings, source_path):
        return
    timeout = file_timeout(settings)
    warm_for_tracing(export="export seen" in _warmed)
    fix_check = handed_back.wanted() if source_path is None else None
    # The child's own per-model limits report precisely; this one also stops hangs in C code, crashes and exits.
    traced, fix_analyses = run_isolated_then(traced_document, path, data, settings, source_path, fix_check,
                                             list(result.findings), timeout=timeout + 2,
                                             then_timeout=timeout + 2 if fix_check is not None else None)
    handed_back.take(path, fix_analyses)
    if isinstance(traced, dict) and traced.get("exported"):
        _warmed.add("export seen")  # the next child forked from here starts with export warmed up
    if not isinstance(traced, ChildFailure):
        try:
            traced = TracedFile.from_dict(traced)
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            traced = ChildFailure(f"sent back a malformed result ({type(error).__name__}: {error})", "tracing")
    if isinstance(traced, ChildFailure):
        traced = failed_trace(path, traced, timeout)
    result.imported = traced.imported
    result.reads = [*result.reads, *(path for path in traced.reads if path not in result.reads)]
    result.cacheable = not traced.timed_out
    result.traces = traced.traces
    result.findings = merge_findings(result.findings, traced.findings)
    traced_names = {summary.name for summary in traced.summaries}
    models = [summary for summary in result.models if summary.name not in traced_names]
    result.models = [
        dataclasses.replace(summary, notes=(*summary.notes, f"static only: {static_only_reason(summary.name, traced)}"))
        for summary in models
    ] + traced.summaries


def preload_torch() -> None:
    """torch imports most of what tracing needs on first use (meta kernels, export: seconds); do that
    use once here, on meta tensors only, so no compute thread pool exists when the workers fork."""
    import contextlib
    import io
    import sys
    import warnings

    if "torch" not in sys.modules:  # the full check imported it already; without it there is no tracing
        return
    try:
        import torch
        import torch.export

        class Warmup(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.linear = torch.nn.Linear(2, 2)

            def forward(self, x):
                return self.linear(x) + x

        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()), \
                contextlib.redirect_stdout(io.StringIO()), torch.device("meta"):
            warnings.simplefilter("ignore")
            torch.export.export(Warmup(), (torch.empty(1, 2),), strict=False)
    except Exception:  # noqa: BLE001 - only a head start: the workers do without it
        pass


_warmed: set[str] = set()


# The trace engine's modules a trace child imports (with what they import): a child forked after the
# parent imported them shares them instead of compiling or unmarshalling them again.
TRACE_MODULES = ("reslint.trace.engine", "reslint.trace.models", "reslint.trace.inputs", "reslint.trace.capture",
                 "reslint.trace.fast_capture", "reslint.trace.shared_backbone", "reslint.trace.graph_facts",
                 "reslint.trace.config_reduction", "reslint.trace.constructor_arguments",
                 "reslint.static.construction_sites")


def warm_for_tracing(export: bool) -> None:
    """Import once in this process what each forked trace child would otherwise import on its own:
    torch's symbolic shapes (and sympy), which every `torch._check` of the meta kernels (an add, an
    arange) loads on first use; the trace engine's modules and the references meta_init finds; and
    `export`: torch.export's own warm-up (dynamo included), seconds per process, done here once an earlier
    child needed export (a single file's child pays it alone, as it would here). Dynamo itself is not
    imported for children the fast capture path serves (see trace.meta_init.refs_without_dynamo)."""
    import importlib

    # What these imports make lives as long as the process: frozen before the collector walks it (sympy's
    # objects set off a full collection of everything otherwise: 0.1 CPU-s), as api.require_torch does torch's.
    with collector_paused():
        for step in ("symbolic shapes", "trace engine", "export")[:3 if export else 2]:
            if step in _warmed:
                continue
            _warmed.add(step)
            try:
                if step == "export":
                    preload_torch()
                elif step == "trace engine":
                    for name in TRACE_MODULES:
                        importlib.import_module(name)
                    importlib.import_module("reslint.trace.meta_init").disabled_references()
                else:
                    importlib.import_module("torch.fx.experimental.symbolic_shapes")
            except Exception:  # noqa: BLE001 - only a head start: the children do without it
                pass
        gc.freeze()


def failed_trace(path: str, failure, timeout: float) -> TracedFile:
    """The child died or hung: one RL902 (import, build) or RL903 (tracing) naming what it was doing."""
    cause = failure.cause
    if cause.startswith("timed out"):
        cause = f"timed out after {timeout:g} s"
    code = "RL903" if failure.stage.startswith("tracing") else "RL902"
    message = f"{failure.stage}: {cause}; static findings are still reported"
    # A crash or hang of the child is reslint's limit, whatever the code did.
    finding = Finding(code, message, path, failure.line, 1, symbol=failure.symbol, engine="trace", severity="info")
    # A crash or hang may depend on the machine or the moment: never cached.
    trace = TraceOutcome(path, failure.symbol, failure.line, False, f"{failure.stage}: {cause}")
    return TracedFile(findings=[finding], notes=[f"{failure.stage}: {cause}"], imported=True, timed_out=True,
                      traces=[trace])


def traced_document(path: str, data: bytes, settings: Settings, source_path: str | None,
                    fix_check: Callable | None = None, static_findings: list[Finding] = ()):
    """trace_and_check's result as data, to cross the process boundary (in the isolated child). With a
    `fix_check` (fixes.checked_in_trace_child.check_fixes_here), the result is delivered and the file's fixes
    are checked here after it, on its `static_findings` and the traced ones: what that computed is returned."""
    from reslint.trace import capture

    capture.exported = False
    traced = trace_and_check(path, data, settings, source_path)
    traced.exported = capture.exported
    if fix_check is None:
        return traced.to_dict()
    from reslint.isolation import deliver

    deliver(traced.to_dict())
    return fix_check(path, data, settings, merge_findings(list(static_findings), traced.findings))


def trace_and_check(path: str, data: bytes, settings: Settings, source_path: str | None) -> TracedFile:
    """Import the file, trace its models and run the rules on the graphs (in the isolated child). The result's
    reads: the files of its construction sites, and those the trace engine's cross-file facts noted."""
    from reslint import cross_file_reads
    from reslint.trace.engine import trace_file

    with cross_file_reads.recorded() as noted:
        outcome = check_captures(trace_file(path, data, settings, source_path=source_path), path, settings)
    own = os.path.abspath(source_path or path)
    outcome.reads.extend(read for read in noted if read != own and read not in outcome.reads)
    return outcome


def check_captures(traced, path: str, settings: Settings, static_fallback: bool = True) -> TracedFile:
    """Run the rules on the graphs of a `TraceResult`: findings and summaries named after the trace engine.

    `static_fallback`: a graph that cannot be read is an RL903 saying the static facts stand for it.
    """
    from reslint.rules import run_rules

    try:
        from reslint.trace.shared_backbone import captured_facts as facts_from_capture
    except ImportError:
        facts_from_capture = None
    outcome = TracedFile(findings=list(traced.findings), static_only=dict(traced.static_only),
                         notes=list(traced.notes), imported=traced.imported, timed_out=traced.timed_out,
                         reads=list(getattr(traced, "reads", ())))
    built_from = getattr(traced, "built_from", {})
    for capture in traced.captures:
        if facts_from_capture is None:
            outcome.static_only.setdefault(capture.model_name, "the trace engine's graph analysis is not available")
            continue
        try:
            facts = facts_from_capture(capture, path)
        except Exception as error:  # noqa: BLE001 - a graph we cannot read must not lose the static findings
            from reslint.trace.loader import one_line

            reason = f"reading the {capture.method} graph failed: {one_line(error)}"
            outcome.findings.append(Finding("RL903", reason + ("; static facts were used" if static_fallback else ""), path,
                                            capture.class_line, 1, symbol=capture.model_name, engine="trace"))
            outcome.static_only[capture.model_name] = reason
            traced.lines[capture.model_name] = capture.class_line
            continue
        if capture.model_name in getattr(traced, "depths", {}):
            restore_depth(facts, traced.depths[capture.model_name])
        if capture.reduction:
            from reslint.trace.config_reduction import restore_depths

            restore_depths(facts, capture.reduction)
        engine = f"traced ({capture.method}{', reduced config' if capture.reduction else ''})"
        outcome.findings.extend(dataclasses.replace(finding, engine="trace")
                                for finding in run_rules(facts, settings))
        for summary in facts.model_summaries():
            outcome.summaries.append(dataclasses.replace(summary, engine=engine, notes=tuple(capture.notes),
                                                         built_from=built_from.get(capture.model_name, "")))
        outcome.static_only.pop(capture.model_name, None)
        outcome.traces.append(TraceOutcome(path, capture.model_name, capture.class_line, True))
    outcome.traces.extend(TraceOutcome(path, name, traced.lines[name], False, reason)
                          for name, reason in outcome.static_only.items() if name in traced.lines)
    if traced.import_failed:
        outcome.traces.append(TraceOutcome(path, "", 1, False, traced.notes[0] if traced.notes else "not imported"))
    outcome.traces.sort(key=lambda trace: (trace.line, trace.name))
    return outcome


def restore_depth(facts, depth: int | None) -> None:
    """A model built shallower than its construction site asks (model discovery shrinks deep models to
    trace them fast): its stacks of the shrunk depth have the site's depth, for RL104 and the summary;
    None where the depth was inferred (the model's own depth is unknown)."""
    from reslint.static.construction_sites import SHRUNK_DEPTH

    for key, stack in list(facts.stacks.items()):
        if stack.depth == SHRUNK_DEPTH:
            facts.stacks[key] = dataclasses.replace(stack, depth=depth)


# Findings about a whole stack: the engines may point at different lines of it (the static engine at
# the `for` loop, the trace engine at the block call), so they are one finding per stack.
STACK_CODES = ("RL102", "RL103", "RL104")


def merge_findings(static: list[Finding], traced: list[Finding]) -> list[Finding]:
    """One finding per place and code, the trace engine's preferred; stack findings once per stack,
    at the static engine's place (the one the rule pages document) when it has one."""

    def key(finding: Finding) -> tuple:
        if finding.code in STACK_CODES and "." in finding.symbol:  # symbol is the stack: "TinyGPT.blocks"
            return (finding.path, finding.code, finding.symbol)
        return (finding.path, finding.line, finding.code)

    merged: dict[tuple, Finding] = {key(finding): finding for finding in static}
    for finding in traced:
        previous = merged.get(key(finding))
        if previous is not None and finding.code in STACK_CODES:
            finding = dataclasses.replace(finding, line=previous.line, column=previous.column)
        merged[key(finding)] = finding
    return list(merged.values())


def static_only_reason(name: str, traced: TracedFile) -> str:
    if name in traced.static_only:
        return traced.static_only[name]
    if traced.notes:
        return traced.notes[0]
    if not traced.imported:
        return "the file was not imported"
    return "not built by the trace engine (not discovered as an outermost model; pass --model FILE:EXPR)"
