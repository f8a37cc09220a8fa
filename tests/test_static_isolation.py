"""`reslint check --static` never imports torch nor the checked file (DESIGN.md: static engine).

Every run is a fresh `python -m reslint` subprocess with a fake `torch` package first on
PYTHONPATH, so the fake shadows a real torch when one is installed (as in CI). The fake and the
checked model each leave a marker file when imported, so an import anywhere, in the main
process or in a worker process of `--jobs`, is seen.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TIMEOUT = 120

MODEL_SOURCE = '''\
"""A Pre-LN language model whose last block feeds the head directly (RL103)."""
open({model_marker!r}, "w").close()  # proves the file was executed

import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d_model, n_head):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = nn.MultiheadAttention(d_model, n_head, batch_first=True)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, 4 * d_model)
        self.fc2 = nn.Linear(4 * d_model, d_model)

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        x = x + self.fc2(torch.relu(self.fc1(self.ln2(x))))
        return x


class TinyLM(nn.Module):
    def __init__(self, vocab_size=1000, d_model=64, n_head=4, n_layer=4):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList([Block(d_model, n_head) for _ in range(n_layer)])
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, idx):
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(x)
'''

# A torch that cannot be imported, as on a machine without torch; it leaves a marker first.
RAISING_TORCH = '''\
open({torch_marker!r}, "w").close()
raise ImportError("torch must not be imported")
'''

# A torch that imports fine, so that an import would stay in sys.modules; it leaves a marker too.
IMPORTABLE_TORCH = '''\
open({torch_marker!r}, "w").close()
__version__ = "0.0.0+fake"
'''


class Sandbox:
    def __init__(self, root: Path, torch_source: str) -> None:
        self.root = root
        self.model_marker = root / "model-was-imported"
        self.torch_marker = root / "torch-was-imported"
        self.site = root / "fake_site"
        (self.site / "torch").mkdir(parents=True)
        (self.site / "torch" / "__init__.py").write_text(torch_source.format(torch_marker=str(self.torch_marker)))
        self.model = root / "model.py"
        self.model.write_text(MODEL_SOURCE.format(model_marker=str(self.model_marker)))

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self.site), env.get("PYTHONPATH")]))
        env["NO_COLOR"] = "1"
        env.pop("PYTHONSTARTUP", None)
        return env

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, *args],
            cwd=self.root,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )

    def assert_nothing_imported(self, result: subprocess.CompletedProcess[str]) -> None:
        details = f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
        assert not self.torch_marker.exists(), "torch was imported\n" + details
        assert not self.model_marker.exists(), "the checked file was executed\n" + details


@pytest.fixture
def without_torch(tmp_path: Path) -> Sandbox:
    return Sandbox(tmp_path, RAISING_TORCH)


@pytest.fixture
def with_fake_torch(tmp_path: Path) -> Sandbox:
    return Sandbox(tmp_path, IMPORTABLE_TORCH)


def test_fake_torch_shadows_any_real_torch(without_torch: Sandbox) -> None:
    # The guard for everything below: with the fake first on the path, `import torch` fails and
    # leaves the marker, whether or not a real torch is installed.
    result = without_torch.run("-c", "import torch")
    assert result.returncode != 0
    assert "torch must not be imported" in result.stderr
    assert without_torch.torch_marker.exists()


def test_static_check_imports_neither_torch_nor_the_model(without_torch: Sandbox) -> None:
    result = without_torch.run(
        "-m", "reslint", "check", "--static", "model.py", "--output-format", "json", "--no-cache"
    )
    details = f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 1, details
    report = json.loads(result.stdout)
    codes = [(finding["code"], finding["path"], finding["engine"]) for finding in report["findings"]]
    assert codes == [("RL103", "model.py", "static")], details
    assert report["findings"][0]["symbol"] == "TinyLM.blocks", details  # the stack, owner.attribute
    without_torch.assert_nothing_imported(result)


def test_static_check_of_a_directory_with_workers_imports_nothing(without_torch: Sandbox) -> None:
    # Several files, so that the runner may analyse them in worker processes.
    for index in range(3):
        (without_torch.root / f"copy_{index}.py").write_text(without_torch.model.read_text())
    result = without_torch.run(
        "-m", "reslint", "check", "--static", ".", "--jobs", "2", "--output-format", "json", "--no-cache"
    )
    details = f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 1, details
    report = json.loads(result.stdout)
    assert sorted(finding["path"] for finding in report["findings"]) == [
        "copy_0.py", "copy_1.py", "copy_2.py", "model.py"
    ], details
    assert {finding["code"] for finding in report["findings"]} == {"RL103"}, details
    without_torch.assert_nothing_imported(result)


def test_torch_not_in_sys_modules_after_a_static_check(with_fake_torch: Sandbox) -> None:
    # Here `import torch` would succeed, so an import anywhere in the process stays in sys.modules.
    result_file = with_fake_torch.root / "result.json"
    script = textwrap.dedent(
        f"""
        import json, sys
        from reslint.cli import main
        sys.argv = ["reslint", "check", "--static", "model.py", "--no-cache", "--jobs", "1"]
        try:
            main()
        except SystemExit as stop:
            status = stop.code
        else:
            status = None
        loaded = sorted(name for name in sys.modules if name == "torch" or name.startswith("torch.") or name == "model")
        with open({str(result_file)!r}, "w") as out:
            json.dump({{"status": status, "loaded": loaded}}, out)
        """
    )
    result = with_fake_torch.run("-c", script)
    details = f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 0, details
    outcome = json.loads(result_file.read_text())
    assert outcome["status"] == 1, details
    assert outcome["loaded"] == [], details
    assert "RL103" in result.stdout, details
    with_fake_torch.assert_nothing_imported(result)


def test_full_check_without_torch_exits_2_and_points_to_static(without_torch: Sandbox) -> None:
    result = without_torch.run("-m", "reslint", "check", "model.py", "--no-cache")
    details = f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 2, details
    lines = result.stderr.splitlines()
    assert len(lines) == 1, details
    assert lines[0].startswith("reslint: error: "), details
    assert "--static" in lines[0], details
    assert "Traceback" not in result.stderr, details
    assert result.stdout == "", details
    # Failing for want of torch must not run the model either.
    assert not without_torch.model_marker.exists(), details


# ----- whatever the files contain -------------------------------------------------------------

# Each file leaves a marker named after itself when it runs, then does something a checker that
# ran it could not survive or would show: exit, kill itself, import torch, print to stdout.
HOSTILE_FILES = {
    "exits.py": "import sys\nsys.exit(3)\n",
    "os_exit.py": "import os\nos._exit(4)\n",
    "kills_itself.py": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
    "imports_torch.py": "import torch\nimport torch.nn as nn\n\n\nclass Net(nn.Module):\n    pass\n",
    "prints.py": "print('{{\"findings\": \"forged\"}}')\n",
    "main_guard.py": "if __name__ == '__main__':\n    open({marker!r} + '.main', 'w').close()\n",
    "conftest.py": "import pytest\n",
    "setup.py": "from setuptools import setup\nsetup(name='x')\n",
    "__main__.py": "raise SystemExit('ran as a program')\n",
    "pkg/__init__.py": "from .layers import *\n",
    "pkg/layers.py": "raise ImportError('a package that must not be imported')\n",
    "pkg/__main__.py": "import pkg\n",
    # With `python -m`, the working directory comes first on sys.path: these would shadow the
    # real modules. The `reslint` command keeps the checked directory off sys.path.
    "click.py": "raise ImportError('shadowed click')\n",
    "libcst.py": "raise ImportError('shadowed libcst')\n",
    "json.py": "raise ImportError('shadowed json')\n",
}

# Records, from inside every reslint process, what a checker must not do in static mode: run code
# compiled from a file of the sandbox (imports run it through `exec`), import torch, or start a
# process on a file of the sandbox. Imported at start-up from the fake site directory.
AUDIT_HOOK = '''\
import os
import sys

_LOG = os.environ.get("RESLINT_AUDIT_LOG")
_SANDBOX = os.environ.get("RESLINT_AUDIT_SANDBOX", "\\0")


def _record(line):
    with open(_LOG, "a") as log:
        log.write(line + "\\n")


def _hook(event, args):
    if event == "exec":
        filename = getattr(args[0], "co_filename", "") or "<unknown>"
        filename = filename if filename.startswith("<") else os.path.abspath(filename)
        if filename.startswith(_SANDBOX) and "fake_site" not in filename:
            _record("exec " + filename)
    elif event == "import" and (args[0] == "torch" or args[0].startswith("torch.")):
        _record("import " + args[0])
    elif event in ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn") and _SANDBOX in repr(args):
        _record(event + " " + repr(args)[:200])


if _LOG:
    sys.addaudithook(_hook)
'''


class HostileSandbox(Sandbox):
    def __init__(self, root: Path) -> None:
        super().__init__(root, IMPORTABLE_TORCH)
        self.audit_log = root / "audit.log"
        (self.site / "sitecustomize.py").write_text(AUDIT_HOOK)
        self.project = root / "project"
        for name, source in HOSTILE_FILES.items():
            path = self.project / name
            path.parent.mkdir(parents=True, exist_ok=True)
            marker = str(self.root / f"ran-{name.replace('/', '-')}")
            path.write_text(f"open({marker!r}, 'w').close()\n" + source.format(marker=marker))
        (self.project / "model.py").write_text(self.model.read_text())
        self.python_files = sorted(path.relative_to(self.project).as_posix() for path in self.project.rglob("*.py"))

    def env(self) -> dict[str, str]:
        env = super().env()
        env["RESLINT_AUDIT_LOG"] = str(self.audit_log)
        env["RESLINT_AUDIT_SANDBOX"] = str(self.root)
        return env

    def run_in_project(self, command: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(command, cwd=self.project, env=self.env(), capture_output=True, text=True,
                              timeout=TIMEOUT, check=False)

    def evidence(self) -> list[str]:
        markers = sorted(path.name for path in self.root.glob("*-was-imported")) + sorted(
            path.name for path in self.root.glob("ran-*"))
        audit = self.audit_log.read_text().splitlines() if self.audit_log.exists() else []
        return markers + audit


@pytest.fixture
def hostile(tmp_path: Path) -> HostileSandbox:
    return HostileSandbox(tmp_path)


def test_the_audit_hook_sees_an_import_of_a_checked_file_and_of_torch(hostile: HostileSandbox) -> None:
    # The guard for the test below: the same environment does record running user code.
    # The fake torch has no torch.nn, so the import fails there: after both were run and recorded.
    hostile.run_in_project([sys.executable, "-c", "import sys; sys.path.insert(0, '.'); import model"])
    evidence = hostile.evidence()
    assert "model-was-imported" in evidence
    assert "torch-was-imported" in evidence
    assert f"exec {hostile.project / 'model.py'}" in evidence
    assert "import torch" in evidence


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_static_check_runs_nothing_whatever_the_files_contain(hostile: HostileSandbox, jobs: str) -> None:
    reslint = str(Path(sys.executable).with_name("reslint"))
    result = hostile.run_in_project(
        [reslint, "check", "--static", "--no-cache", "--jobs", jobs, "--output-format", "json", "."])
    details = f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert hostile.evidence() == [], details
    assert result.returncode == 1, details
    report = json.loads(result.stdout)  # nothing printed by a checked file got into the report
    assert report["summary"]["files"] == len(hostile.python_files), details
    assert [(f["path"], f["code"]) for f in report["findings"]] == [("model.py", "RL103")], details
    assert result.stderr == "", details
