"""The full check runs user code in killable children: hangs, exits, crashes and prints end that
file's tracing with one finding naming the cause, never the run or its output."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from cli_support import RESLINT, run_reslint, write
from reslint.isolation import ChildFailure, report_stage, run_isolated

pytest.importorskip("torch")

POST_LN_BLOCK = '''

class Block(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.ff = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(x + self.ff(x))
'''

HOSTILE = {
    "segfault.py": "import ctypes\nimport torch.nn as nn\n\nctypes.string_at(0)\n" + POST_LN_BLOCK,
    "hang_import.py": "import time\nimport torch.nn as nn\n\ntime.sleep(10**6)\n" + POST_LN_BLOCK,
    "os_exit.py": "import os\nimport torch.nn as nn\n\nos._exit(3)\n" + POST_LN_BLOCK,
    "sys_exit.py": "import sys\nimport torch.nn as nn\n\nsys.exit(4)\n" + POST_LN_BLOCK,
    "noisy.py": ("import os, sys\nimport torch.nn as nn\n\nprint('{\"not\": json')\nsys.stderr.write('oops\\n')\n"
                 "os.write(1, b'raw bytes on fd 1\\n')\n" + POST_LN_BLOCK),
    "hang_forward.py": '''\
import time
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.ff = nn.Linear(8, 8)

    def forward(self, x):
        while True:
            time.sleep(0.1)
''',
}


def test_hostile_files_each_get_one_finding_and_keep_their_static_ones(tmp_path):
    write(tmp_path, HOSTILE)
    result = run_reslint("check", "--no-cache", "--timeout", "5", "--jobs", "2", "--output-format", "json", ".",
                         cwd=tmp_path)
    report = json.loads(result.stdout)  # the user code's prints did not reach stdout
    found = {(f["path"], f["code"]): f["message"] for f in report["findings"]}
    assert found[("segfault.py", "RL902")].startswith("importing the file: killed by signal 11 (SIGSEGV)")
    assert found[("hang_import.py", "RL902")].startswith("importing the file timed out after 5 s")
    assert found[("os_exit.py", "RL902")].startswith("importing the file: exited with status 3")
    assert "SystemExit: 4" in found[("sys_exit.py", "RL902")]
    assert found[("hang_forward.py", "RL903")].startswith("tracing Net timed out after 5 s")
    # static findings survive whatever happened at import
    for name in ("segfault.py", "hang_import.py", "os_exit.py", "sys_exit.py", "noisy.py"):
        assert (name, "RL101") in found
    assert ("noisy.py", "RL902") not in found
    # crashes, hangs and exits are reslint's limits, never the gate's: every RL9xx is info
    assert {f["severity"] for f in report["findings"] if f["code"] in ("RL902", "RL903")} == {"info"}
    assert report["summary"]["files_not_imported"] == 4
    assert result.returncode == 0 and result.stderr == ""
    # the exit status comes from the findings alone
    errors_only = run_reslint("check", "--no-cache", "--timeout", "5", "--fail-on", "error", "os_exit.py",
                              "noisy.py", cwd=tmp_path)
    assert errors_only.returncode == 0, errors_only.stdout


def test_ctrl_c_stops_the_workers_and_their_children_and_exits_130(tmp_path):
    hang = "import os, time\nimport torch.nn as nn\n\nopen(os.environ['MARK'] + __name__, 'w').write(str(os.getpid()))\n" \
           "time.sleep(10**6)\n" + POST_LN_BLOCK
    write(tmp_path, {"a.py": hang, "b.py": hang})
    marks = tmp_path / "marks"
    marks.mkdir()
    # As from a terminal: Ctrl-C at its default even where this test runs with SIGINT ignored (a job started in
    # the background by a script, as `.ci/run &`), which reslint would inherit and rightly keep.
    in_foreground = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                     "os.execv(sys.argv[1], sys.argv[1:])")
    process = subprocess.Popen([sys.executable, "-c", in_foreground, str(RESLINT), "check", "--no-cache", "--jobs", "2",
                                "a.py", "b.py"], cwd=tmp_path, env={**os.environ, "MARK": f"{marks}/"},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 60
    while len(list(marks.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(list(marks.iterdir())) == 2, "the checked files were never imported"
    os.killpg(process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == 130
    assert "Traceback" not in stderr
    # a loaded machine may take a moment to deliver the signal and reap the orphans: wait for them, bounded
    pids = {int(mark.read_text()) for mark in marks.iterdir()}
    deadline = time.monotonic() + 30
    while pids and time.monotonic() < deadline:
        pids = {pid for pid in pids if still_running(pid)}
        time.sleep(0.1)
    assert not pids, f"workers' children still running: {sorted(pids)}"


class Interrupted(Exception):
    pass


@pytest.fixture
def signal_taken_by_another_thread():
    """Sends SIGUSR1, whose handler raises Interrupted, to a helper thread after `delay` seconds: the kernel may
    hand a process-directed Ctrl-C or SIGTERM to any thread that does not block it, and then the main thread's
    wait is not interrupted; Python runs the handler in the main thread when that thread next runs bytecode."""
    import threading

    def interrupt(signum, frame):
        raise Interrupted()

    previous = signal.signal(signal.SIGUSR1, interrupt)

    def send(delay: float) -> None:
        def in_helper():
            time.sleep(delay)
            signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)

        threading.Thread(target=in_helper, daemon=True).start()

    yield send
    signal.signal(signal.SIGUSR1, previous)


def test_a_wait_on_a_child_runs_a_signal_another_thread_took(signal_taken_by_another_thread):
    signal_taken_by_another_thread(0.2)
    started = time.monotonic()
    with pytest.raises(Interrupted):
        run_isolated(time.sleep, 60, timeout=120)
    assert time.monotonic() - started < 20  # not the child's 60 s


def test_the_pool_wait_runs_a_signal_another_thread_took(signal_taken_by_another_thread):
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from reslint.runner import completed

    finish = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(finish.wait, 60)
        signal_taken_by_another_thread(0.2)
        started = time.monotonic()
        with pytest.raises(Interrupted):
            list(completed([future]))
        assert time.monotonic() - started < 20  # not the task's 60 s
        finish.set()
        assert {done.result() for done in completed([future, pool.submit(int, "7")])} == {True, 7}


def test_the_deep_stack_thread_leaves_ctrl_c_and_sigterm_to_the_main_thread():
    from reslint.analysis import on_deep_stack

    blocked = on_deep_stack(signal.pthread_sigmask, signal.SIG_BLOCK, set())
    assert {signal.SIGINT, signal.SIGTERM} <= blocked
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, set())


def test_a_workers_task_goes_on_through_ctrl_c():
    """Ctrl-C reaches the whole process group; the parent handles it (and terminates the workers). A worker that
    raised KeyboardInterrupt would send it back through the result pipe while being terminated."""
    from concurrent.futures import ProcessPoolExecutor

    from reslint.runner import stop_on_sigterm

    with ProcessPoolExecutor(1, initializer=stop_on_sigterm) as pool:
        worker = pool.submit(os.getpid).result()
        slow = pool.submit(time.sleep, 1.0)
        time.sleep(0.3)
        os.kill(worker, signal.SIGINT)
        try:
            outcome = slow.result(timeout=30)
        except BaseException as error:  # noqa: BLE001 - a KeyboardInterrupt sent back fails this test, not the session
            outcome = error
        assert outcome is None


def test_after_ctrl_c_the_console_scripts_exit_waits_for_no_thread():
    """A non-daemon thread still running (the process pool's manager, blocked on a worker stopped halfway
    through a result) holds up Python's exit; after Ctrl-C the script ends without it. Other exits still wait."""
    script = ("import sys, threading, time; from reslint.cli import exit_without_teardown; "
              "threading.Thread(target=time.sleep, args=(120,)).start(); "
              "exit_without_teardown(int(sys.argv[1])); print('returned', flush=True); import os; os._exit(0)")
    interrupted = subprocess.run([sys.executable, "-c", script, "130"], capture_output=True, text=True, timeout=60)
    assert interrupted.returncode == 130 and interrupted.stdout == ""
    finished = subprocess.run([sys.executable, "-c", script, "1"], capture_output=True, text=True, timeout=60)
    assert finished.returncode == 0 and finished.stdout == "returned\n"


def still_running(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def stages_then(value):
    report_stage("tracing Net", 12, "Net")
    return value


def crash_after_a_stage():
    report_stage("tracing Net", 12, "Net")
    os.kill(os.getpid(), signal.SIGSEGV)


def test_run_isolated_returns_the_value_or_what_went_wrong_and_where():
    assert run_isolated(stages_then, {"a": [1, 2]}, timeout=30) == {"a": [1, 2]}
    failure = run_isolated(crash_after_a_stage, timeout=30)
    assert failure == ChildFailure("killed by signal 11 (SIGSEGV)", "tracing Net", 12, "Net")
    failure = run_isolated(time.sleep, 30, timeout=0.5)
    assert failure == ChildFailure("timed out after 0.5 s", "importing the file", 1, "")
    failure = run_isolated(int, "not a number", timeout=30)
    assert failure.cause == "raised ValueError: invalid literal for int() with base 10: 'not a number'"


def test_the_hostile_fixtures_in_full_mode():
    """fixtures/hostile/ pins the static findings in its golden files; here the full check imports and
    traces the same files: each gets its finding, the static ones stay, and the exit status comes
    from the findings alone."""
    from golden import ROOT

    result = run_reslint("check", "--no-cache", "--timeout", "10", "--jobs", "2", "--output-format", "json",
                         "fixtures/hostile", cwd=ROOT)
    # the RL9xx are reslint's limits (info): the exit status 1 comes from RL201 and RL901 alone
    assert result.returncode == 1 and result.stderr == ""
    assert {f["code"] for f in json.loads(result.stdout)["findings"] if f["severity"] != "info"} == {"RL201", "RL901"}
    found = sorted((f["path"].removeprefix("fixtures/hostile/"), f["line"], f["code"])
                   for f in json.loads(result.stdout)["findings"])
    assert found == [
        ("deep_nesting.py", 14, "RL101"),
        ("hang_in_forward.py", 5, "RL903"),
        ("hang_in_forward.py", 12, "RL101"),
        ("hang_on_import.py", 1, "RL902"),
        ("hang_on_import.py", 9, "RL201"),
        ("not_utf8.py", 1, "RL901"),
        ("raise_in_forward.py", 12, "RL101"),
        ("raise_in_forward.py", 14, "RL903"),  # on the inputs reslint inferred: info
        ("segfault_on_import.py", 1, "RL902"),
        ("segfault_on_import.py", 14, "RL101"),
    ]
    quiet = run_reslint("check", "--no-cache", "--timeout", "10", "--ignore", "RL9", "--fail-on", "error",
                        "fixtures/hostile", cwd=ROOT)
    assert quiet.returncode == 0, quiet.stdout


def _cpu_layer_norm() -> float:
    import torch

    return float(torch.nn.functional.layer_norm(torch.ones(64, 4096), (4096,)).sum())


def test_a_worker_runs_cpu_ops_after_the_parent_used_its_openmp_threads():
    # GNU OpenMP is not fork-safe: a parent that ran a parallel CPU op hands a forked child a thread
    # team that never answers, and the child's first parallel op hangs (found as a hung suite).
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        _cpu_layer_norm()
        assert run_isolated(_cpu_layer_norm, timeout=60) == 0.0
    finally:
        torch.set_num_threads(threads)
