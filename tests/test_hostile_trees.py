"""Hostile trees (issue 14): a checked tree controls its files, its pyproject.toml and any committed
`.reslint_cache/`. Whatever it holds, `reslint check` stays inside the project, bounded in time and
memory, keeps every other file's findings, cannot inject into its output, and leaves no process.

Every run is the installed console script in a subprocess under an address-space cap and a timeout,
with its own user cache directory; each test checks that nothing outside the tree changed and that
no process of the run (found by a token in its environment) is left.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import resource
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from cli_support import BATCHNORM, BATCHNORM_LINE, POST_LN, POST_LN_LINE, RESLINT, write

STATIC_MEMORY = 1536 << 20
FULL_MEMORY = 8 << 30  # torch maps a few GiB of address space at import
TOKEN_VARIABLE = "RESLINT_HOSTILE_RUN"


@pytest.fixture
def sandbox(tmp_path):
    """(tree, user cache home): the checked tree lies in `tmp_path/parent`, whose other contents must not change."""
    parent = tmp_path / "parent"
    tree = parent / "repo"
    tree.mkdir(parents=True)
    (parent / "sentinel.txt").write_text("untouched\n")
    (tmp_path / "xdg").mkdir()
    before = snapshot(tmp_path, skip=(tree, tmp_path / "xdg"))
    yield tree, tmp_path / "xdg"
    assert snapshot(tmp_path, skip=(tree, tmp_path / "xdg")) == before, "reslint wrote outside the checked tree"


def snapshot(directory: Path, skip: tuple[Path, ...]) -> dict[str, tuple]:
    found = {}
    for current, dirnames, filenames in os.walk(directory):
        dirnames[:] = [name for name in dirnames if Path(current, name) not in skip]
        for name in dirnames + filenames:
            status = os.lstat(Path(current, name))
            found[os.path.relpath(Path(current, name), directory)] = (status.st_mode, status.st_size, status.st_mtime_ns)
    return found


def run_capped(*args: str, cwd: Path, cache_home: Path, memory: int = STATIC_MEMORY, timeout: float = 90,
               env: dict | None = None, stdin=subprocess.DEVNULL, text: bool = True) -> subprocess.CompletedProcess:
    """The console script under an address-space cap; asserts that no process of the run outlives it."""
    token = uuid.uuid4().hex
    environment = {**os.environ, "NO_COLOR": "1", "XDG_CACHE_HOME": str(cache_home), TOKEN_VARIABLE: token,
                   **(env or {})}

    def cap_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    result = subprocess.run([str(RESLINT), *args], cwd=cwd, env=environment, capture_output=True, text=text,
                            timeout=timeout, preexec_fn=cap_memory, stdin=stdin)
    assert processes_with(token) == [], "a process started by the checked code outlived reslint"
    return result


def processes_with(token: str) -> list[int]:
    marker = f"{TOKEN_VARIABLE}={token}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environment = Path("/proc", entry, "environ").read_bytes()
        except OSError:
            continue
        if marker in environment.split(b"\0"):
            found.append(int(entry))
    return found


def line_of(source: str, text: str) -> int:
    return next(number for number, line in enumerate(source.splitlines(), 1) if text in line)


def findings(result: subprocess.CompletedProcess) -> list[tuple[str, str, int]]:
    return [(f["path"], f["code"], f["line"]) for f in json.loads(result.stdout)["findings"]]


# ----- 1. writes outside the tree ---------------------------------------------------------------


@pytest.mark.parametrize("link", [".reslint_cache", ".reslint_cache/files"])
def test_a_committed_cache_symlink_cannot_make_reslint_write_outside_the_tree(sandbox, link):
    tree, cache_home = sandbox
    write(tree, {"tagger.py": BATCHNORM})
    (tree / link).parent.mkdir(exist_ok=True)
    (tree / link).symlink_to(tree.parent if link == ".reslint_cache" else tree.parent.parent)
    for _ in range(2):  # the second run would read what the first wrote
        result = run_capped("check", "--static", "--output-format", "json", ".", cwd=tree, cache_home=cache_home)
        assert (result.returncode, findings(result)) == (1, [("tagger.py", "RL201", BATCHNORM_LINE)]), result.stderr
    assert run_capped("clean", cwd=tree, cache_home=cache_home).returncode == 0
    if link == ".reslint_cache":  # not a cache of ours: left alone
        assert (tree / link).is_symlink()
    else:  # ours, with the link in it removed, not followed
        assert not (tree / ".reslint_cache").exists()


# ----- 2. unbounded reads of special files ------------------------------------------------------


def test_cache_entries_linked_to_devices_or_fifos_are_misses_not_reads(sandbox):
    tree, cache_home = sandbox
    write(tree, {"tagger.py": BATCHNORM, "block.py": POST_LN})
    first = run_capped("check", "--static", "--output-format", "json", ".", cwd=tree, cache_home=cache_home)
    entries = sorted((tree / ".reslint_cache" / "files").rglob("*.json"))
    assert len(entries) == 2
    entries[0].unlink()
    entries[0].symlink_to("/dev/zero")
    entries[1].unlink()
    os.mkfifo(entries[1])
    second = run_capped("check", "--static", "--output-format", "json", ".", cwd=tree, cache_home=cache_home,
                        memory=STATIC_MEMORY, timeout=60)
    assert second.returncode == first.returncode == 1, second.stderr
    assert findings(second) == findings(first) == [("block.py", "RL101", POST_LN_LINE),
                                                   ("tagger.py", "RL201", BATCHNORM_LINE)]


POST_LN_ENCODER = POST_LN.replace("def __init__(self, d):", "def __init__(self, d=16):")
TRAIN_WITH = '''\
import deepspeed

from model import Block


def train(args):
    model = Block()
    return deepspeed.initialize(args=args, model=model, model_parameters=model.parameters(), config={config!r})
'''


def test_deepspeed_configs_and_train_globs_pointing_at_devices_are_not_read(sandbox):
    tree, cache_home = sandbox
    write(tree, {
        "pyproject.toml": '[tool.reslint]\ntrain = ["train_*.py", "scripts/*.py"]\n',
        "model.py": POST_LN_ENCODER,
        "train_zero.py": TRAIN_WITH.format(config="/dev/zero"),
        "train_stdin.py": TRAIN_WITH.format(config="/dev/stdin"),
        "train_link.py": TRAIN_WITH.format(config="ds_config.json"),
        # a config path not known statically: every *.json next to the script is a candidate
        "train_args.py": TRAIN_WITH.replace("config={config!r}", "config=args.deepspeed_config"),
    })
    (tree / "ds_config.json").symlink_to("/dev/zero")
    (tree / "scripts").mkdir()
    (tree / "scripts" / "evil.py").symlink_to("/dev/zero")
    os.mkfifo(tree / "scripts" / "fifo.py")
    (tree / "scripts" / "outside.py").symlink_to(tree.parent / "sentinel.txt")
    read_end, write_end = os.pipe()  # a stdin that never ends: reading /dev/stdin would block forever
    try:
        result = run_capped("check", "--static", "--no-cache", "--verbose", "model.py", cwd=tree,
                            cache_home=cache_home, stdin=read_end, timeout=60)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert f"model.py:{POST_LN_LINE}:" in result.stdout and "RL101" in result.stdout
    # the configs were not read, so the warmup is not known
    assert "warmup: assumed (" in result.stdout and "DeepSpeed config '" in result.stdout and "' not found" in result.stdout


# ----- 3. forged cache entries ---------------------------------------------------------------------


def test_a_cache_entry_forged_by_another_installation_does_not_change_results(sandbox):
    tree, victim_home = sandbox
    attacker_home = victim_home / "attacker"
    write(tree, {"tagger.py": BATCHNORM})
    args = ("check", "--static", "--output-format", "json", ".")
    assert run_capped(*args, cwd=tree, cache_home=attacker_home).returncode == 1
    secret = (attacker_home / "reslint" / "cache-key").read_bytes()
    (entry,) = (tree / ".reslint_cache" / "files").rglob("*.json")
    document = json.loads(entry.read_text())
    body = json.loads(document["payload"])
    body["result"]["findings"] = []
    payload = json.dumps(body)
    mac = hmac.new(secret, payload.encode(), hashlib.sha256).hexdigest()
    entry.write_text(json.dumps({**document, "payload": payload, "mac": mac}))
    # The forgery is well made: the installation whose secret signed it believes it ...
    forged = run_capped(*args, cwd=tree, cache_home=attacker_home)
    assert (forged.returncode, findings(forged)) == (0, [])
    # ... the one checking the pull request does not.
    checked = run_capped(*args, cwd=tree, cache_home=victim_home)
    assert (checked.returncode, findings(checked)) == (1, [("tagger.py", "RL201", BATCHNORM_LINE)])
    # Nor does it trust an unsigned entry of the previous format under the right key.
    entry.write_text(json.dumps({"format": 3, "key": body["key"], "imports": None, "result": body["result"]}))
    checked = run_capped(*args, cwd=tree, cache_home=victim_home)
    assert (checked.returncode, findings(checked)) == (1, [("tagger.py", "RL201", BATCHNORM_LINE)])


# ----- 4. static evaluation budget -----------------------------------------------------------------


def forward_of(body: str) -> str:
    return POST_LN + f"\n\nclass Big(nn.Module):\n    def forward(self, x):\n{body}        return x\n"


FAN_OUT = POST_LN + "\n\nclass Fan(nn.Module):\n    def forward(self, x):\n        return self.h0(x)\n" + "".join(
    f"\n    def h{level}(self, x):\n        return self.h{level + 1}(x) + self.h{level + 1}(x) + self.h{level + 1}(x)\n"
    for level in range(12)) + "\n    def h12(self, x):\n        return x\n"


def test_values_and_inlining_the_evaluator_builds_are_bounded_and_reported(sandbox):
    tree, cache_home = sandbox
    write(tree, {
        "integers.py": forward_of("        a = 2 ** 255\n" + "        a = a * a\n" * 25),
        "tuples.py": forward_of("        t = (x,)\n" + "        t = t + t\n" * 28),
        "fan_out.py": FAN_OUT,
    })
    started = time.monotonic()
    result = run_capped("check", "--static", "--no-cache", "--jobs", "1", "--output-format", "json", ".", cwd=tree,
                        cache_home=cache_home, memory=1 << 30, timeout=60)
    assert time.monotonic() - started < 60
    assert result.returncode == 0, result.stderr  # RL101 and RL904 are infos
    found = findings(result)
    # 2**255 squared four times is 4081 bits; the fifth square (line 21 of the file) is over 4096
    assert ("integers.py", "RL904", POST_LN_LINE + 10) in found
    assert ("tuples.py", "RL904", POST_LN_LINE + 19) in found  # 2**14 items, over 10,000
    assert [line for path, code, line in found if (path, code) == ("fan_out.py", "RL904")] == [52]
    for name in ("integers.py", "tuples.py", "fan_out.py"):  # the file's other facts stand
        assert (name, "RL101", POST_LN_LINE) in found
    messages = [f["message"] for f in json.loads(result.stdout)["findings"] if f["code"] == "RL904"]
    assert any("inlining fan-out limit" in message for message in messages)
    assert any("integer size limit" in message for message in messages)
    assert any("sequence length limit" in message for message in messages)


def test_the_work_per_file_budget_stops_the_evaluation_and_says_so(monkeypatch):
    from reslint.analysis import analyze_file
    from reslint.settings import Settings
    from reslint.static import dataflow

    monkeypatch.setattr(dataflow, "MAX_STEPS_PER_FILE", 300)
    result = analyze_file("fan_out.py", FAN_OUT.encode(), Settings(static=True, cache=False))
    found = [(f.code, f.line) for f in result.findings]
    assert ("RL101", POST_LN_LINE) in found  # Block, evaluated before the budget ran out
    (limit,) = [f for f in result.findings if f.code == "RL904"]
    assert "work per file limit" in limit.message and "stopped after 300 steps" in limit.message


# ----- 5. globs ------------------------------------------------------------------------------------


def test_globs_match_in_linear_time_and_an_invalid_one_is_a_config_error(sandbox):
    tree, cache_home = sandbox
    pathological = "/".join(["**"] * 14) + "/zz"
    write(tree, {
        "pyproject.toml": (f'[tool.reslint]\nexclude = ["{pathological}"]\ntrain = ["{pathological}"]\n'
                           f'[tool.reslint.per-file-ignores]\n"{pathological}" = ["RL201"]\n'),
        "a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t/tagger.py": BATCHNORM,
    })
    result = run_capped("check", "--static", "--no-cache", "--output-format", "json", ".", cwd=tree,
                        cache_home=cache_home, timeout=60)
    assert (result.returncode, findings(result)) == (
        1, [("a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t/tagger.py", "RL201", BATCHNORM_LINE)]), result.stderr
    (tree / "pyproject.toml").write_text('[tool.reslint]\nexclude = ["a/[z-a]"]\n')
    invalid = run_capped("check", "--static", ".", cwd=tree, cache_home=cache_home)
    assert invalid.returncode == 2 and invalid.stdout == ""
    assert invalid.stderr.strip().splitlines() == [
        "reslint: error: pyproject.toml: tool.reslint.exclude: invalid range z-a in 'a/[z-a]'"]


# ----- 6 and 10. a big file, a dead worker ---------------------------------------------------------


def test_a_file_too_big_for_libcst_is_reported_and_the_others_keep_their_findings(sandbox):
    tree, cache_home = sandbox
    big = BATCHNORM + "".join(f"value_{index} = {index}\n" for index in range(40_000))  # ~ 600 KB
    write(tree, {"big.py": big, "big_broken.py": big + "def broken(:\n", "tagger.py": BATCHNORM})
    result = run_capped("check", "--static", "--no-cache", "--jobs", "2", "--output-format", "json", ".",
                        cwd=tree, cache_home=cache_home, memory=STATIC_MEMORY, timeout=90)
    assert result.returncode == 1, result.stderr
    assert findings(result) == [("big.py", "RL904", 1), ("big_broken.py", "RL901", 40_012),
                                ("tagger.py", "RL201", BATCHNORM_LINE)]
    message = json.loads(result.stdout)["findings"][0]["message"]
    assert message.startswith("not analysed by the static engine: ") and "the syntax was checked" in message


KILLS_ITS_POOL_WORKER = '''\
import os
import signal

import torch.nn as nn


def process_above(pid, levels):
    for _ in range(levels):
        with open(f"/proc/{pid}/stat") as handle:
            pid = int(handle.read().rsplit(")", 1)[1].split()[1])
    return pid


os.kill(process_above(os.getpid(), 2), signal.SIGKILL)  # the worker checking this file
'''


def test_a_killed_worker_costs_only_its_own_file_and_never_hangs_the_run(sandbox):
    pytest.importorskip("torch")
    tree, cache_home = sandbox
    write(tree, {"killer.py": KILLS_ITS_POOL_WORKER + POST_LN.split("\n", 1)[1], "tagger.py": BATCHNORM,
                 "block.py": POST_LN})
    result = run_capped("check", "--no-cache", "--jobs", "2", "--timeout", "20", "--output-format", "json", ".",
                        cwd=tree, cache_home=cache_home, memory=FULL_MEMORY, timeout=180)
    assert result.returncode == 1, result.stderr
    found = findings(result)
    assert ("tagger.py", "RL201", BATCHNORM_LINE) in found and ("block.py", "RL101", POST_LN_LINE) in found
    (killed,) = [f for f in json.loads(result.stdout)["findings"] if f["path"] == "killer.py"]
    assert killed["code"] == "RL904" and "killed by signal 9" in killed["message"]


# ----- 7 and 12. output injection, file names that are not UTF-8 ------------------------------------


def test_control_and_bidi_characters_never_reach_the_text_output_raw(sandbox):
    tree, cache_home = sandbox
    forged = "\n::error file=x.py,line=1::forged\r\x1b[2J\x1b]0;title\x07All checks passed!\u202e"
    source = POST_LN.replace("self.ff(x))", f'self.ff(x, """{forged}"""))')
    hostile_name = "evil\n::error file=y.py,line=2::named\x1b[31m\u202egnp.py"
    write(tree, {"block.py": source, hostile_name: POST_LN})
    result = run_capped("check", "--static", "--no-cache", ".", cwd=tree, cache_home=cache_home)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert not any(line.startswith(("::", "All checks passed!")) for line in lines)
    assert not any(char in result.stdout for char in "\r\x1b\x07\u202e")
    assert "\\x1b[2J" in result.stdout and "\\u202e" in result.stdout and "evil\\x0a::error" in result.stdout
    assert lines[-2:] == ["Found 2 findings (0 errors, 0 warnings, 2 infos) in 2 files.",
                          "[*] 0 fixable with --fix (2 more with --unsafe-fixes)."]


def test_a_file_name_that_is_not_utf8_keeps_sarif_and_json_valid(sandbox):
    tree, cache_home = sandbox
    write(tree, {"tagger.py": BATCHNORM})
    (tree / os.fsdecode(b"bad\xff.py")).write_text(BATCHNORM)
    sarif = run_capped("check", "--static", "--no-cache", "--output-format", "sarif", ".", cwd=tree,
                       cache_home=cache_home, text=False)
    assert sarif.returncode == 1, sarif.stderr
    document = json.loads(sarif.stdout.decode("utf-8"))  # strict UTF-8
    uris = [result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for result in document["runs"][0]["results"]]
    assert uris == ["bad%FF.py", "tagger.py"]
    as_json = run_capped("check", "--static", "--no-cache", "--output-format", "json", ".", cwd=tree,
                         cache_home=cache_home, text=False)
    assert b"\\udc" not in as_json.stdout
    assert [f["path"] for f in json.loads(as_json.stdout.decode("utf-8"))["findings"]] == ["bad\\xff.py", "tagger.py"]


# ----- 8 and 9. the full check's children -----------------------------------------------------------


LEAVES_PROCESSES = '''\
import os
import signal
import subprocess
import sys
import time

import torch.nn as nn

if os.fork() == 0:  # a daemon: its own session, its parent gone, SIGTERM ignored
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(1000)
    os._exit(0)
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1000)"])
'''

HANGS_AFTER_SPAWNING = '''\
import subprocess
import sys
import time

import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.ff = nn.Linear(8, 8)

    def forward(self, x):
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1000)"], start_new_session=True)
        time.sleep(1000)
'''

WRITES_A_PICKLE_TO_THE_STAGE_PIPE = '''\
import os
import pickle
import struct

import torch.nn as nn

import reslint.isolation


class Payload:
    def __reduce__(self):
        return (os.system, ("touch {marker}; sleep 1000 &",))


if reslint.isolation._stage_writer is not None:
    data = pickle.dumps(("result", Payload()))
    os.write(reslint.isolation._stage_writer, struct.pack("<Q", len(data)) + data)
'''


def test_nothing_a_checked_file_starts_outlives_its_check(sandbox):
    pytest.importorskip("torch")
    tree, cache_home = sandbox
    leaves = LEAVES_PROCESSES + POST_LN.split("\n", 1)[1]
    write(tree, {"leaves.py": leaves, "hangs.py": HANGS_AFTER_SPAWNING})
    result = run_capped("check", "--no-cache", "--jobs", "1", "--timeout", "5", "--output-format", "json", ".",
                        cwd=tree, cache_home=cache_home, memory=FULL_MEMORY, timeout=120)
    assert result.returncode == 0, result.stderr  # RL101 and RL903 are infos; processes_with() found none left
    found = findings(result)
    assert ("leaves.py", "RL101", line_of(leaves, "return self.norm(")) in found
    assert [code for path, code, _ in found if path == "hangs.py"] == ["RL903"]


def test_a_pickle_written_to_the_stage_pipe_is_data_never_code(sandbox):
    pytest.importorskip("torch")
    tree, cache_home = sandbox
    marker = tree.parent.parent / "payload-ran"
    source = WRITES_A_PICKLE_TO_THE_STAGE_PIPE.format(marker=marker) + POST_LN.split("\n", 1)[1]
    write(tree, {"pickler.py": source, "tagger.py": BATCHNORM})
    result = run_capped("check", "--no-cache", "--jobs", "1", "--timeout", "10", "--output-format", "json", ".",
                        cwd=tree, cache_home=cache_home, memory=FULL_MEMORY, timeout=120)
    assert not marker.exists()
    assert result.returncode == 1, result.stderr
    document = json.loads(result.stdout)
    found = {(f["path"], f["code"]): f["message"] for f in document["findings"]}
    assert ("tagger.py", "RL201") in found and ("pickler.py", "RL101") in found
    assert "sent a message that is not JSON" in found[("pickler.py", "RL902")]
