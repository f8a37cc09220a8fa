"""`reslint.probe(model, inputs, ...)`: the measurements, the verdicts, and that the model is left as it was found."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
from cli_support import import_file
from golden import ROOT

torch = pytest.importorskip("torch")
nn = torch.nn

import reslint  # noqa: E402
from reslint.probing.api import ProbeError  # noqa: E402

PROBE_FIXTURES = ROOT / "fixtures" / "probe"


def fixture(name: str):
    return import_file(PROBE_FIXTURES / f"{name}.py", f"probe_fixture_{name}")


def test_the_lessons_numbers():
    lesson = fixture("lessons_residual")
    plain = reslint.probe(lesson.without_residual(), lesson.lesson_inputs(), loss="sum")  # the lessons' h.sum()
    residual = reslint.probe(lesson.with_residual(), lesson.lesson_inputs(), loss="sum")
    assert plain.parameter("layers.0.weight").grad_norm == pytest.approx(0.366573, abs=1e-5)
    assert residual.parameter("layers.0.weight").grad_norm == pytest.approx(15.716805, abs=1e-5)
    # Without residuals every layer passes on 0.4x of the gradient: the biases show it exactly (4, 1.6, 0.64, 0.256).
    biases = [plain.parameter(f"layers.{i}.bias").grad_norm for i in range(4)]
    assert biases == pytest.approx([0.256, 0.64, 1.6, 4.0], rel=1e-5)
    assert plain.loss_kind == "sum" and plain.codes == [] and residual.codes == []


def test_report_orders_blocks_by_depth_and_aggregates_them():
    lesson = fixture("lessons_residual")
    report = reslint.probe(lesson.without_residual(), lesson.lesson_inputs())
    assert [block.name for block in report.blocks] == ["layers.0", "layers.1", "layers.2", "layers.3"]
    first = report.block("layers.0")
    weight, bias = report.parameter("layers.0.weight"), report.parameter("layers.0.bias")
    assert first.grad_norm == pytest.approx(math.hypot(weight.grad_norm, bias.grad_norm))
    assert report.block("layers.3").ratio_to_last == 1.0
    assert first.ratio_to_last == pytest.approx(first.grad_norm / report.block("layers.3").grad_norm)
    assert weight.param_norm == pytest.approx(0.4)  # 16 weights of 0.1
    assert weight.ratio == pytest.approx(weight.grad_norm / 0.4)
    [stack] = report.stacks
    assert (stack.name, stack.label, stack.line) == ("layers", "self.layers of LessonStack", 22)
    # The stack's input is the lesson's x; the activation leaving each layer is that layer's output.
    x = fixture("lessons_residual").lesson_inputs()
    assert stack.input_rms == pytest.approx(x.pow(2).mean().sqrt().item(), rel=1e-6)


def test_probe_restores_training_mode_rng_grads_and_batchnorm_statistics():
    model = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8), nn.Dropout(0.5), nn.Linear(8, 2))
    model.eval()
    model[2].train()  # a module deliberately left in another mode than its parent
    sentinel = torch.ones(8, 8)
    model[0].weight.grad = sentinel
    running_mean = model[1].running_mean.clone()
    batches = model[1].num_batches_tracked.clone()
    batch = torch.randn(4, 8)
    torch.manual_seed(1234)
    state = torch.get_rng_state()

    report = reslint.probe(model, batch, seed=7)

    assert report.parameter("0.weight").grad_norm > 0
    assert [module.training for module in model.modules()] == [False, False, False, True, False]
    assert torch.equal(torch.get_rng_state(), state)
    assert model[0].weight.grad is sentinel and model[3].weight.grad is None
    assert torch.equal(model[1].running_mean, running_mean) and torch.equal(model[1].num_batches_tracked, batches)


def no_hooks(model) -> bool:
    return all(not module._forward_hooks and not module._forward_pre_hooks for module in model.modules()) and all(
        not getattr(parameter, "_post_accumulate_grad_hooks", None) for parameter in model.parameters())


def test_hooks_are_removed_after_a_run_and_after_a_failing_forward():
    lesson = fixture("lessons_residual")
    model = lesson.with_residual()
    reslint.probe(model, lesson.lesson_inputs())
    assert no_hooks(model)

    class Broken(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])

        def forward(self, x):
            x = self.layers[0](x)
            raise ValueError("boom")

    broken = Broken()
    with pytest.raises(ProbeError, match=r"^the forward pass raised ValueError: boom at .*test_probe\.py:\d+$"):
        reslint.probe(broken, torch.randn(2, 4))
    assert no_hooks(broken) and broken.training


def test_nan_diagnosis_hooks_are_removed_too():
    module = fixture("non_finite")
    model = module.LeftPaddedAttention()
    report = reslint.probe(model, module.padded_tokens())
    assert report.codes == ["RL603"]
    assert no_hooks(model)
    assert all(parameter.grad is None for parameter in model.parameters())


def test_hooks_keep_norms_only():
    # The recorder keeps 0-d norms (and element counts) per block, never an activation.
    from reslint.probing.measure import Recorder
    from reslint.probing.structure import find_layout

    module = fixture("healthy_gpt")
    model = module.GPT(module.GPTConfig(n_layer=2))
    recorder = Recorder(model, find_layout(model))
    recorder.attach()
    try:
        model(torch.randint(0, 256, (2, 8)))
    finally:
        recorder.detach()
    kept = list(recorder.outputs.values()) + list(recorder.stack_inputs.values())
    assert kept and all(norm.dim() == 0 and isinstance(count, int) for norm, count in kept)
    assert not model.blocks[0]._forward_hooks


def test_auto_loss_uses_the_outputs_loss_and_mean_is_scale_free():
    module = fixture("healthy_gpt")
    torch.manual_seed(0)
    batch = module.example_batch()
    auto = reslint.probe(module.GPT(module.GPTConfig(n_layer=2)), batch)
    assert auto.loss_kind == "output.loss" and 4 < auto.loss < 7  # cross-entropy at init: about ln(256) = 5.5
    model = module.GPT(module.GPTConfig(n_layer=2))
    summed = reslint.probe(model, batch["idx"], loss="sum")
    averaged = reslint.probe(model, batch["idx"], loss="mean")
    elements = 4 * 32 * 256
    assert averaged.loss == pytest.approx(summed.loss / elements, rel=1e-5)
    assert averaged.parameter("ln_f.weight").grad_norm == pytest.approx(
        summed.parameter("ln_f.weight").grad_norm / elements, rel=1e-4)


def test_auto_loss_is_cross_entropy_against_seeded_random_targets_for_logits():
    torch.manual_seed(0)
    table = nn.Embedding(10, 10)  # its output's last dimension is the vocabulary: logits
    tokens = torch.randint(0, 10, (2, 3))
    report = reslint.probe(table, tokens, seed=5)
    targets = torch.randint(0, 10, (2, 3), generator=torch.Generator().manual_seed(5))
    expected = nn.functional.cross_entropy(table(tokens).reshape(-1, 10), targets.reshape(-1))
    assert report.loss_kind == "cross-entropy" and report.loss == pytest.approx(expected.item(), rel=1e-6)
    assert reslint.probe(table, tokens, seed=5).loss == report.loss  # the same targets every time
    assert reslint.probe(table, tokens, loss="random-projection").loss_kind == "random-projection"  # asked for


def test_cross_entropy_may_be_asked_for_on_any_output():
    layer, x = nn.Linear(4, 3), torch.randn(2, 4)
    report = reslint.probe(layer, x, loss="cross-entropy")
    targets = torch.randint(0, 3, (2,), generator=torch.Generator().manual_seed(0))
    assert report.loss_kind == "cross-entropy"
    assert report.loss == pytest.approx(nn.functional.cross_entropy(layer(x), targets).item(), rel=1e-6)


def test_auto_loss_is_a_fixed_random_projection_of_other_outputs():
    torch.manual_seed(0)
    layer, x = nn.Linear(4, 4), torch.randn(2, 4)
    report = reslint.probe(layer, x, seed=3, steps=2)
    direction = torch.randn((2, 4), generator=torch.Generator().manual_seed(3)) / math.sqrt(8)
    expected = (layer(x) * direction).sum().item()
    assert report.loss_kind == "random-projection"
    assert report.losses == pytest.approx([expected, expected], rel=1e-6)  # the same projection at every step
    assert report.parameter("bias").grad_norm == pytest.approx(direction.sum(0).norm().item(), rel=1e-6)


def example(name: str):
    return import_file(ROOT / "examples" / f"{name}.py", f"example_{name}")


def test_auto_loss_gives_a_model_ending_in_a_norm_a_gradient_where_sum_does_not():
    # The sum of a normalised output is a constant: its gradient vanishes by construction, not by depth.
    encoder = example("bert_style").Encoder(vocab_size=100, d_model=32, n_layers=4)
    summed = reslint.probe(encoder, "long[2,16]<100", loss="sum")
    assert summed.codes == ["RL601"] and summed.loss == pytest.approx(0, abs=1e-4)
    auto = reslint.probe(encoder, "long[2,16]<100")
    assert auto.loss_kind == "random-projection" and auto.codes == []
    first, last = auto.block("layers.0").grad_norm, auto.block("layers.3").grad_norm
    assert 0.5 < first / last < 2


def test_a_loss_function_may_take_the_inputs():
    lesson = fixture("lessons_residual")

    def squared(output, h):
        return (output - h).pow(2).sum()

    report = reslint.probe(lesson.with_residual(), lesson.lesson_inputs(), loss=squared)
    assert report.loss_kind.endswith("squared")
    assert report.parameter("layers.0.weight").grad_norm > 0


def test_steps_average_over_fresh_batches():
    lesson = fixture("lessons_residual")
    batches = [torch.randn(2, 4) for _ in range(3)]
    each = [reslint.probe(lesson.with_residual(), batch).parameter("layers.0.weight").grad_norm for batch in batches]
    report = reslint.probe(lesson.with_residual(), lambda step: batches[step], steps=3)
    assert report.parameter("layers.0.weight").grad_norm == pytest.approx(sum(each) / 3, rel=1e-6)
    assert len(report.losses) == 3


def test_dtype_and_shape_spec_inputs():
    module = fixture("healthy_gpt")
    model = module.GPT(module.GPTConfig(n_layer=2))
    report = reslint.probe(model, "long[2,16]<256", dtype="bfloat16")
    assert report.dtype == "bfloat16" and report.codes == []
    assert next(model.parameters()).dtype == torch.bfloat16


@pytest.mark.parametrize(("name", "factory", "inputs", "codes"), [
    ("vanishing_sigmoid_mlp", "DeepSigmoidMLP", None, ["RL601"]),
    ("vanishing_sigmoid_mlp", "ResidualSigmoidMLP", None, []),
    ("exploding_linear_stack", "DeepLinearStack", None, ["RL602"]),
    ("exploding_linear_stack", "ScaledLinearStack", None, []),
    ("unused_module", "Tagger", None, ["RL604", "RL604"]),
    ("healthy_gpt", "GPT", "example_batch", []),
])
def test_fixture_verdicts(name, factory, inputs, codes):
    module = fixture(name)
    model = getattr(module, factory)() if factory != "GPT" else module.GPT(module.GPTConfig())
    report = reslint.probe(model, getattr(module, inputs) if inputs else None)
    assert report.codes == codes


def test_thresholds_are_configurable():
    module = fixture("vanishing_sigmoid_mlp")
    report = reslint.probe(module.DeepSigmoidMLP())
    ratio = report.block("layers.11").grad_norm / report.block("layers.0").grad_norm
    assert report.codes == ["RL601"] and ratio > 1e9
    assert reslint.probe(module.DeepSigmoidMLP(), vanishing_gradient_factor=ratio * 2).codes == []
    healthy = fixture("healthy_gpt")
    strict = reslint.probe(healthy.GPT(healthy.GPTConfig()), healthy.example_batch, vanishing_gradient_factor=1.01,
                           exploding_gradient_factor=1.01, activation_growth_factor=1.01)
    assert strict.codes == ["RL602"]  # Pre-LN: the residual stream grows a little and the first blocks' gradients too


def test_device_errors_are_probe_errors():
    if not torch.cuda.is_available():
        with pytest.raises(ProbeError, match="CUDA is not available"):
            reslint.probe(nn.Linear(2, 2), torch.randn(1, 2), device="cuda")
    with pytest.raises(ProbeError, match="meta device"):
        reslint.probe(nn.Linear(2, 2, device="meta"), torch.randn(1, 2))


def test_out_of_memory_is_reported_with_sizes_and_advice():
    class Hungry(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(1000, 1000)

        def forward(self, x):
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total)")

    with pytest.raises(ProbeError) as caught:
        reslint.probe(Hungry(), "float[8,1000]")
    message = str(caught.value)
    assert message.startswith("out of memory on cpu while running the forward and backward pass; ")
    assert "Hungry: 1.0M parameters, 3.8 MiB of weights in float32" in message
    assert "inputs float[8,1000]" in message and "tried to allocate 2.00 GiB" in message
    assert "--dtype bfloat16" in message and "smaller --inputs" in message


def test_the_device_is_put_back():
    model = nn.Linear(2, 2)
    report = reslint.probe(model, torch.randn(1, 2), device="cpu")
    assert report.device == "cpu" and next(model.parameters()).device.type == "cpu"


def test_importing_reslint_does_not_import_torch():
    script = ("import sys, reslint; assert 'torch' not in sys.modules; assert callable(reslint.probe); "
              "assert 'torch' not in sys.modules; print('ok')")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "ok", result.stderr
    with pytest.raises(AttributeError):
        reslint.no_such_thing  # noqa: B018


def test_the_overhead_bench_reports_what_other_scripts_read(monkeypatch):
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import bench_probe
    finally:
        sys.path.remove(str(ROOT / "bench"))
    for key, value in {"n_layer": 2, "d_model": 32, "vocab_size": 64, "seq": 16, "batch": 2}.items():
        monkeypatch.setitem(bench_probe.CONFIG, key, value)
    result = bench_probe.probe_overhead(repeat=2, memory=False)
    assert {"time_ratio", "memory_ratio", "bare_time_s", "probe_time_s", "cpu_time_ratio"} <= set(result)
    assert result["time_ratio"] == pytest.approx(result["probe_time_s"] / result["bare_time_s"])
    assert "| wall time (median) |" in bench_probe.table(result)
