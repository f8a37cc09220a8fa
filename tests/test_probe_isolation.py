"""`reslint probe` runs the model in a killable child: prints, hangs, crashes and processes it starts stay there.

Real subprocess runs of the console script on a model file that prints, spawns `sleep`, hangs or
kills itself; the report on stdout must stay what reslint wrote, and nothing the model started
may be left running when reslint has exited.
"""

from __future__ import annotations

import json
import os
import textwrap
import time
from pathlib import Path

import pytest
from cli_support import run_reslint, write

pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or not Path("/proc/self/stat").exists(),
                                reason="isolation forks; liveness is read from /proc")

HOSTILE = textwrap.dedent('''\
    import os
    import signal
    import subprocess
    import sys
    import time

    import torch.nn as nn


    class Chatty(nn.Module):
        def __init__(self):
            super().__init__()
            print("<<printed while building>>")
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            print("<<printed in forward>>", tuple(x.shape), "{")
            print("<<printed to stderr>>", file=sys.stderr)
            return self.fc(x)


    class Spawner(Chatty):
        def forward(self, x):
            child = subprocess.Popen(["sleep", "300"])
            with open(os.environ["PID_FILE"], "w") as handle:
                handle.write(str(child.pid))
            return self.fc(x)


    class Hang(Spawner):
        def forward(self, x):
            super().forward(x)
            time.sleep(300)


    class Wide(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(512, 512)
            self.norm = nn.LayerNorm(512)

        def forward(self, x):
            return self.norm(self.fc(x))


    class Crash(Chatty):
        def forward(self, x):
            os.kill(os.getpid(), signal.SIGSEGV)
''')


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")  # a zombie waiting for an init that does not reap is dead too


def gone(pid: int) -> bool:
    """Whether the process is dead, allowing the kernel a moment to finish a SIGKILL."""
    for _ in range(50):
        if not alive(pid):
            return True
        time.sleep(0.1)
    return False


def one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.fixture
def project(tmp_path):
    return write(tmp_path, {"hostile.py": HOSTILE})


@pytest.mark.parametrize("output_format", ["json", "sarif", "text"])
def test_prints_of_the_model_never_reach_the_report(project, output_format):
    result = run_reslint("probe", "hostile.py", "--model", "Chatty()", "--inputs", "float[2,4]",
                         "--output-format", output_format, cwd=project)
    assert result.returncode == 0, result.stderr
    assert "<<printed" not in result.stdout and "<<printed" not in result.stderr
    if output_format == "json":
        assert json.loads(result.stdout)["model"] == "Chatty"
    elif output_format == "sarif":
        assert json.loads(result.stdout)["runs"][0]["results"] == []
    else:
        assert result.stdout.startswith("reslint probe: Chatty() (hostile.py) on cpu")


def test_a_process_the_model_starts_does_not_survive_the_probe(project):
    pid_file = project / "pid"
    result = run_reslint("probe", "hostile.py", "--model", "Spawner()", "--inputs", "float[2,4]",
                         cwd=project, env={"PID_FILE": str(pid_file)})
    assert result.returncode == 0, result.stderr
    assert gone(int(pid_file.read_text()))


def test_a_hang_is_killed_by_the_timeout_with_one_line_and_exit_2(project):
    pid_file = project / "pid"
    result = run_reslint("probe", "hostile.py", "--model", "Hang()", "--inputs", "float[2,4]", "--timeout", "3",
                         "--output-format", "json", cwd=project, env={"PID_FILE": str(pid_file)})
    assert result.returncode == 2 and result.stdout == ""
    assert one_error_line(result.stderr) == (
        "reslint: error: the probe timed out after 3 s while running the forward and backward pass of Hang(); "
        "pass a larger --timeout (default 600) if the model needs longer")
    assert gone(int(pid_file.read_text()))


def test_a_crash_of_the_model_is_one_line_naming_the_stage(project):
    result = run_reslint("probe", "hostile.py", "--model", "Crash()", "--inputs", "float[2,4]", cwd=project)
    assert result.returncode == 2 and result.stdout == ""
    assert one_error_line(result.stderr) == (
        "reslint: error: the probe's process killed by signal 11 (SIGSEGV) while running the forward and backward "
        "pass of Crash()")


def test_verbose_shows_the_traceback_from_the_child(project):
    result = run_reslint("probe", "hostile.py", "--model", "Chatty(width=3)", "--verbose", cwd=project)
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert "TypeError: Chatty.__init__() got an unexpected keyword argument 'width'" in lines
    assert lines[-1] == ("reslint: error: cannot build Chatty(width=3): TypeError: Chatty.__init__() got an "
                         "unexpected keyword argument 'width'")


def test_the_timeout_must_be_positive(project):
    result = run_reslint("probe", "hostile.py", "--timeout", "0", cwd=project)
    assert result.returncode == 2
    assert "--timeout" in one_error_line(result.stderr)



def test_what_the_child_sends_back_is_plain_json_data(monkeypatch):
    # The child's message to the parent must not need pickle (a data-only format, issue 14 item 9).
    from cli_support import REPO_ROOT

    from reslint.config import Overrides, load_settings
    from reslint.probing.command import ProbeOptions, probe_in_child
    from reslint.probing.distributed import World
    from reslint.probing.report import ProbeReport

    monkeypatch.chdir(REPO_ROOT)
    options = ProbeOptions(file="fixtures/probe/non_finite.py", model="LeftPaddedAttention()",
                           inputs="padded_tokens()", compare="LengthFeature()", device="cpu")
    outcome = probe_in_child(options, load_settings(str(REPO_ROOT), None, Overrides()), World())
    sent = json.loads(json.dumps(outcome, allow_nan=False))  # NaN gradients included
    report = ProbeReport.from_dict(sent["report"])
    assert report.to_dict() == outcome["report"] and report.codes == ["RL603"]
    assert ProbeReport.from_dict(sent["compared"]).to_dict() == outcome["compared"]


def test_an_in_process_run_after_torch_computed_here_does_not_deadlock(tmp_path, monkeypatch, capsys):
    # OpenMP threads started in this process before the fork would deadlock a multi-threaded child.
    import torch

    from reslint import cli

    matrix = torch.randn(512, 512)
    assert (matrix @ matrix).isfinite().all()  # starts this process's OpenMP pool (on a machine with 2+ cores)
    write(tmp_path, {"hostile.py": HOSTILE})
    monkeypatch.chdir(tmp_path)
    status = cli.run(["probe", "hostile.py", "--model", "Wide()", "--inputs", "float[512,512]", "--timeout", "60",
                      "--output-format", "json"])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert json.loads(captured.out)["model"] == "Wide"
