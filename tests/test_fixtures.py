"""Every fixture is checked against its golden file: the findings that must fire and nothing else."""

from __future__ import annotations

import os

import pytest

from golden import ROOT, expected, fixture_files, render


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_fixture_matches_golden_file(path):
    actual = render(path, messages=True)
    if os.environ.get("RESLINT_UPDATE_GOLDEN"):  # the file's comment lines (why a line is or is not there) stay on top
        golden = path.with_suffix(".expected")
        notes = [line for line in golden.read_text(encoding="utf-8").splitlines() if line.startswith("#")] if golden.exists() else []
        golden.write_text("\n".join(notes + actual) + "\n", encoding="utf-8")
    assert actual == expected(path)


def test_every_fixture_has_a_golden_file():
    fixtures = sorted((ROOT / "fixtures").rglob("*.py"))
    missing = [p.relative_to(ROOT).as_posix() for p in fixtures if not p.with_suffix(".expected").exists()]
    assert missing == []
