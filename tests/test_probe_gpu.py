"""The probe on a CUDA device: same numbers as the CPU, bfloat16, real out-of-memory, RNG restored.

Marked `gpu` and skipped where no CUDA device is present (CI has none).
"""

from __future__ import annotations

import pytest
from test_probe import fixture

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

import reslint  # noqa: E402
from reslint.probing.api import ProbeError  # noqa: E402


def test_the_lessons_numbers_on_cuda():
    lesson = fixture("lessons_residual")
    plain = reslint.probe(lesson.without_residual(), lesson.lesson_inputs(), loss="sum", device="cuda")
    residual = reslint.probe(lesson.with_residual(), lesson.lesson_inputs(), loss="sum", device="cuda")
    assert plain.device == "cuda:0"
    assert plain.parameter("layers.0.weight").grad_norm == pytest.approx(0.366573, abs=1e-5)
    assert residual.parameter("layers.0.weight").grad_norm == pytest.approx(15.716805, abs=1e-5)


def test_auto_picks_cuda_and_the_cuda_rng_is_restored():
    module = fixture("healthy_gpt")
    model = module.GPT(module.GPTConfig(n_layer=2))
    state = torch.cuda.get_rng_state()
    report = reslint.probe(model, "long[2,16]<256", device="auto")
    assert report.device.startswith("cuda") and report.codes == []
    assert torch.equal(torch.cuda.get_rng_state(), state)
    assert next(model.parameters()).device.type == "cpu"  # moved back


def test_bfloat16_on_cuda_is_silent_on_a_healthy_gpt():
    module = fixture("healthy_gpt")
    report = reslint.probe(module.GPT(module.GPTConfig()), module.example_batch, device="cuda", dtype="bfloat16")
    assert report.dtype == "bfloat16" and report.codes == []


def test_a_real_out_of_memory_is_a_probe_error_with_advice():
    class Greedy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(16, 16)

        def forward(self, x):
            total = torch.cuda.get_device_properties(x.device).total_memory
            waste = torch.empty(2 * total // 4, device=x.device)  # twice the device's memory in float32
            return self.fc(x) + waste[:1]

    with pytest.raises(ProbeError) as caught:
        reslint.probe(Greedy(), "float[2,16]", device="cuda")
    message = str(caught.value)
    assert message.startswith("out of memory on cuda:0 while running the forward and backward pass")
    assert "tried to allocate" in message and "--dtype bfloat16" in message


def test_the_cli_probes_on_cuda_in_its_isolated_child():
    # The parent never initialises CUDA, so the forked child can (CUDA does not survive a fork).
    import json

    from cli_support import REPO_ROOT, run_reslint

    result = run_reslint("probe", "fixtures/probe/lessons_residual.py", "--model", "without_residual()",
                         "--inputs", "lesson_inputs()", "--loss", "sum", "--device", "cuda", "--output-format", "json",
                         cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["device"] == "cuda:0"
    assert {p["name"]: p["grad_norm"] for p in document["parameters"]}["layers.0.weight"] == pytest.approx(0.366573,
                                                                                                         abs=1e-5)
