"""Awkward paths and broken configs through the real CLI: a clear line and a defined exit code.

Symlink loops, dangling symlinks, unreadable files and directories, FIFOs, names with spaces,
non-ASCII or undecodable bytes, files outside the project root and a pyproject.toml that is not
TOML: each is a finding (exit 1), a counted skip, or one `reslint: error:` line (exit 2), never a
traceback nor a hang.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import pytest

from cli_support import BATCHNORM, BATCHNORM_LINE, POST_LN, POST_LN_LINE, codes, run_reslint, write



def permissions_apply() -> bool:
    """False for root (os.geteuid() == 0) or any user whose capabilities read files whatever their mode."""
    with tempfile.TemporaryDirectory() as directory:
        probe = Path(directory, "probe")
        probe.write_text("")
        probe.chmod(0)
        try:
            probe.open().close()
        except PermissionError:
            return True
        return False


needs_permissions = pytest.mark.skipif(not permissions_apply(), reason="this user reads files whatever their mode (root)")


def check(cwd: Path, *args: str):
    return run_reslint("check", "--static", "--no-cache", *args, cwd=cwd)


def check_json(cwd: Path, *args: str):
    result = check(cwd, "--output-format", "json", *args)
    assert "Traceback" not in result.stderr, result.stderr
    return result, json.loads(result.stdout)


def assert_one_line_error(result, message: str) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr == f"reslint: error: {message}\n"


# ----- symlinks ------------------------------------------------------------------------------

def test_symlink_loops_inside_a_directory_are_not_followed_and_are_counted(tmp_path):
    write(tmp_path, {"pkg/model.py": POST_LN})
    (tmp_path / "pkg" / "back").symlink_to(tmp_path)  # a cycle, if it were followed
    (tmp_path / "self").symlink_to(tmp_path / "self")  # a link to itself
    (tmp_path / "loop.py").symlink_to(tmp_path / "loop.py")
    result, report = check_json(tmp_path)
    assert result.returncode == 1
    findings = [(f["path"], f["code"], f["line"]) for f in report["findings"]]
    assert findings == [("loop.py", "RL901", 1), ("pkg/model.py", "RL101", POST_LN_LINE)]
    assert report["findings"][0]["message"] == "cannot read file: Too many levels of symbolic links"
    assert report["summary"]["files"] == 2
    assert report["summary"]["skipped"] == {"symlinked directory": 1}


def test_a_symlink_loop_given_as_a_path_is_a_usage_error(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    assert_one_line_error(check(tmp_path, "a"), "symbolic link loop: a")


def test_a_dangling_symlink_given_as_a_directory_is_a_usage_error(tmp_path):
    (tmp_path / "models").symlink_to(tmp_path / "moved-away", target_is_directory=True)
    assert_one_line_error(check(tmp_path, "models"), "broken symbolic link: models (its target does not exist)")


def test_a_symlink_to_a_directory_given_as_a_path_is_walked(tmp_path):
    write(tmp_path / "real", {"model.py": POST_LN})
    (tmp_path / "link").symlink_to(tmp_path / "real", target_is_directory=True)
    result, report = check_json(tmp_path, "link")
    assert codes(result.stdout) == [("link/model.py", "RL101", POST_LN_LINE)]


# ----- unreadable and special files ----------------------------------------------------------

@needs_permissions
def test_an_unreadable_file_is_rl901_and_the_others_are_checked(tmp_path):
    write(tmp_path, {"locked.py": POST_LN, "open.py": BATCHNORM})
    (tmp_path / "locked.py").chmod(0)
    result, report = check_json(tmp_path)
    assert result.returncode == 1
    assert codes(result.stdout) == [("locked.py", "RL901", 1), ("open.py", "RL201", BATCHNORM_LINE)]
    assert report["findings"][0]["message"] == "cannot read file: Permission denied"


@needs_permissions
def test_an_unreadable_directory_is_skipped_and_counted(tmp_path):
    write(tmp_path, {"locked/model.py": POST_LN, "open.py": BATCHNORM})
    (tmp_path / "locked").chmod(0)
    try:
        result = check(tmp_path, "--verbose")
    finally:
        (tmp_path / "locked").chmod(0o755)
    assert result.returncode == 1, result.stderr
    assert "Skipped 1 path (unreadable directory: 1)." in result.stdout
    assert "  locked/: unreadable directory" in result.stdout
    assert "Found 1 finding" in result.stdout


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_never_opened(tmp_path):
    write(tmp_path, {"model.py": POST_LN})
    os.mkfifo(tmp_path / "pipe.py")  # opening it to read would block until a writer comes
    result, report = check_json(tmp_path)
    assert codes(result.stdout) == [("model.py", "RL101", POST_LN_LINE)]
    assert report["summary"]["skipped"] == {"not a regular file": 1}
    assert_one_line_error(check(tmp_path, "pipe.py"), "not a regular file or directory: pipe.py")


# ----- names -----------------------------------------------------------------------------------

def test_spaces_and_non_ascii_names_are_shown_as_they_are(tmp_path):
    write(tmp_path, {"my models/模型 ü/batch norm.py": BATCHNORM})
    result, _ = check_json(tmp_path)
    assert result.returncode == 1
    assert codes(result.stdout) == [("my models/模型 ü/batch norm.py", "RL201", BATCHNORM_LINE)]
    text = check(tmp_path, "my models")
    assert text.returncode == 1
    assert text.stdout.startswith(f"my models/模型 ü/batch norm.py:{BATCHNORM_LINE}:")
    sarif = json.loads(check(tmp_path, "--output-format", "sarif").stdout)
    location = sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert location["uri"] == "my%20models/%E6%A8%A1%E5%9E%8B%20%C3%BC/batch%20norm.py"


@pytest.mark.skipif(sys.platform != "linux", reason="file names are bytes on Linux only")
def test_a_file_name_that_is_not_utf8_is_checked_and_reported(tmp_path):
    write(tmp_path, {"model.py": BATCHNORM})
    os.rename(tmp_path / "model.py", os.path.join(os.fsencode(tmp_path), b"caf\xe9.py"))
    result, report = check_json(tmp_path)
    assert result.returncode == 1
    assert [(f["code"], f["line"]) for f in report["findings"]] == [("RL201", BATCHNORM_LINE)]
    assert report["findings"][0]["path"] == "caf\\xe9.py"  # the undecodable byte as text: valid Unicode
    text = check(tmp_path)
    assert text.returncode == 1 and "Traceback" not in text.stderr
    assert text.stdout.startswith("caf\\xe9.py:")


def test_a_file_outside_the_project_root_is_checked_with_an_absolute_path(tmp_path):
    project = write(tmp_path / "project", {"pyproject.toml": "[tool.reslint]\nselect = ['RL2']\n", "model.py": POST_LN})
    outside = write(tmp_path / "other", {"x.py": BATCHNORM}) / "x.py"
    result = run_reslint("check", "--static", "--output-format", "json", str(outside), "model.py", cwd=project)
    assert result.returncode == 1, result.stderr
    assert codes(result.stdout) == [(outside.as_posix(), "RL201", BATCHNORM_LINE)]  # the project's select applies
    cached = run_reslint("check", "--static", "--output-format", "json", str(outside), "model.py", cwd=project)
    assert cached.stdout == result.stdout


def test_an_excluded_file_outside_the_root_is_counted_not_dropped_silently(tmp_path):
    # As in ruff, a glob without a slash matches any component of the path, here `other`.
    project = write(tmp_path / "project", {"pyproject.toml": "[tool.reslint]\nexclude = ['other']\n"})
    outside = write(tmp_path / "other", {"x.py": BATCHNORM}) / "x.py"
    result = run_reslint("check", "--static", "--no-cache", str(outside), cwd=project)
    assert result.returncode == 0, result.stderr
    assert "Skipped 1 path (excluded: 1; --verbose lists them)." in result.stdout
    assert result.stderr == "reslint: warning: no Python files to check\n"


# ----- configs ---------------------------------------------------------------------------------

def test_a_pyproject_that_is_not_toml_is_one_line_exit_2(tmp_path):
    write(tmp_path, {"pyproject.toml": "[tool.reslint]\nselect = ['RL1'\n", "model.py": POST_LN})
    result = check(tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("reslint: error: pyproject.toml: invalid TOML: ")
    assert result.stderr.count("\n") == 1


def test_a_pyproject_that_is_not_utf8_is_one_line_exit_2(tmp_path):
    write(tmp_path, {"pyproject.toml": b"[tool.reslint]\nselect = ['RL1']  # caf\xe9\n", "model.py": POST_LN})
    result = check(tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("reslint: error: pyproject.toml: invalid TOML: ")
    assert result.stderr.count("\n") == 1


def test_a_config_key_with_a_newline_is_quoted_on_one_line(tmp_path):
    write(tmp_path, {"pyproject.toml": '[tool.reslint]\n"sel\\nect" = 1\n', "model.py": POST_LN})
    assert_one_line_error(check(tmp_path), 'pyproject.toml: tool.reslint."sel\\nect": unknown key (did you mean \'select\'?)')


@needs_permissions
def test_an_unreadable_pyproject_is_one_line_exit_2(tmp_path):
    write(tmp_path, {"pyproject.toml": "[tool.reslint]\n", "model.py": POST_LN})
    (tmp_path / "pyproject.toml").chmod(0)
    result = check(tmp_path)
    assert result.returncode == 2
    assert result.stderr == "reslint: error: pyproject.toml: cannot read config: Permission denied\n"


def test_a_config_argument_that_is_a_directory_is_one_line_exit_2(tmp_path):
    write(tmp_path, {"conf/x.py": "", "model.py": POST_LN})
    assert_one_line_error(check(tmp_path, "--config", "conf"), "config file not found: conf")
