"""Every fixture is checked against its golden file: the findings that must fire and nothing else."""

from __future__ import annotations

import os

import pytest

from golden import ROOT, expected, fixture_files, render


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_fixture_matches_golden_file(path):
    actual = render(path)
    if os.environ.get("RESLINT_UPDATE_GOLDEN"):
        path.with_suffix(".expected").write_text("\n".join(actual) + "\n", encoding="utf-8")
    assert actual == expected(path)


def test_every_fixture_has_a_golden_file():
    fixtures = sorted((ROOT / "fixtures").rglob("*.py"))
    missing = [p.relative_to(ROOT).as_posix() for p in fixtures if not p.with_suffix(".expected").exists()]
    assert missing == []
