"""Constructor arguments the full check infers for models no construction site builds: the names it
reads, the models it builds from them (real CLI subprocess, real torch tracing) and what the summary says."""

from __future__ import annotations

import inspect
import json
import textwrap

import pytest
from cli_support import REPO_ROOT, run_reslint, write

torch = pytest.importorskip("torch")

from reslint.trace.constructor_arguments import NOT_INFERRED, convention, inferred_arguments  # noqa: E402


@pytest.mark.parametrize(("name", "value"), [
    ("dim", 32), ("d_model", 32), ("hidden_size", 32), ("n_audio_state", 32), ("size", 32), ("chan_in", 32), ("normalized_shape", 32),
    ("depth", 2), ("num_layers", 2), ("n_text_layer", 2), ("elayers", 2),
    ("heads", 4), ("n_head", 4), ("num_attention_heads", 4), ("nhead", 4), ("dim_head", 8),
    ("num_tokens", 256), ("vocab_size", 256), ("num_classes", 10), ("max_seq_len", 32), ("n_audio_ctx", 32),
    ("mlp_dim", 64), ("ff_size", 64), ("dim_feedforward", 64), ("mult", 2), ("mlp_ratio", 2),
    ("dropout", 0.0), ("attention_dropout_rate", 0.0), ("n_mels", 16), ("idim", 16), ("kernel_size", 3),
    ("image_size", 32), ("patch_size", 4), ("layernorm_eps", 1e-5), ("activation_fn", "gelu"),
    # a submodule to wrap, a flag, a mode: nothing to guess
    ("fn", NOT_INFERRED), ("encoder_layer", NOT_INFERRED), ("causal", NOT_INFERRED), ("norm_type", NOT_INFERRED),
])
def test_a_parameter_name_gives_a_small_value(name, value):
    assert convention(name, image_model=False) == value


def test_channels_of_an_image_model_are_colour_channels():
    assert convention("channels", image_model=True) == 3
    assert convention("channels", image_model=False) == 32


def test_a_module_typed_or_unnamed_parameter_is_not_guessed():
    class Wrapper(torch.nn.Module):
        def __init__(self, dim, block: torch.nn.Linear):
            super().__init__()

    class Mode(torch.nn.Module):
        def __init__(self, dim, kind):
            super().__init__()

    class Activated(torch.nn.Module):
        def __init__(self, dim, activation: type):
            super().__init__()

    assert inferred_arguments(Wrapper, {}) is None
    assert inferred_arguments(Mode, {}) is None
    assert inferred_arguments(Activated, {}) is None  # an activation class, not a name


def test_arguments_passed_on_through_kwargs_are_the_base_class_arguments():
    class Layers(torch.nn.Module):
        def __init__(self, dim, depth=None, heads=8, causal=False):
            super().__init__()

    class Encoder(Layers):
        def __init__(self, **kwargs):
            super().__init__(causal=False, **kwargs)

    assert inferred_arguments(Encoder, {}) == ({"dim": 32}, [])


def test_zero_widths_are_placeholders_and_the_depth_is_reported_inferred():
    class Layer(torch.nn.Module):
        def __init__(self, size: int = 0, num_heads: int = 0, num_layers: int = 0, dropout: float = 0.1):
            super().__init__()

    class Stack(torch.nn.Module):
        def __init__(self, dim, num_layers, bias=True):
            super().__init__()

    # a depth of 0 may mean "no extra layers": only widths, head counts and vocabularies are placeholders
    assert inferred_arguments(Layer, {}) == ({"size": 32, "num_heads": 4}, [])
    assert inferred_arguments(Stack, {}) == ({"dim": 32, "num_layers": 2}, ["num_layers"])
    assert inspect.signature(Stack).parameters["bias"].default is True


def check(path: str, cwd=REPO_ROOT) -> dict:
    done = run_reslint("check", "--no-cache", "--jobs", "1", "--output-format", "json", path, cwd=cwd)
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


def test_library_models_are_built_from_inferred_arguments_and_traced():
    document = check("fixtures/trace/inferred_arguments.py")
    assert [(t["name"], t["traced"]) for t in document["traces"]] == [("TokenTransformer", True),
                                                                        ("PlaceholderLayer", True)]
    models = {model["name"]: model for model in document["models"]}
    token = models["TokenTransformer"]
    assert token["built_from"] == ("inferred arguments (num_tokens=256, max_seq_len=32, dim=32, depth=2, heads=4, "
                                   "mlp_dim=64)")
    assert token["engine"] == "traced (fx)"
    # the depth is reslint's guess: the stack reports none, so no depth-based finding can come from it
    assert [(s["attribute"], s["depth"], s["placement"], s["final_norm"]) for s in token["stacks"]] == [
        ("self.blocks", None, "pre", False)]
    assert "its stacks' depth is unknown (inferred: depth)" in token["notes"]
    assert "inputs: long[2,16]<256 (inferred from the forward's `tokens` and the first nn.Embedding)" in token["notes"]
    assert models["PlaceholderLayer"]["built_from"] == "inferred arguments (size=32, ff_size=64, num_heads=4)"
    assert [(f["code"], f["line"], f["engine"]) for f in document["findings"]] == [
        ("RL103", 69, "trace"), ("RL101", 84, "trace"), ("RL101", 85, "trace")]


def test_a_dataclass_of_dimensions_is_built_from_its_fields_and_token_inputs_are_ids():
    document = check("fixtures/trace/inferred_dims.py")
    [model] = document["models"]
    assert model["built_from"] == ("inferred arguments (dims=Dimensions(n_mels=16, n_audio_ctx=32, n_audio_state=32, "
                                   "n_audio_head=4, n_audio_layer=2, n_vocab=256, n_text_ctx=32))")
    assert model["engine"] == "traced (export)"
    assert "inputs: float[2,16,64]; tokens=long[2,16]<256 (inferred from Conv1d (conv1))" in model["notes"]
    assert [(s["attribute"], s["depth"], s["final_norm"]) for s in model["stacks"]] == [
        ("self.decoder", None, False), ("self.encoder", None, True)]
    assert [(f["code"], f["line"], f["engine"]) for f in document["findings"]] == [("RL103", 57, "trace")]


def test_a_failed_guess_is_info_naming_the_inferred_arguments(tmp_path):
    write(tmp_path, {"model.py": textwrap.dedent('''\
        import torch.nn as nn


        class Grouped(nn.Module):
            def __init__(self, dim, heads):
                super().__init__()
                assert dim % 3 == 0, "dim must split into three groups"
                self.proj = nn.Linear(dim, dim)

            def forward(self, x):
                return x + self.proj(x)
        ''')})
    document = check("model.py", cwd=tmp_path)
    [finding] = document["findings"]
    assert (finding["code"], finding["severity"], finding["line"]) == ("RL902", "info", 7)
    assert finding["message"] == (
        "cannot build Grouped: AssertionError: dim must split into three groups (reslint built it from inferred "
        "arguments (dim=32, heads=4); pass --model FILE:EXPR to build it yourself); static findings are still reported")


def test_annotations_give_shapes_literals_enums_and_project_modules():
    import enum
    from typing import Literal

    class Kind(enum.Enum):
        GRU = "gru"
        LSTM = "lstm"

    class Cache(torch.nn.Module):
        def __init__(self, k_shape: tuple[int, int, int, int], mode: Literal["fifo", "ring"], kind: Kind):
            super().__init__()

    class Base(torch.nn.Module):  # no forward of its own: its subclass is built
        pass

    class Concrete(Base):
        def __init__(self, dim):
            super().__init__()

        def forward(self, x):
            return x

    class Head(torch.nn.Module):
        def __init__(self, body: Base, wrapped: torch.nn.Linear = None):
            super().__init__()

    namespace = {"Kind": Kind, "Base": Base}  # the module's names (this file's annotations are strings)
    assert inferred_arguments(Cache, namespace) == (
        {"k_shape": (32, 32, 32, 32), "mode": "fifo", "kind": Kind.GRU}, [])
    arguments, _ = inferred_arguments(Head, namespace)
    assert repr(arguments["body"]) == "Concrete(dim=32)"  # torch's own classes stay unguessed (`wrapped`)
