"""Golden files: `fixtures/.../x.py` with the exact expected findings beside it in `x.expected`.

Each line of an expected file is `LINE:COL CODE message` for a finding (a finding in another file of
a linked fixture: `PATH:LINE:COL CODE message`), as ruff's snapshots pin the message with the place, or
`summary: ...` for a model summary line. Set RESLINT_UPDATE_GOLDEN=1 to rewrite them after a reviewed change.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from reslint.analysis import analyze_file
from reslint.config import Overrides, load_settings
from reslint.discovery import SourceFile, root_relative
from reslint.runner import check_sources
from reslint.findings import placement_label, stack_summary_line
from reslint.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


def fixture_files() -> list[Path]:
    return sorted(path for path in FIXTURES.rglob("*.py") if path.with_suffix(".expected").exists())


def render(path: Path, settings: Settings | None = None, messages: bool = False) -> list[str]:
    """The golden lines of a fixture; `messages`: each finding's line ends with its message."""
    relative = path.relative_to(ROOT).as_posix()
    if relative.startswith(("fixtures/warmup/", "fixtures/fixes/RL301/")):
        return render_linked(path, messages=messages)
    if relative.startswith("fixtures/final_norm/") and path.parent.name != "final_norm" or \
            relative.startswith(("fixtures/discovery/", "fixtures/project/")):
        return render_linked(path, project=True, messages=messages)
    if settings is None:
        # The static fixtures pin the static engine's findings; fixtures/trace/ pins the full check's.
        settings = Settings(static=not relative.startswith("fixtures/trace/"))
    if relative.startswith("fixtures/hostile/") and not settings.static:
        # They hang, crash or raise when imported or run: only an isolated full check may try that.
        raise ValueError(f"{relative} is hostile: its golden file pins the static check only")
    # The static check reads the config modules a file imports, next to the file wherever pytest runs.
    result = analyze_file(relative, path.read_bytes(), settings, str(path) if settings.static else None)
    lines = [finding_line(f, relative, messages) for f in sorted(result.findings, key=lambda f: f.sort_key)]
    for model in result.models:
        for stack in model.stacks:
            lines.append("summary: " + stack_summary_line(model, stack))
        if not model.stacks:
            lines.append(f"summary: {model.name}: {placement_label(model.placement)}")
    return lines


def expected(path: Path) -> list[str]:
    text = path.with_suffix(".expected").read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def render_linked(path: Path, project: bool = False, messages: bool = False) -> list[str]:
    """A training-code fixture checked through the runner, whose project stage links it to the models
    it trains (RL301). Findings in other files (a model file's training script) carry their path.

    `project`: the fixture is one file of a project directory checked as a whole (RL103 decided in the
    file that builds a stack's class); only this file's findings and models are listed."""
    relative = path.relative_to(ROOT).as_posix()
    with contextlib.chdir(ROOT):
        settings = load_settings(path.parent, None, Overrides(static=True, cache=False, jobs=1))
        files = sorted(path.parent.glob("*.py")) if project else [path]
        sources = [SourceFile(str(file), file.relative_to(ROOT).as_posix(), root_relative(str(file), settings.root))
                   for file in files]
        report = check_sources(sources, settings)
    if project:
        report.findings = [f for f in report.findings if f.path == relative]
        report.models = [model for model in report.models if model.path == relative]
    lines = [finding_line(f, relative, messages) for f in report.findings]
    for model in report.models:
        for stack in model.stacks:
            lines.append("summary: " + stack_summary_line(model, stack))
        if not model.stacks:
            lines.append(f"summary: {model.name}: {placement_label(model.placement)}")
        if model.warmup:
            lines.append(f"summary: {model.name} warmup: {model.warmup}")
    return lines


def finding_line(finding, relative: str, messages: bool) -> str:
    place = f"{finding.line}:{finding.column}" if finding.path == relative else f"{finding.path}:{finding.line}:{finding.column}"
    return f"{place} {finding.code}" + (f" {finding.message}" if messages else "")
