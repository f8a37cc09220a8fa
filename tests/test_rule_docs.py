"""The rule pages are tests too (Fixit-style): each page's Bad example draws its code on the
marked line, and its Good example draws none of it."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from golden import ROOT

from reslint.analysis import analyze_file
from reslint.catalog import RULES
from reslint.discovery import SourceFile
from reslint.runner import check_sources
from reslint.settings import Settings

# Rules the static engine checks; the others' examples need tracing, a training script or a probe.
STATIC_RULES = ["RL001", "RL003", "RL101", "RL102", "RL103", "RL104", "RL201", "RL301", "RL401", "RL402", "RL403",
                "RL501", "RL901"]
SECTIONS = ("What it detects", "Why it matters", "Bad", "Good", "How to fix", "How to suppress", "References")


def example(code: str, section: str) -> str:
    page = (ROOT / "rules" / f"{code}.md").read_text(encoding="utf-8")
    match = re.search(rf"^## {section}\n.*?```python\n(.*?)```", page, flags=re.S | re.M)
    assert match, f"{code}.md has no ```python block under ## {section}"
    return match.group(1)


def findings_of(code: str, source: str) -> list[int]:
    if code == "RL301":  # links training code to the model: the runner's project stage
        with tempfile.TemporaryDirectory() as directory:
            path = Path(directory, "example.py")
            path.write_text(source, encoding="utf-8")
            settings = Settings(static=True, cache=False, jobs=1, root=directory)
            report = check_sources([SourceFile(str(path), "example.py", "example.py")], settings)
        return sorted(f.line for f in report.findings if f.code == code)
    result = analyze_file(f"rules/{code}.md", source.encode(), Settings())
    return sorted(f.line for f in result.findings if f.code == code)


@pytest.mark.parametrize("code", STATIC_RULES)
def test_bad_example_fires_on_the_marked_line(code):
    source = example(code, "Bad")
    marked = [n for n, line in enumerate(source.splitlines(), 1) if f"# <- {code}" in line]
    assert len(marked) == 1
    assert findings_of(code, source) == marked


@pytest.mark.parametrize("code", STATIC_RULES)
def test_good_example_is_silent(code):
    assert findings_of(code, example(code, "Good")) == []


@pytest.mark.parametrize("code", sorted(RULES))
def test_every_rule_has_a_complete_page(code):
    page = (ROOT / "rules" / f"{code}.md").read_text(encoding="utf-8")
    assert page.startswith(f"# {code} · {RULES[code].name}")
    for section in SECTIONS[1:]:
        assert f"## {section}" in page, f"{code}.md lacks ## {section}"
    assert "noqa" in page and "reslint: ignore" in page
