"""The README's first command: the bundled examples draw exactly these findings."""

from __future__ import annotations

import json
import subprocess
import sys

from golden import ROOT

EXPECTED = [
    ("examples/bert_style.py", 11, "RL201"),
    ("examples/bert_style.py", 15, "RL101"),
    ("examples/bert_style.py", 24, "RL104"),
    ("examples/tiny_gpt.py", 15, "RL501"),
    ("examples/tiny_gpt.py", 44, "RL103"),
    ("examples/train_encoder.py", 11, "RL301"),
]


def test_examples_draw_their_findings_and_the_correct_gpt_none():
    run = subprocess.run(
        [sys.executable, "-m", "reslint", "check", "--static", "--no-cache", "--output-format", "json", "examples/"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 1, run.stderr
    report = json.loads(run.stdout)
    assert [(f["path"], f["line"], f["code"]) for f in report["findings"]] == EXPECTED
    stacks = {model["name"]: model["stacks"][0] for model in report["models"]}
    assert stacks["GPT"]["placement"] == "pre" and stacks["GPT"]["final_norm"] is True
    assert stacks["TinyGPT"]["final_norm"] is False
    assert stacks["Encoder"]["placement"] == "post" and stacks["Encoder"]["depth"] == 24


def test_full_check_of_the_examples_traces_every_model_and_agrees():
    run = subprocess.run(
        [sys.executable, "-m", "reslint", "check", "--no-cache", "--output-format", "json", "examples/"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 1, run.stderr
    report = json.loads(run.stdout)
    assert [(f["path"], f["line"], f["code"]) for f in report["findings"]] == EXPECTED
    assert {model["name"]: model["engine"] for model in report["models"]} == {
        "Encoder": "traced (fx)", "GPT": "traced (fx)", "TinyGPT": "traced (fx)"}  # fast_capture: export's facts
