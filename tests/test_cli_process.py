"""What a check's process spends beside the check itself. Its exit skips Python's teardown (torch's, and the
static engine's trees: cli.exit_without_teardown) and still does what an exit must: the report flushed to its
pipe, the exit status, the exit handlers run, and a thread Python's exit waits for waited for. torch's objects,
imported for the check, are frozen before the cyclic collector walks them (api.require_torch)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

# `reslint check` through cli.script (the console script), with an exit handler, an object whose
# finalizer only Python's teardown of __main__ runs, and optionally a non-daemon thread still running.
CHECK = textwrap.dedent('''
    import atexit, sys, threading, time
    from pathlib import Path

    log = Path(sys.argv[1])

    def note(what):
        with log.open("a") as handle:
            handle.write(what + "\\n")

    class TornDown:
        def __del__(self):
            note("torn down")

    kept = TornDown()
    atexit.register(note, "exit handler")
    import reslint.cli
    if sys.argv[2] == "thread":  # still running when the check is done
        checked = threading.Event()
        run = reslint.cli.run
        reslint.cli.run = lambda argv: (run(argv), checked.set())[0]
        threading.Thread(target=lambda: (checked.wait(), time.sleep(2), note("thread finished"))).start()
    from reslint.cli import script
    sys.argv = ["reslint", "check", "--no-cache", "--jobs", "1", "--output-format", "json", *sys.argv[3:]]
    script()
''')

FINDINGS = [("RL501", 15), ("RL103", 44)]  # of examples/tiny_gpt.py


def checked(tmp_path: Path, thread: str, *arguments: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    log = tmp_path / "exit.log"
    log.write_text("", encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", CHECK, str(log), thread, *arguments], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600,
                          env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"})
    return done, log.read_text(encoding="utf-8").splitlines()


def test_a_full_check_exits_without_teardown_with_its_report_status_and_exit_handlers(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")
    shutil.copy(REPO_ROOT / "examples" / "tiny_gpt.py", tmp_path / "model.py")

    done, log = checked(tmp_path, "", "model.py")

    assert done.returncode == 1, done.stderr  # a finding: the status run() returned
    report = json.loads(done.stdout)  # the whole report reached the pipe
    assert [(finding["code"], finding["line"]) for finding in report["findings"]] == FINDINGS
    assert log == ["exit handler"]  # __main__ was not torn down (its finalizer did not run)


def test_a_static_check_exits_without_teardown_too_and_a_running_thread_as_always(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")
    shutil.copy(REPO_ROOT / "examples" / "tiny_gpt.py", tmp_path / "model.py")

    static, static_log = checked(tmp_path, "", "--static", "model.py")
    threaded, threaded_log = checked(tmp_path, "thread", "--exit-zero", "model.py")

    assert static.returncode == 1, static.stderr
    assert [(finding["code"], finding["line"]) for finding in json.loads(static.stdout)["findings"]] == FINDINGS
    assert static_log == ["exit handler"]  # no torch imported, and no teardown either
    assert threaded.returncode == 0 and json.loads(threaded.stdout)["findings"], threaded.stderr
    assert sorted(threaded_log) == ["exit handler", "thread finished", "torn down"]


FROZEN = textwrap.dedent('''
    import gc, sys
    if sys.argv[1] == "before":
        import torch
    from reslint.api import require_torch
    require_torch()
    print(gc.get_freeze_count())
''')


def test_torch_imported_for_a_check_is_frozen_unless_the_process_had_imported_it():
    pytest.importorskip("torch")
    counts = {}
    for when in ("by the check", "before"):
        done = subprocess.run([sys.executable, "-c", FROZEN, when], capture_output=True, text=True, timeout=600,
                              env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"})
        assert done.returncode == 0, done.stderr
        counts[when] = int(done.stdout)
    assert counts["by the check"] > 100_000  # torch's objects, never walked by the collector
    assert counts["before"] == 0  # a process's own objects are left to its collector


CALLED = textwrap.dedent('''
    import sys
    from reslint.cli import main
    try:
        main(["check", "--no-cache", "--jobs", "1", "--output-format", "json", "model.py"])
    except SystemExit as stop:
        print("caught", stop.code, file=sys.stderr)
''')


def test_main_given_its_arguments_raises_system_exit_for_its_caller(tmp_path):
    # Skipping the teardown is the console script's exit; a program or test that calls main itself keeps it.
    pytest.importorskip("torch")
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")
    shutil.copy(REPO_ROOT / "examples" / "tiny_gpt.py", tmp_path / "model.py")
    done = subprocess.run([sys.executable, "-c", CALLED], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.returncode == 0, done.stderr
    assert [(finding["code"], finding["line"]) for finding in json.loads(done.stdout)["findings"]] == FINDINGS
    assert done.stderr.strip().splitlines()[-1] == "caught 1"
