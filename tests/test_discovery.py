from __future__ import annotations

from pathlib import Path

import pytest

from reslint.discovery import DiscoveryError, Skipped, discover, display_path, find_sources, matches_glob


def touch(root: Path, *names: str) -> None:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")


def displays(tmp_path: Path, *paths: str, exclude: tuple[str, ...] = ()) -> list[str]:
    return [source.display for source in discover(paths or (".",), str(tmp_path), exclude, cwd=str(tmp_path))]


def test_walks_python_files_sorted_and_skips_tool_directories(tmp_path):
    touch(
        tmp_path,
        "b.py", "a.py", "stubs/types.pyi", "pkg/sub/model.py", "notes.txt", "script",
        ".git/hooks/x.py", ".hg/x.py", ".venv/lib/x.py", "venv/x.py", "__pycache__/x.py",
        "build/lib/x.py", "dist/x.py", "node_modules/x.py", ".tox/x.py", ".nox/x.py",
        ".eggs/x.py", "reslint.egg-info/x.py", "lib/site-packages/x.py", ".mypy_cache/x.py",
        ".pytest_cache/x.py", ".reslint_cache/x.py",
    )
    assert displays(tmp_path) == ["a.py", "b.py", "pkg/sub/model.py", "stubs/types.pyi"]


def test_every_skipped_path_is_reported_with_its_reason(tmp_path):
    touch(tmp_path, "a.py", ".git/x.py", "__pycache__/x.py", ".venv/lib/x.py", "build/x.py", "gen/x.py",
          "src/old_pb2.py", "real/x.py")
    (tmp_path / "src" / "alias").symlink_to(tmp_path / "real")
    found = find_sources(["."], str(tmp_path), ("gen", "*_pb2.py"), cwd=str(tmp_path))
    assert [source.display for source in found.sources] == ["a.py", "real/x.py"]
    # VCS metadata and caches hold no source: not worth a word
    assert found.skipped == [
        Skipped(".venv", "virtualenv or build directory", True),
        Skipped("build", "virtualenv or build directory", True),
        Skipped("gen", "excluded", True),
        Skipped("src/alias", "symlinked directory", True),
        Skipped("src/old_pb2.py", "excluded", False),
    ]


def test_skips_any_virtualenv_by_its_pyvenv_cfg(tmp_path):
    touch(tmp_path, "env311/lib/python3.11/site.py", "model.py")
    (tmp_path / "env311" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    assert displays(tmp_path) == ["model.py"]


def test_explicit_files_are_checked_whatever_their_suffix(tmp_path):
    touch(tmp_path, "bin/train", "build/generated.py")
    assert displays(tmp_path, "bin/train", "build/generated.py") == ["bin/train", "build/generated.py"]


def test_a_file_named_twice_is_checked_once(tmp_path):
    touch(tmp_path, "pkg/model.py")
    assert displays(tmp_path, "pkg/model.py", "pkg", "./pkg/model.py", ".") == ["pkg/model.py"]


def test_missing_path_is_a_discovery_error(tmp_path):
    with pytest.raises(DiscoveryError, match="path does not exist: nope.py"):
        discover(["nope.py"], str(tmp_path), cwd=str(tmp_path))


@pytest.mark.parametrize(
    ("pattern", "excluded"),
    [
        ("generated", ["generated/a.py", "src/generated/b.py"]),
        ("*_pb2.py", ["src/api_pb2.py"]),
        ("src/legacy", ["src/legacy/old.py"]),
        ("src/legacy/", ["src/legacy/old.py"]),
        ("./src/*.py", ["src/api_pb2.py", "src/main.py"]),
        ("**/old.py", ["src/legacy/old.py"]),
        ("main.py", ["src/main.py"]),
    ],
)
def test_exclude_globs_match_components_or_root_relative_paths(tmp_path, pattern, excluded):
    every = ["generated/a.py", "src/generated/b.py", "src/api_pb2.py", "src/legacy/old.py", "src/main.py"]
    touch(tmp_path, *every)
    assert displays(tmp_path, exclude=(pattern,)) == sorted(set(every) - set(excluded))


def test_exclude_applies_to_explicitly_passed_files_and_directories(tmp_path):
    touch(tmp_path, "generated/a.py", "keep.py")
    assert displays(tmp_path, "generated/a.py", "keep.py", exclude=("generated",)) == ["keep.py"]
    assert displays(tmp_path, "generated", exclude=("generated",)) == []


def test_exclude_is_relative_to_the_project_root_not_the_cwd(tmp_path):
    touch(tmp_path, "src/legacy/old.py", "src/new.py")
    sources = discover(["."], str(tmp_path), ("src/legacy",), cwd=str(tmp_path / "src"))
    assert [source.display for source in sources] == ["new.py"]
    assert [source.relative for source in sources] == ["src/new.py"]


def test_display_path_is_cwd_relative_with_forward_slashes_or_absolute(tmp_path):
    inside = tmp_path / "a" / "b.py"
    assert display_path(inside, tmp_path) == "a/b.py"
    outside = display_path(tmp_path / "x.py", tmp_path / "a")
    assert outside == (tmp_path / "x.py").as_posix()
    assert outside.startswith("/")


def test_paths_outside_the_cwd_are_shown_absolute(tmp_path):
    touch(tmp_path, "other/model.py")
    (tmp_path / "here").mkdir()
    sources = discover([str(tmp_path / "other")], str(tmp_path), cwd=str(tmp_path / "here"))
    assert [source.display for source in sources] == [(tmp_path / "other" / "model.py").as_posix()]


def test_matches_glob_ignores_empty_patterns():
    assert not matches_glob("a.py", "")
    assert not matches_glob("a.py", "./")


@pytest.mark.parametrize(
    ("relative", "pattern", "expected"),
    [
        ("src/a/b/c.py", "src/**/c.py", True),
        ("src/c.py", "src/**/c.py", True),
        ("src/a/c.py", "src/*.py", False),
        ("src/a/c.py", "src/**", True),
        ("src/model_v2.py", "src/model_v[0-9].py", True),
        ("src/model_vx.py", "src/model_v[!x].py", False),
        ("src/m1.py", "src/m?.py", True),
        ("tests/unit/test_a.py", "tests", True),
        ("mytests/a.py", "tests", False),
    ],
)
def test_glob_semantics(relative, pattern, expected):
    assert matches_glob(relative, pattern) is expected


def test_a_temporary_file_left_by_an_interrupted_fix_is_skipped_and_counted(tmp_path):
    # `--fix` traces the fixed text in `.reslint-fix-*.py` beside the file; a killed run leaves it behind
    touch(tmp_path, "model.py", "pkg/.reslint-fix-abc123.py", "pkg/layers.py")
    found = find_sources(["."], str(tmp_path), (), cwd=str(tmp_path))
    assert [source.display for source in found.sources] == ["model.py", "pkg/layers.py"]
    assert found.skipped == [Skipped("pkg/.reslint-fix-abc123.py", "reslint's temporary file, left by an interrupted --fix", False)]
