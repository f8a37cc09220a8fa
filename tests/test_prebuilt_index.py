"""reslint.prebuilt_index: the project's import words scanned once by a helper process for a pool's workers,
adopted by them only for the run it was made in, and nothing left behind (helper, descriptors) after the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_support import write

from reslint.prebuilt_index import start_prebuilt_scan
from reslint.project_index import ProjectIndex

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the helper is forked")

BLOCK = """import torch
from torch import nn


class {name}(nn.Module):
    def __init__(self, width, norm_first=True):
        super().__init__()
        self.norm_first = norm_first
        self.norm = nn.LayerNorm(width)
        self.linear = nn.Linear(width, width)

    def forward(self, x):
        if self.norm_first:
            return x + self.linear(self.norm(x))
        return self.norm(x + self.linear(x))
"""
PROJECT = {
    "pyproject.toml": "",
    "layers.py": "import torch\n\n\nclass Block(torch.nn.Module):\n    pass\n",
    "model.py": "from layers import Block\n\n\nclass Net:\n    def __init__(self):\n        self.block = Block()\n",
    "unrelated.py": "import os\n",
}


@pytest.fixture
def project(tmp_path):
    write(tmp_path, PROJECT)
    return tmp_path


@pytest.fixture
def reads(monkeypatch):
    """The files the indexes of this process read (after the helper was forked: not the helper's reads)."""
    found = []
    real_source = ProjectIndex.source

    def recorded() -> None:
        monkeypatch.setattr(ProjectIndex, "source", lambda self, path: found.append(path.name) or real_source(self, path))
        return found
    return recorded


def scanned_alone(root: Path) -> tuple:
    ProjectIndex.new_run()
    index = ProjectIndex(root)
    return index.shareable_scan()


def test_an_index_adopts_the_helpers_scan_instead_of_reading_the_project(project, reads):
    expected = scanned_alone(project)
    ProjectIndex.new_run()
    scan = start_prebuilt_scan([str(project / "layers.py"), str(project / "model.py")])
    try:
        read = reads()
        index = ProjectIndex(project)
        sites = index.construction_sites(project / "layers.py", "Block")
        assert [(site.path.name, site.line, site.scope) for site in sites] == [("model.py", 6, "Net")]
        assert index.shareable_scan() == expected
        assert "unrelated.py" not in read  # only the files whose trees the search needed
        assert sorted(set(read)) == ["layers.py", "model.py"]
    finally:
        scan.close()
    assert ProjectIndex.prebuilt is None


def test_a_scan_of_another_run_or_another_project_is_not_adopted(project, tmp_path_factory, reads):
    other = write(tmp_path_factory.mktemp("other"), PROJECT)
    ProjectIndex.new_run()
    scan = start_prebuilt_scan([str(project / "model.py")])
    try:
        read = reads()
        ProjectIndex(other).python_files()
        ProjectIndex(other).files_importing(ProjectIndex(other).python_files())
        assert "unrelated.py" in read  # another project: read here
        read.clear()
        ProjectIndex.new_run()  # a check after the one the helper scanned for
        index = ProjectIndex(project)
        index.files_importing(index.python_files())
        assert "unrelated.py" in read
    finally:
        scan.close()


def test_without_the_helpers_result_the_index_scans_the_project_itself(project, monkeypatch, reads):
    expected = scanned_alone(project)

    def broken(self):
        raise RuntimeError("the helper's scan fails")

    with monkeypatch.context() as patched:  # the helper, forked now, keeps the broken scan
        patched.setattr(ProjectIndex, "shareable_scan", broken)
        ProjectIndex.new_run()
        scan = start_prebuilt_scan([str(project / "model.py")])
    try:
        read = reads()
        index = ProjectIndex(project)
        assert index.shareable_scan() == expected
        assert "unrelated.py" in read
    finally:
        scan.close()


def open_descriptors() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_the_run_ends_the_helper_and_closes_what_it_used(project, monkeypatch):
    before = open_descriptors()
    monkeypatch.setattr(ProjectIndex, "shareable_scan", lambda self: time.sleep(60))  # a helper still scanning
    ProjectIndex.new_run()
    scan = start_prebuilt_scan([str(project / "model.py")])
    helper = scan.helper
    started = time.monotonic()
    scan.close()
    assert time.monotonic() - started < 10
    with pytest.raises(ChildProcessError):  # reaped: no zombie left
        os.waitpid(helper, os.WNOHANG)
    assert open_descriptors() == before


KILLED_PARENT = """
import os, signal, sys, time
from reslint.project_index import ProjectIndex
from reslint.prebuilt_index import start_prebuilt_scan
ProjectIndex.shareable_scan = lambda self: time.sleep(60)
scan = start_prebuilt_scan([sys.argv[1]])
print(scan.helper, flush=True)
time.sleep(1)  # the helper is scanning by now
os.kill(os.getpid(), signal.SIGKILL)
"""


def running(pid: int) -> bool:
    """Whether the process runs (an ended one may wait as a zombie for whoever adopted it to reap it)."""
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as status:
            return not any(line.startswith("State:") and "Z" in line.split()[1] for line in status)
    except OSError:
        return False



@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the helper ends with its parent on Linux")
def test_a_helper_whose_parent_is_killed_ends_too(project):
    result = subprocess.run([sys.executable, "-c", KILLED_PARENT, str(project / "model.py")], capture_output=True,
                            text=True, timeout=60)
    helper = int(result.stdout)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and running(helper):
        time.sleep(0.05)
    assert not running(helper)  # not left scanning for nobody


RECORD_READS = """
import os, sys
import reslint.project_index as project_index
real_source = project_index.ProjectIndex.source
def source(self, path):
    with open(os.environ["READS_LOG"], "a") as log:
        log.write(f"{os.getpid()} {path.name}\\n")
    return real_source(self, path)
project_index.ProjectIndex.source = source
sys.argv[0] = "reslint"
import reslint.cli
reslint.cli.script()
"""


def cli_reads(directory: Path, log: Path, *arguments: str) -> tuple[dict, dict[str, set[str]]]:
    result = subprocess.run([sys.executable, "-c", RECORD_READS, "check", "--static", "--no-cache", "--exit-zero",
                             "--output-format", "json", *arguments], cwd=directory, capture_output=True, text=True,
                            env={**os.environ, "READS_LOG": str(log)}, timeout=600)
    assert result.returncode == 0, result.stderr
    by_file: dict[str, set[str]] = {}
    for line in log.read_text().splitlines():
        pid, name = line.split(" ", 1)
        by_file.setdefault(name, set()).add(pid)
    return json.loads(result.stdout), by_file


def test_a_parallel_check_reads_the_project_once_for_its_workers_and_finds_the_same(tmp_path):
    """Two workers, each with a file whose block class asks how the project's other files build it: the project's
    other files are read by one process (the helper), not by each worker; the findings are those of a check in
    one process."""
    write(tmp_path, {
        "pyproject.toml": "",
        "first.py": BLOCK.format(name="FirstBlock"),
        "second.py": BLOCK.format(name="SecondBlock"),
        **{f"other_{number}.py": "import os\n" for number in range(4)},
    })
    parallel, reads = cli_reads(tmp_path, tmp_path / "parallel.log", "--jobs", "2", "first.py", "second.py")
    assert {name: len(pids) for name, pids in reads.items() if name.startswith("other_")} == {
        f"other_{number}.py": 1 for number in range(4)}
    serial, _ = cli_reads(tmp_path, tmp_path / "serial.log", "--jobs", "1", "first.py", "second.py")
    assert parallel["findings"] == serial["findings"]
