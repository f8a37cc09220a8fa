"""A full check's fix availability traces the fixed text as the file itself, in memory
(reslint.file_gate.overlaid, reslint.trace.loader.module_from_text): nothing is written beside the
user's files (a killed run used to leave `.reslint-fix-*.py` behind), and the fixed file's relative
imports resolve as the file's own do."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cli_support import REPO_ROOT

MODEL = '''\
import torch
import torch.nn as nn

from .sizes import VOCAB, WIDTH


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
        return x + self.fc2(torch.relu(self.fc1(self.ln2(x))))


class TinyLM(nn.Module):
    def __init__(self, vocab_size=VOCAB, width=WIDTH, n_head=4, n_layer=2):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, width)
        self.blocks = nn.ModuleList([Block(width, n_head) for _ in range(n_layer)])
        self.head = nn.Linear(width, vocab_size)

    def forward(self, idx):
        h = self.embed(idx)
        for block in self.blocks:
            h = block(h)
        return self.head(h)
'''

# Runs `reslint check` (full, JSON) in this process and its trace children, recording every file opened
# for writing and every file created, renamed or removed under the checked tree (an audit hook: fork
# keeps it in the children; it writes to a descriptor opened beforehand, so it records without opening).
AUDITED_CHECK = '''
import os, sys
tree = os.path.realpath(sys.argv[1])
log = os.open(sys.argv[2], os.O_WRONLY | os.O_APPEND)
WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC

def audit(event, args):
    if event == "open" and isinstance(args[0], (str, bytes)):
        mode, flags = args[1], args[2]
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (isinstance(flags, int) and flags & WRITES)
        touched = [args[0]] if writing else []
    elif event in ("os.rename", "os.remove", "os.mkdir", "os.link", "os.symlink"):
        touched = [arg for arg in args[:2] if isinstance(arg, (str, bytes))]
    else:
        return
    for path in touched:
        path = os.fsdecode(path)
        if os.path.realpath(path).startswith(tree + os.sep):
            os.write(log, f"{event} {path}\\n".encode())

sys.addaudithook(audit)
from reslint.cli import main
main(["check", "--no-cache", "--jobs", "1", "--output-format", "json", "--exit-zero", "pkg/model.py"])
'''


def listing(tree: Path) -> dict[str, bytes]:
    return {str(path.relative_to(tree)): path.read_bytes() for path in sorted(tree.rglob("*")) if path.is_file()}


def test_fix_availability_traces_the_fixed_file_in_memory_with_its_relative_imports(tmp_path):
    pytest.importorskip("torch")
    tree = tmp_path / "project"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pyproject.toml").write_text("", encoding="utf-8")
    (tree / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (tree / "pkg" / "sizes.py").write_text("VOCAB = 100\nWIDTH = 32\n", encoding="utf-8")
    (tree / "pkg" / "model.py").write_text(MODEL, encoding="utf-8")
    log = tmp_path / "writes.log"
    log.write_text("", encoding="utf-8")
    files_before = listing(tree)

    done = subprocess.run([sys.executable, "-c", AUDITED_CHECK, str(tree), str(log)], cwd=tree, capture_output=True,
                          text=True, timeout=600, env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin",
                                                       "PYTHONDONTWRITEBYTECODE": "1"})

    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert [(entry["name"], entry["engine"]) for entry in document["models"]] == [("TinyLM", "traced (fx)")]
    final_norm = [finding for finding in document["findings"] if finding["code"] == "RL103"]
    assert len(final_norm) == 1 and final_norm[0]["line"] == 31
    # Offered: the fixed text imported as pkg.model (its `from .sizes import` resolves) traced as before.
    assert final_norm[0]["fix"]["applicability"] == "unsafe"
    assert "self.ln_f = nn.LayerNorm(width)" in "".join(edit["content"] for edit in final_norm[0]["fix"]["edits"])
    assert log.read_text(encoding="utf-8") == ""
    assert listing(tree) == files_before


def test_an_overlay_is_what_every_read_of_the_file_sees_and_nothing_after(tmp_path):
    """While overlaid, the gate, linecache (inspect, tracebacks) and the import of the checked file read
    the given text; after it, the file on disk again."""
    source = tmp_path / "thing.py"
    source.write_text("VALUE = 'disk'\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import linecache
        from reslint.file_gate import MAX_SOURCE_BYTES, overlaid, read_project_file
        from reslint.trace.loader import loaded_module
        path = {str(source)!r}

        def seen():
            with loaded_module(path, {str(tmp_path)!r}) as module:
                value = module.VALUE
            return read_project_file(path, None, MAX_SOURCE_BYTES).decode().strip(), linecache.getline(path, 1).strip(), value

        with overlaid(path, b"VALUE = 'memory'\\n"):
            print(*seen())
        print(*seen())
    """)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["VALUE = 'memory' VALUE = 'memory' memory", "VALUE = 'disk' VALUE = 'disk' disk"]
    assert source.read_text(encoding="utf-8") == "VALUE = 'disk'\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["thing.py"]


def test_what_is_cached_of_a_files_contents_follows_the_overlay(tmp_path):
    """file_gate.cached_as_read: the trace engine's source index of a file reads the overlaid text while the
    overlay is active and the file on disk again after it, though both are cached by path."""
    from reslint.file_gate import overlaid
    from reslint.trace.source_index import source_index

    path = tmp_path / "model.py"
    path.write_text("class Block:\n    def __init__(self):\n        self.norm = None\n", encoding="utf-8")
    assert source_index(str(path)).attribute_line("Block", "norm") == 3
    with overlaid(str(path), b"class Block:\n\n    def __init__(self):\n        self.norm = None\n"):
        assert source_index(str(path)).attribute_line("Block", "norm") == 4
    assert source_index(str(path)).attribute_line("Block", "norm") == 3
