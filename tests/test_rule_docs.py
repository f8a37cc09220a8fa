"""The rule pages are tests too (Fixit-style): each page's Bad example draws its code on the
marked line, and its Good example draws none of it.

Static rules run through the static engine; the probe rules (RL601-RL604) through `reslint probe`,
with the command the page shows under its Bad example, in a directory holding the example."""

from __future__ import annotations

import json
import re
import shlex
import tempfile
from pathlib import Path

import pytest

from golden import ROOT

from reslint.analysis import analyze_file
from reslint.catalog import RULES
from reslint.discovery import SourceFile
from reslint.runner import check_sources
from reslint.settings import Settings

# Rules the static check reports (the catalog's engine "any", or "training": RL301); the others' examples
# need tracing or a probe.
STATIC_RULES = [code for code, rule in RULES.items() if rule.engine in ("any", "training")]
PROBE_RULES = [code for code, rule in RULES.items() if rule.engine == "probe"]
SECTIONS = ("What it detects", "Why it matters", "Bad", "Good", "How to fix", "How to suppress", "References")


def example(code: str, section: str) -> str:
    page = (ROOT / "rules" / f"{code}.md").read_text(encoding="utf-8")
    match = re.search(rf"^## {section}\n.*?```python\n(.*?)```", page, flags=re.S | re.M)
    assert match, f"{code}.md has no ```python block under ## {section}"
    return match.group(1)


def findings_of(code: str, source: str) -> list[int]:
    if code in ("RL301", "RL905"):  # the runner's stages: linking training code, reading suppression comments
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


def shown_output(code: str) -> str:
    """The ```text block right after the page's Bad example: the command and what it printed."""
    page = (ROOT / "rules" / f"{code}.md").read_text(encoding="utf-8")
    match = re.search(r"^## Bad\n.*?```python\n.*?```\s*```text\n(.*?)```", page, flags=re.S | re.M)
    assert match, f"{code}.md shows no output under its Bad example"
    return match.group(1)


def probe_example(code: str, section: str, tmp_path, monkeypatch, capsys) -> tuple[dict, str]:
    """Run the page's `reslint probe` command on the section's example; (JSON document, shown output)."""
    pytest.importorskip("torch")
    from reslint import cli

    shown = shown_output(code)
    command = next(line for line in shown.splitlines() if line.startswith("$ reslint probe "))
    args = shlex.split(command)[2:]
    (tmp_path / args[1]).write_text(example(code, section), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    status = cli.run([*args, "--output-format", "json"])
    captured = capsys.readouterr()
    assert status in (0, 1), captured.err
    return json.loads(captured.out), shown


@pytest.mark.parametrize("code", PROBE_RULES)
def test_probe_bad_example_fires_on_the_marked_line_as_shown(code, tmp_path, monkeypatch, capsys):
    document, shown = probe_example(code, "Bad", tmp_path, monkeypatch, capsys)
    source = example(code, "Bad")
    marked = [n for n, line in enumerate(source.splitlines(), 1) if f"# <- {code}" in line]
    found = [f for f in document["findings"] if f["code"] == code]
    assert [f["line"] for f in found] == marked
    # The page shows the finding as the probe prints it: same place, code and severity.
    for finding in found:
        prefix = f"{finding['path']}:{finding['line']}:{finding['column']}: {code} [{finding['severity']}] "
        assert any(line.startswith(prefix) for line in shown.splitlines()), prefix


@pytest.mark.parametrize("code", PROBE_RULES)
def test_probe_good_example_is_silent(code, tmp_path, monkeypatch, capsys):
    document, _ = probe_example(code, "Good", tmp_path, monkeypatch, capsys)
    assert [f for f in document["findings"] if f["code"] == code] == []
