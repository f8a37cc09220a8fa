"""The published pre-commit hooks, run for real with `pre-commit try-repo`.

pre-commit builds the `reslint-static` hook's environment the way a user's pre-commit does
(`language: python`: a fresh virtualenv, `pip install` of this repository, so libcst and click
come from the package index and torch is not installed) and runs it on a scratch git repository.
The `reslint` hook (`language: system`) builds nothing and runs the `reslint` on PATH.

`pre-commit try-repo` always builds into a throwaway store of its own (it ignores PRE_COMMIT_HOME),
so each `reslint-static` run below builds the hook environment once (15-30 s each).
PRE_COMMIT_HOME still points at a per-session directory so that pre-commit's log and caches stay
out of ~/.cache.

The source given to try-repo is a snapshot of this working tree (tracked and untracked,
not ignored files) committed into a scratch repository: try-repo's own shadow commit of
uncommitted changes leaves untracked files out, so a new, not yet committed module or the
hook manifest itself would be missing from what it installs. On a clean checkout (CI) the
snapshot is the checkout.

Deselect with `-m "not precommit"`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.precommit

REPO_ROOT = Path(__file__).resolve().parent.parent
BAD_MODEL = REPO_ROOT / "fixtures" / "placement" / "pre_ln_without_final_norm.py"
GOOD_MODEL = REPO_ROOT / "fixtures" / "models" / "nanogpt.py"
STATIC_HOOK = "reslint-static"
FULL_HOOK = "reslint"
FIX_HOOK = "reslint-fix"
FIXABLE_MODEL = REPO_ROOT / "fixtures" / "fixes" / "composed" / "before.py"
TIMEOUT = 600

if shutil.which("git") is None:
    pytest.skip("git is not installed: pre-commit needs it", allow_module_level=True)


def git(*args: str, cwd: Path) -> str:
    # Identity and signing are set per call so that no global git config is needed or used.
    command = [
        "git",
        "-c", "user.name=reslint tests",
        "-c", "user.email=tests@reslint.invalid",
        "-c", "commit.gpgsign=false",
        "-c", "init.defaultBranch=main",
        *args,
    ]
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(command)} failed in {cwd}:\n{result.stdout}{result.stderr}")
    return result.stdout


def working_tree_files(root: Path) -> list[str]:
    inside = subprocess.run(
        ["git", "rev-parse", "--is-inside-work-tree"], cwd=root, capture_output=True, text=True, check=False
    )
    if inside.returncode != 0 or inside.stdout.strip() != "true":
        pytest.fail(f"{root} is not a git work tree: the pre-commit test needs this repository's checkout")
    listed = git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=root)
    # --cached also lists files deleted from the work tree but not yet from the index; a virtualenv
    # that is not git-ignored (one with a pyvenv.cfg) is not part of the source either.
    return sorted(
        name
        for name in set(listed.split("\0"))
        if name and (root / name).is_file() and not in_virtualenv(root, name)
    )


def in_virtualenv(root: Path, name: str) -> bool:
    return any((root / parent / "pyvenv.cfg").is_file() for parent in Path(name).parents if str(parent) != ".")


@pytest.fixture(scope="session")
def hook_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A committed snapshot of this working tree, the repository that try-repo installs from."""
    snapshot = tmp_path_factory.mktemp("hook-source")
    for name in working_tree_files(REPO_ROOT):
        target = snapshot / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / name, target)
    assert (snapshot / ".pre-commit-hooks.yaml").is_file(), "the hook manifest is missing from the repository"
    git("init", "-q", cwd=snapshot)
    git("add", "-A", cwd=snapshot)
    git("commit", "-q", "--no-verify", "-m", "snapshot of the working tree", cwd=snapshot)
    return snapshot


@pytest.fixture(scope="session")
def pre_commit_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    env = dict(os.environ)
    env["PRE_COMMIT_HOME"] = str(tmp_path_factory.mktemp("pre-commit-home"))
    # pre-commit colours its output for a TTY only; keep it plain for the assertions anyway.
    env["PRE_COMMIT_COLOR"] = "never"
    env["NO_COLOR"] = "1"
    # A pre-commit run inside a hook (e.g. this suite run from a hook) must not see the outer one.
    for name in ("PRE_COMMIT", "PRE_COMMIT_FROM_REF", "PRE_COMMIT_TO_REF", "GIT_DIR", "GIT_INDEX_FILE", "GIT_WORK_TREE"):
        env.pop(name, None)
    return env


def user_repo(path: Path, model: Path) -> Path:
    """A scratch repository like a user's, with one committed model file."""
    path.mkdir()
    git("init", "-q", cwd=path)
    shutil.copy(model, path / "model.py")
    git("add", "model.py", cwd=path)
    git("commit", "-q", "--no-verify", "-m", "add a model", cwd=path)
    return path


def try_repo(source: Path, repo: Path, env: dict[str, str], hook: str = STATIC_HOOK) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pre_commit", "try-repo", str(source), hook, "--all-files"]
    try:
        result = subprocess.run(
            command, cwd=repo, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired as error:
        pytest.fail(f"pre-commit try-repo took more than {TIMEOUT}s:\n{error.stdout}{error.stderr}")
    return result


def describe(result: subprocess.CompletedProcess[str], env: dict[str, str]) -> str:
    log = Path(env["PRE_COMMIT_HOME"]) / "pre-commit.log"
    extra = f"\n--- {log} ---\n{log.read_text(errors='replace')}" if log.is_file() else ""
    return f"exit {result.returncode}\n--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr}{extra}"


def test_static_hook_fails_on_a_bad_model(hook_source, pre_commit_env, tmp_path):
    repo = user_repo(tmp_path / "user-repo", BAD_MODEL)
    result = try_repo(hook_source, repo, pre_commit_env)
    output = result.stdout + result.stderr
    assert result.returncode == 1, describe(result, pre_commit_env)
    assert "reslint (static)" in output, describe(result, pre_commit_env)
    assert "Failed" in output, describe(result, pre_commit_env)
    assert "RL103" in output, describe(result, pre_commit_env)
    assert re.search(r"^model\.py:\d+:\d+: RL103 \[warning\]", output, re.MULTILINE), describe(result, pre_commit_env)
    # ruff's default: findings and one total line; no model summary, no progress line in a hook's log
    assert "Models:" not in output and "\r" not in output and "[0/" not in output, describe(result, pre_commit_env)


def test_static_hook_passes_a_good_model(hook_source, pre_commit_env, tmp_path):
    repo = user_repo(tmp_path / "user-repo", GOOD_MODEL)
    result = try_repo(hook_source, repo, pre_commit_env)
    output = result.stdout + result.stderr
    assert result.returncode == 0, describe(result, pre_commit_env)
    assert "reslint (static)" in output and "Passed" in output, describe(result, pre_commit_env)
    assert not re.search(r"RL\d{3}", output), describe(result, pre_commit_env)


def torch_available() -> bool:
    probe = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, check=False)
    return probe.returncode == 0


def test_full_hook_runs_reslint_from_the_users_environment(hook_source, pre_commit_env, tmp_path):
    # `language: system`: no environment is built; `reslint` is whatever the user's PATH has, here
    # the one installed next to this Python. With torch there it checks the model; without torch
    # it stops with the one-line hint to use --static (exit 2, which fails the hook).
    env = dict(pre_commit_env)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    repo = user_repo(tmp_path / "user-repo", BAD_MODEL)
    result = try_repo(hook_source, repo, env, hook=FULL_HOOK)
    output = result.stdout + result.stderr
    assert result.returncode == 1, describe(result, env)
    assert re.search(r"^reslint\.+Failed$", output, re.MULTILINE), describe(result, env)
    if torch_available():
        assert "- exit code: 1" in output, describe(result, env)
        assert re.search(r"^model\.py:\d+:\d+: RL103 \[warning\]", output, re.MULTILINE), describe(result, env)
    else:
        assert "- exit code: 2" in output, describe(result, env)
        assert re.search(r"^reslint: error: .*--static", output, re.MULTILINE), describe(result, env)


def test_fix_hook_applies_the_safe_fixes_and_fails_on_what_remains(hook_source, pre_commit_env, tmp_path):
    repo = user_repo(tmp_path / "user-repo", FIXABLE_MODEL)
    result = try_repo(hook_source, repo, pre_commit_env, hook=FIX_HOOK)
    output = result.stdout + result.stderr
    assert result.returncode == 1, describe(result, pre_commit_env)
    assert "reslint (static, fix)" in output and "files were modified by this hook" in output, describe(result, pre_commit_env)
    assert "3 fixed, 2 remaining." in output, describe(result, pre_commit_env)
    fixed = (repo / "model.py").read_text(encoding="utf-8")
    assert "var = x.var(-1, keepdim=True, unbiased=False)" in fixed and "torch.sqrt(var + self.eps)" in fixed
    assert "ln_f" not in fixed  # unsafe fixes need args: [--unsafe-fixes]
