"""`reslint probe` end to end: the lessons' numbers, the fixtures' verdicts, output formats, errors and exit codes.

The headline cases run the installed console script in a subprocess, as a user does; error
paths run `reslint.cli.run` in this process (the same code path, without a torch import each).
"""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_support import REPO_ROOT, run_reslint, write

torch = pytest.importorskip("torch")

from reslint import cli  # noqa: E402

LESSONS = "fixtures/probe/lessons_residual.py"


@dataclass
class Outcome:
    status: int
    stdout: str
    stderr: str


@pytest.fixture
def probe_here(monkeypatch, capsys):
    """`reslint probe` in this process."""
    monkeypatch.setenv("NO_COLOR", "1")

    def invoke(cwd: Path, *args: str) -> Outcome:
        monkeypatch.chdir(cwd)
        status = cli.run(["probe", *args])
        captured = capsys.readouterr()
        return Outcome(status, captured.out, captured.err)

    return invoke


def one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("reslint: error: ")
    return lines[0]


def probe_json(*args: str, cwd: Path = REPO_ROOT, status: int | None = None) -> dict:
    result = run_reslint("probe", "--output-format", "json", *args, cwd=cwd)
    assert result.returncode in ((0, 1) if status is None else (status,)), result.stderr
    return json.loads(result.stdout)


# the lessons' experiment


def test_the_lessons_numbers_and_their_ratio_through_the_cli():
    args = (LESSONS, "--model", "without_residual()", "--compare", "with_residual()", "--inputs", "lesson_inputs()",
            "--loss", "sum")  # the lessons' h.sum().backward()
    document = probe_json(*args, status=0)
    first = {p["name"]: p for p in document["parameters"]}["layers.0.weight"]
    assert first["grad_norm"] == pytest.approx(0.366573, abs=1e-5)
    assert first["shape"] == [4, 4] and first["param_norm"] == pytest.approx(0.4)
    compared = {p["name"]: p for p in document["comparison"]["parameters"]}["layers.0.weight"]
    assert compared["compared_grad_norm"] == pytest.approx(15.716805, abs=1e-5)
    assert compared["ratio"] == pytest.approx(15.716805 / 0.366573, rel=1e-5)
    assert document["comparison"]["expression"] == "with_residual()"
    # DESIGN.md's probe JSON keys
    assert {"parameters", "blocks", "findings", "device", "loss"} <= set(document)
    assert {"name", "shape", "grad_norm", "param_norm"} <= set(document["parameters"][0])
    assert document["device"] == "cpu" and document["loss"] == pytest.approx(-0.041076, abs=1e-5)
    assert [block["name"] for block in document["blocks"]] == ["layers.0", "layers.1", "layers.2", "layers.3"]
    last = document["blocks"][3]["grad_norm"]
    assert [block["ratio_to_last"] for block in document["blocks"]] == pytest.approx(
        [block["grad_norm"] / last for block in document["blocks"]])
    assert document["findings"] == [] and document["comparison"]["report"]["findings"] == []

    text = run_reslint("probe", *args, cwd=REPO_ROOT)
    assert text.returncode == 0, text.stderr
    # the table row of the first layer's weight, and the comparison row with the lessons' 43x
    assert re.search(r"^layers\.0\s+layers\.0\.weight\s+\(4, 4\)\s+0\.366573\s+0\.4\s", text.stdout, re.M), text.stdout
    assert re.search(r"^layers\.0\.weight\s+0\.366573\s+15\.7168\s+42\.9x$", text.stdout, re.M), text.stdout
    assert "compared with with_residual() -> LessonStack: same inputs, loss and seed" in text.stdout
    assert text.stdout.rstrip().endswith("No gradient-flow problems found (RL601-RL604).")
    # The README shows this very output.
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    shown = re.search(r"```console\n\$ reslint probe " + re.escape(LESSONS) + r".*?\n(.*?)```", readme, re.S)
    assert shown and shown.group(1) == text.stdout


# the fixtures' verdicts


def findings(document: dict) -> list[tuple[str, str, int, int]]:
    return [(f["code"], f["path"], f["line"], f["column"]) for f in document["findings"]]


def test_deep_sigmoid_mlp_is_rl601():
    document = probe_json("fixtures/probe/vanishing_sigmoid_mlp.py", "--model", "DeepSigmoidMLP()", status=1)
    assert findings(document) == [("RL601", "fixtures/probe/vanishing_sigmoid_mlp.py", 10, 23)]
    [finding] = document["findings"]
    assert finding["symbol"] == "layers" and finding["engine"] == "probe" and finding["severity"] == "warning"
    assert re.match(r"gradient norm falls \S+x from layers\.11 \(\S+\) to layers\.0 \(\S+\) over the 12 blocks of "
                    r"self\.layers of DeepSigmoidMLP \(vanishing-gradient-factor 100\).*residual connection",
                    finding["message"]), finding["message"]


def test_deep_linear_stack_with_large_init_is_rl602():
    document = probe_json("fixtures/probe/exploding_linear_stack.py", "--model", "DeepLinearStack()", status=1)
    assert findings(document) == [("RL602", "fixtures/probe/exploding_linear_stack.py", 9, 23)]
    message = document["findings"][0]["message"]
    assert re.match(r"activation RMS grows \S+x from the input of layers\.0 \(\S+\) to the output of layers\.11", message)
    assert "lower the initialisation scale" in message


def test_nan_in_the_forward_pass_is_rl603_at_the_operation():
    document = probe_json("fixtures/probe/non_finite.py", "--model", "LeftPaddedAttention()",
                          "--inputs", "padded_tokens()", status=1)
    assert findings(document) == [("RL603", "fixtures/probe/non_finite.py", 40, 26)]
    [finding] = document["findings"]
    # the default loss is cross-entropy (the head's width is the vocabulary): NaN logits reach every gradient
    assert finding["severity"] == "error" and finding["symbol"] == "head.bias"
    assert finding["message"].startswith(
        "loss is nan; 5 of 5 parameters have NaN gradients (embed.weight, qkv.weight, qkv.bias and 2 more); "
        "first hit in the backward pass: head.bias; first NaN produced by softmax in the forward pass at "
        "fixtures/probe/non_finite.py:40")
    assert document["loss"] == "nan"
    assert {p["name"]: p["grad_norm"] for p in document["parameters"]}["embed.weight"] == "nan"


def test_nan_born_in_the_backward_pass_names_the_first_parameter_hit():
    document = probe_json("fixtures/probe/non_finite.py", "--model", "LengthFeature()",
                          "--inputs", "padded_tokens()", status=1)
    assert findings(document) == [("RL603", "fixtures/probe/non_finite.py", 23, 1)]
    assert document["findings"][0]["message"].startswith(
        "1 of 5 parameters have NaN gradients (embed.weight); first hit in the backward pass: embed.weight; "
        "the forward pass is finite; first NaN produced by the backward of mul (MulBackward0) at "
        "fixtures/probe/non_finite.py:23")


def test_a_module_never_called_and_one_whose_output_is_dropped_are_rl604():
    # No --model: the file's one outermost model is discovered, as `reslint check` would.
    document = probe_json("fixtures/probe/unused_module.py", status=1)
    assert findings(document) == [("RL604", "fixtures/probe/unused_module.py", 13, 20),
                                  ("RL604", "fixtures/probe/unused_module.py", 15, 20)]
    never, detached = (finding["message"] for finding in document["findings"])
    assert never.startswith("pos.weight (64, 32) received no gradient: self.pos of Tagger is never called in forward")
    assert detached.startswith("aux.weight (1, 32), aux.bias (1,) received no gradient: self.aux of Tagger runs but "
                               "its output does not reach the loss")
    grads = {p["name"]: p["grad_norm"] for p in document["parameters"]}
    assert grads["pos.weight"] is None and grads["head.weight"] > 0


def test_a_healthy_pre_ln_gpt_is_silent():
    result = run_reslint("probe", "fixtures/probe/healthy_gpt.py", "--inputs", "example_batch()", cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr
    assert "loss output.loss = " in result.stdout.splitlines()[0]
    assert "stack self.blocks of GPT: 6 blocks" in result.stdout
    assert result.stdout.rstrip().endswith("No gradient-flow problems found (RL601-RL604).")


# configuration, suppression, exit codes


def copy_fixture(tmp_path: Path, name: str) -> Path:
    shutil.copy(REPO_ROOT / "fixtures" / "probe" / name, tmp_path / name)
    return tmp_path / name


def test_thresholds_from_the_config_and_the_command_line(tmp_path, probe_here):
    copy_fixture(tmp_path, "vanishing_sigmoid_mlp.py")
    write(tmp_path, {"pyproject.toml": "[tool.reslint]\nvanishing-gradient-factor = 1e12\n"})
    args = ("vanishing_sigmoid_mlp.py", "--model", "DeepSigmoidMLP()")
    assert probe_here(tmp_path, *args).status == 0
    lowered = probe_here(tmp_path, *args, "--vanishing-gradient-factor", "1000")
    assert lowered.status == 1 and "RL601 [warning]" in lowered.stdout and "(vanishing-gradient-factor 1000)" in lowered.stdout


def test_a_bad_threshold_in_the_config_is_a_usage_error(tmp_path, probe_here):
    copy_fixture(tmp_path, "vanishing_sigmoid_mlp.py")
    write(tmp_path, {"pyproject.toml": "[tool.reslint]\nactivation-growth-factor = 0.5\n"})
    outcome = probe_here(tmp_path, "vanishing_sigmoid_mlp.py")
    assert outcome.status == 2 and outcome.stdout == ""
    assert one_error_line(outcome.stderr) == ("reslint: error: pyproject.toml: tool.reslint.activation-growth-factor: "
                                              "expected a number greater than 1, got 0.5")


def test_noqa_config_ignore_fail_on_and_exit_zero(tmp_path, probe_here):
    path = copy_fixture(tmp_path, "unused_module.py")
    lines = path.read_text().splitlines()
    assert lines[12].strip() == "self.pos = nn.Embedding(max_len, width)"
    lines[12] += "  # noqa: RL604"
    path.write_text("\n".join(lines) + "\n")
    outcome = probe_here(tmp_path, "unused_module.py", "--output-format", "json")
    assert outcome.status == 1
    assert [(f["code"], f["line"]) for f in json.loads(outcome.stdout)["findings"]] == [("RL604", 15)]
    assert probe_here(tmp_path, "unused_module.py", "--ignore", "RL6").status == 0
    assert probe_here(tmp_path, "unused_module.py", "--fail-on", "error").status == 0
    kept = probe_here(tmp_path, "unused_module.py", "--exit-zero")
    assert kept.status == 0 and "RL604 [warning]" in kept.stdout


def test_loss_from_a_function_of_the_file(tmp_path, probe_here):
    copy_fixture(tmp_path, "lessons_residual.py")
    with open(tmp_path / "lessons_residual.py", "a") as handle:
        handle.write("\n\ndef first_feature(output):\n    return output[:, 0].sum()\n")
    outcome = probe_here(tmp_path, "lessons_residual.py", "--model", "with_residual()", "--inputs", "lesson_inputs()",
                         "--loss", "lessons_residual.py:first_feature", "--output-format", "json")
    assert outcome.status == 0, outcome.stderr
    document = json.loads(outcome.stdout)
    assert document["loss_kind"] == "first_feature"
    assert {p["name"]: p["grad_norm"] for p in document["parameters"]}["layers.3.bias"] == pytest.approx(2.0)  # 1 per row of the batch


# errors: one line, exit 2

OOM_MODEL = textwrap.dedent('''\
    import torch
    import torch.nn as nn


    class Hungry(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(1024, 1024)

        def forward(self, x):
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 79.19 GiB")
''')

FAILING_MODEL = textwrap.dedent('''\
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self, width=8):
            super().__init__()
            self.fc = nn.Linear(width, width)

        def forward(self, x):
            return self.fc(x).view(3, -1, 7)
''')


def test_out_of_memory_is_one_line_with_the_sizes_and_the_advice(tmp_path):
    write(tmp_path, {"hungry.py": OOM_MODEL})
    result = run_reslint("probe", "hungry.py", "--inputs", "float[64,1024]", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert one_error_line(result.stderr) == (
        "reslint: error: out of memory on cpu while running the forward and backward pass; Hungry: 1.0M parameters, "
        "4.0 MiB of weights in float32; inputs float[64,1024]; tried to allocate 20.00 GiB; try --dtype bfloat16, "
        "smaller --inputs (fewer or shorter sequences), or torchrun with --wrap fsdp")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_unavailable_device_exits_2_with_one_line(tmp_path):
    result = run_reslint("probe", str(REPO_ROOT / LESSONS), "--device", "cuda", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    line = one_error_line(result.stderr)
    assert line.startswith("reslint: error: --device cuda: CUDA is not available")


@pytest.mark.parametrize(("args", "message"), [
    (("--model", "Net(width=4)", "--inputs", "float[2,4]"),
     r"the forward pass raised RuntimeError: shape '\[3, -1, 7\]' is invalid for input of size 8 at net\.py:10"),
    (("--model", "Net(depth=3)"), r"cannot build Net\(depth=3\): TypeError: .*unexpected keyword argument 'depth'"),
    (("--model", "other.py:Net()"), r"--model 'other.py:Net\(\)': file not found: other.py"),
    (("--wrap", "ddp"), r"--wrap ddp needs a distributed launch: torchrun --nproc-per-node N -m reslint probe \.\.\."),
    (("--loss", "net.py:nothing"), r"--loss 'net.py:nothing': net.py has no 'nothing'"),
    (("--device", "tpu"), r"--device tpu: unknown device \(expected one of auto, cpu, cuda, mps\)"),
])
def test_usage_errors_exit_2_with_one_line(tmp_path, probe_here, args, message):
    write(tmp_path, {"net.py": FAILING_MODEL})
    outcome = probe_here(tmp_path, "net.py", *args)
    assert outcome.status == 2 and outcome.stdout == ""
    assert re.fullmatch("reslint: error: " + message, one_error_line(outcome.stderr))


def test_probe_needs_a_file(tmp_path, probe_here):
    outcome = probe_here(tmp_path)
    assert outcome.status == 2
    assert one_error_line(outcome.stderr) == "reslint: error: probe needs the model's FILE (or --model FILE_OR_MODULE:EXPR)"


# --plot

FAKE_MATPLOTLIB = 'raise ImportError("No module named matplotlib")\n'


def test_plot_without_matplotlib_says_how_to_install_it_before_probing(tmp_path):
    write(tmp_path, {"fake_site/matplotlib/__init__.py": FAKE_MATPLOTLIB})
    result = run_reslint("probe", str(REPO_ROOT / LESSONS), "--model", "with_residual()", "--plot", "out.png",
                         cwd=tmp_path, env={"PYTHONPATH": str(tmp_path / "fake_site")})
    assert result.returncode == 2 and result.stdout == ""
    assert one_error_line(result.stderr) == (
        "reslint: error: --plot needs matplotlib, which is not installed: pip install 'reslint[plot]' "
        "(or pip install matplotlib)")
    assert not (tmp_path / "out.png").exists()


def colour_present(image, rgb: str) -> bool:
    wanted = [int(rgb[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    return bool(((abs(image[..., :3] - wanted) < 0.02).all(axis=-1)).any())


def test_plot_draws_every_compared_model_and_says_where_it_went(tmp_path):
    import matplotlib.image  # the [test] extra installs it: this test must run in CI, never skip

    png = tmp_path / "flow.png"
    args = (LESSONS, "--model", "without_residual()", "--compare", "with_residual()", "--inputs", "lesson_inputs()",
            "--plot", str(png))
    result = run_reslint("probe", *args, "--output-format", "json", cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["comparison"]["model"] == "LessonStack"  # the line is not in the JSON
    assert result.stderr == f"Plot of the gradient norm per layer written to {png}\n"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = matplotlib.image.imread(png)
    assert colour_present(image, "#1f77b4") and colour_present(image, "#ff7f0e")  # both models' lines

    text = run_reslint("probe", *args, cwd=REPO_ROOT)
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[-1] == f"Plot of the gradient norm per layer written to {png}"


# the default loss, CI formats, usage errors


@pytest.mark.parametrize(("example", "loss_kind"), [
    ("bert_style.py", "random-projection"),  # Post-LN, its output a norm's: the sum of it has no gradient
    ("pre_ln_gpt.py", "cross-entropy"),
    ("tiny_gpt.py", "cross-entropy"),
])
def test_the_bundled_examples_draw_no_gradient_finding_with_the_default_loss(example, loss_kind):
    document = probe_json(f"examples/{example}", status=0)
    assert document["loss_kind"] == loss_kind and document["findings"] == []
    [stack] = [stack for stack in document["stacks"] if len(stack["blocks"]) > 1]
    grads = {block["name"]: block["grad_norm"] for block in document["blocks"]}
    assert 0.5 < grads[stack["blocks"][0]] / grads[stack["blocks"][-1]] < 2  # within 2x, not orders of magnitude


def test_sarif_output_validates_and_locates_the_finding():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((REPO_ROOT / "tests" / "data" / "sarif-schema-2.1.0.json").read_text())
    result = run_reslint("probe", "fixtures/probe/vanishing_sigmoid_mlp.py", "--model", "DeepSigmoidMLP()",
                         "--output-format", "sarif", cwd=REPO_ROOT)
    assert result.returncode == 1, result.stderr
    document = json.loads(result.stdout)
    jsonschema.Draft7Validator(schema).validate(document)
    [found] = document["runs"][0]["results"]
    location = found["locations"][0]["physicalLocation"]
    assert (found["ruleId"], found["level"], found["properties"]["engine"]) == ("RL601", "warning", "probe")
    assert location["artifactLocation"] == {"uri": "fixtures/probe/vanishing_sigmoid_mlp.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"] == {"startLine": 10, "startColumn": 23}
    assert found["message"]["text"].startswith("gradient norm falls ")


def test_github_annotations():
    result = run_reslint("probe", "fixtures/probe/unused_module.py", "--output-format", "github", cwd=REPO_ROOT)
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split("::")[1] for line in lines] == [
        "warning file=fixtures/probe/unused_module.py,line=13,col=20,title=RL604",
        "warning file=fixtures/probe/unused_module.py,line=15,col=20,title=RL604",
    ]
    assert lines[0].split("::", 2)[2].startswith("pos.weight (64, 32) received no gradient: self.pos of Tagger")


def test_a_directory_is_a_usage_error_with_one_line(probe_here):
    outcome = probe_here(REPO_ROOT, "examples/")
    assert outcome.status == 2 and outcome.stdout == ""
    assert one_error_line(outcome.stderr) == (
        'reslint: error: examples/ is a directory: reslint probe measures one model, give its FILE '
        '(e.g. reslint probe model.py --model "GPT()"); reslint check takes directories')


def test_without_torch_the_message_is_the_probes(tmp_path):
    write(tmp_path, {"fake_site/torch/__init__.py": 'raise ImportError("No module named torch")\n'})
    result = run_reslint("probe", str(REPO_ROOT / LESSONS), cwd=tmp_path, env={"PYTHONPATH": str(tmp_path / "fake_site")})
    assert result.returncode == 2 and result.stdout == ""
    assert one_error_line(result.stderr) == (
        "reslint: error: reslint probe needs PyTorch: it runs the model forward and backward; install it "
        "(pip install 'reslint[torch]'), or use reslint check --static for what needs no torch")
