"""A deterministic sample of real code through the static engine: the installed transformers and torch.

No internal error, no RL901 on a file CPython's parser accepts, and no Python file of the package
neither checked nor counted as skipped. The whole packages: `python bench/corpus.py` (minutes).
"""

from __future__ import annotations

import importlib.util
import sys

import pytest

from golden import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import corpus  # noqa: E402

SAMPLE = 60
pytestmark = pytest.mark.corpus


@pytest.mark.parametrize("package", ["transformers", "torch"])
def test_a_sample_of_an_installed_package_checks_without_error(package):
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"{package} is not installed")
    result = corpus.run_corpus(package, jobs=2, sample=SAMPLE, seed=7)
    assert result.files_found > 1000  # the package itself, not a stub
    assert result.files_checked == SAMPLE
    assert result.internal_errors == []
    assert result.invalid_rl901 == []
    assert result.unaccounted == []
