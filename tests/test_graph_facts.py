"""Trace engine, graph → facts: real torch.export graphs of small models, exact placements and shapes."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from cli_support import import_file

torch = pytest.importorskip("torch")
nn = torch.nn

from reslint.placement import residual_placement  # noqa: E402
from reslint.rules import run_rules  # noqa: E402
from reslint.settings import Settings  # noqa: E402
from reslint.trace.eager import failing_add  # noqa: E402
from reslint.trace.graph_facts import facts_from_capture  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
LESSON = ROOT / "fixtures" / "lessons" / "sublayer_connection.py"
TRACE = ROOT / "fixtures" / "trace"


@dataclass
class Capture:
    graph_module: object
    model: object
    model_name: str
    class_line: int = 1
    method: str = "export"
    notes: list = field(default_factory=list)


def load(path: Path):
    return import_file(path, "_gf_" + "_".join(path.with_suffix("").parts[-2:]))


def capture(model, args, kwargs=None, path="model.py", class_line=1, module_form=False):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exported = torch.export.export(model, args, kwargs or {}, strict=False)
    graph = exported.module() if module_form else exported.graph_module
    cap = Capture(graph, model, type(model).__name__, class_line)
    return facts_from_capture(cap, str(path))


def codes(facts):
    return sorted(f.code for f in run_rules(facts, Settings()))


def placements(facts):
    return [residual_placement(add) for add in facts.residuals]


def ids(batch=2, length=8):
    return torch.zeros(batch, length, dtype=torch.long, device="meta")


# ----- the lesson --------------------------------------------------------------------------------


@pytest.mark.parametrize("name, placement, line", [
    ("SublayerConnectionPostLN", "post", 14), ("SublayerConnectionPreLN", "pre", 25)])
def test_lesson_sublayer_connections(name, placement, line, monkeypatch):
    monkeypatch.chdir(ROOT)  # the display path is relative to the working directory
    lesson = load(LESSON)

    class Wrapper(nn.Module):
        def __init__(self):
            super().__init__()
            self.conn = getattr(lesson, name)(16, 0.1)
            self.ff = lesson.PositionwiseFeedForward(16, 64)

        def forward(self, x):
            return self.conn(x, self.ff)

    facts = capture(Wrapper(), (torch.zeros(2, 5, 16),), path=LESSON.relative_to(ROOT))
    [add] = facts.residuals
    assert (add.placement, add.block, add.span.line) == (placement, name, line)
    assert add.span.path == "fixtures/lessons/sublayer_connection.py"
    assert add.skip_shape == add.branch_shape == (2, 5, 16)
    assert codes(facts) == (["RL101"] if placement == "post" else [])


# ----- hand-written models -----------------------------------------------------------------------


@pytest.mark.parametrize("module_form", [False, True])
def test_gpt_like_pre_ln_stack_with_final_norm(module_form):
    fixture = load(TRACE / "gpt_pre_ln.py")
    with torch.device("meta"):
        model = fixture.GPT(n_layer=3)
    facts = capture(model, (ids(2, 8),), path=TRACE / "gpt_pre_ln.py", module_form=module_form)
    assert placements(facts) == ["pre"] * 6
    assert {(a.block, a.stack, a.span.line) for a in facts.residuals} == {
        ("Block", "GPT.blocks", 26), ("Block", "GPT.blocks", 27)}
    stack = facts.stacks["GPT.blocks"]
    assert (stack.depth, stack.final_norm, stack.block_classes, stack.span.line) == (3, True, ("Block",), 36)
    assert facts.stack_placement("GPT.blocks") == "pre"
    assert codes(facts) == []


def test_missing_final_norm_is_found():
    fixture = load(TRACE / "gpt_pre_ln.py")
    with torch.device("meta"):
        model = fixture.GPT(n_layer=2)
    model.ln_f = nn.Identity()
    facts = capture(model, (ids(2, 8),), path=TRACE / "gpt_pre_ln.py")
    assert facts.stacks["GPT.blocks"].final_norm is False
    assert codes(facts) == ["RL103"]


def test_broadcast_branch_is_rl002_with_both_shapes():
    fixture = load(TRACE / "shape_errors.py")
    with torch.device("meta"):
        model = fixture.ScoreResidual()
    facts = capture(model, (torch.zeros(2, 16, 16, device="meta"),),
                    path=TRACE / "shape_errors.py")
    [add] = facts.residuals
    assert (add.skip_shape, add.branch_shape, add.broadcast) == ((2, 16, 16), (2, 16, 1), "(2, 16, 16) + (2, 16, 1)")
    [finding] = run_rules(facts, Settings())
    assert (finding.code, finding.line, finding.column) == ("RL002", 25, 16)
    assert "(2, 16, 16) + (2, 16, 1)" in finding.message


def test_width_mismatch_is_rl001_with_both_shapes():
    fixture = load(TRACE / "shape_errors.py")
    path = TRACE / "shape_errors.py"
    with torch.device("meta"):
        model = fixture.FeedForwardPlusOne()
    inputs = (torch.zeros(2, 16, 16, device="meta"),)
    with pytest.raises(Exception):
        capture(model, inputs, path=path)
    add = failing_add(model, inputs, path=str(path))
    assert add is not None
    assert (add.span.line, add.span.column, add.block) == (13, 16, "FeedForwardPlusOne")
    assert (add.skip_shape, add.branch_shape) == ((2, 16, 16), (2, 16, 17))
    from reslint.facts import FileFacts

    [finding] = run_rules(FileFacts(path=str(path), engine="trace", residuals=[add]), Settings())
    assert finding.code == "RL001" and "(2, 16, 16) + (2, 16, 17)" in finding.message


def test_no_failing_add_when_the_forward_runs():
    fixture = load(TRACE / "shape_errors.py")
    assert failing_add(fixture.ScoreResidual(), (torch.zeros(2, 16, 16),), path=str(TRACE / "shape_errors.py")) \
        is None


def test_batchnorm_over_token_activations_is_rl201():
    fixture = load(TRACE / "batchnorm_sequence.py")
    model = fixture.TokenBatchNorm()
    facts = capture(model, (torch.zeros(4, 8, dtype=torch.long),), path=TRACE / "batchnorm_sequence.py")
    [norm] = facts.norms
    assert (norm.kind, norm.variant, norm.in_sequence_model, norm.span.line) == ("batchnorm", "BatchNorm1d", True, 9)
    assert "RL201" in codes(facts)


def test_non_residual_adds_are_ignored():
    class Rotary(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = nn.Linear(16, 16)
            self.tok = nn.Embedding(50, 16)
            self.pos = nn.Embedding(8, 16)

        def forward(self, ids, mask):
            x = self.tok(ids) + self.pos(torch.arange(ids.shape[1]))  # embedding sum
            q = self.q(x)
            cos, sin = torch.cos(q), torch.sin(q)
            half = torch.cat([-q[..., 8:], q[..., :8]], dim=-1)
            q = q * cos + half * sin  # rotary
            g = q + 0.044715 * q ** 3  # GELU polynomial
            scores = q @ q.transpose(-1, -2) + mask  # attention mask
            return scores.softmax(-1) @ g

    facts = capture(Rotary(), (torch.zeros(2, 8, dtype=torch.long), torch.zeros(8, 8)))
    assert facts.residuals == []


@pytest.mark.parametrize("name, inputs, residual_lines", [
    # The text mask reaches the image tower's cross-attention scores (line 51) through the text stream.
    ("TwoTower", lambda: (torch.randint(0, 32, (2, 16)),), [64, 64, 65, 65]),
    # loc reaches the forecast through the normalised series: `y_hat * scale + loc` (line 112) is no residual.
    ("Forecaster", lambda: (torch.randn(2, 16, 4),), [94, 94]),
])
def test_broadcast_mask_and_statistics_are_not_residuals(name, inputs, residual_lines):
    path = TRACE / "broadcast_terms.py"
    model = getattr(load(path), name)()
    facts = capture(model, inputs(), path=path)
    assert [add.span.line for add in facts.residuals] == residual_lines
    assert [add.broadcast for add in facts.residuals] == [""] * len(residual_lines)
    assert "RL002" not in codes(facts)


def test_pooled_context_added_to_every_position_is_rl002():
    path = TRACE / "broadcast_terms.py"
    facts = capture(load(path).ContextMixer(), (torch.randn(2, 16, 4),), path=path)
    [finding] = [f for f in run_rules(facts, Settings()) if f.code == "RL002"]
    assert (finding.line, finding.column, finding.symbol) == (117, 16, "ContextLayer")
    assert "(2, 16, 16) + (2, 1, 16)" in finding.message


def test_cls_query_block_read_only_at_its_row_is_not_rl002():
    """rtdl's FT-Transformer: the last block's branch is the [CLS] row's update, `(2, 1, 16)`, repeated over
    the tokens by the add; only `x[:, 0]` is read afterwards (through the ReGLU feed-forward)."""
    path = TRACE / "cls_query.py"
    facts = capture(load(path).Classifier(), (torch.randn(2, 16, 16),), path=path)
    [last] = [add for add in facts.residuals if add.branch_shape == (2, 1, 16)]
    assert (last.span.line, last.skip_shape, last.broadcast) == (46, (2, 16, 16), "")
    assert codes(facts) == []


@pytest.mark.parametrize("name, line", [
    ("KeptRows", 68),  # every row is read (a mean over tokens)
    ("OtherRow", 80),  # the query is row 0, the kept row the last
    ("PooledContext", 93),  # the branch is one pooled vector, not a row's own update
])
def test_broadcast_rows_that_are_read_stay_rl002(name, line):
    path = TRACE / "cls_query.py"
    facts = capture(getattr(load(path), name)(), (torch.randn(2, 16, 16),), path=path)
    [finding] = [f for f in run_rules(facts, Settings()) if f.code == "RL002"]
    assert (finding.line, finding.column, finding.symbol) == (line, 17, name)
    assert "(2, 16, 16) + (2, 1, 16)" in finding.message


def test_cls_query_block_in_an_fx_graph_is_not_rl002():
    """The same model traced by torch.fx (layers as leaves, `x[:, :1]` and `x[:, 0]` as getitem of slices)."""
    from reslint.trace.concrete_fx import concrete_trace

    path = TRACE / "cls_query.py"
    module = load(path)
    for name, found in (("Classifier", []), ("OtherRow", ["RL002"])):
        model = getattr(module, name)().eval()
        graph = concrete_trace(model, {"x": torch.randn(2, 16, 16)})
        facts = facts_from_capture(Capture(graph, model, name, method="concrete_fx"), str(path))
        assert [add.span.line for add in facts.residuals if add.branch_shape == (2, 1, 16)] == [
            46 if name == "Classifier" else 80]
        assert codes(facts) == found


def test_deepnorm_and_rezero():
    class DeepNormBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.ff = nn.Linear(16, 16)
            self.norm = nn.LayerNorm(16)
            self.alpha = nn.Parameter(torch.zeros(()))

        def forward(self, x):
            x = self.norm(2.0 * x + self.ff(x))
            return x + self.alpha * self.ff(x)

    facts = capture(DeepNormBlock(), (torch.zeros(2, 4, 16),))
    first, second = facts.residuals
    assert residual_placement(first) == "deepnorm"
    assert second.gated_branch and second.placement == "none"


# ----- real transformers models and torch's own encoder ----------------------------------------


def _tiny(name):
    transformers = pytest.importorskip("transformers")
    common = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, vocab_size=100)
    if name == "gpt2":
        config = transformers.GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=100, n_positions=64,
                                         bos_token_id=0, eos_token_id=0)
        cls = transformers.GPT2Model
    elif name == "bert":
        config, cls = transformers.BertConfig(**common), transformers.BertModel
    elif name == "llama":
        config, cls = transformers.LlamaConfig(num_key_value_heads=2, **common), transformers.LlamaModel
    else:
        config = transformers.GPTNeoXConfig(use_parallel_residual=True, **common)
        cls = transformers.GPTNeoXModel
    config.use_cache = False
    with torch.device("meta"):
        model = cls(config)
    kwargs = {} if name == "bert" else {"use_cache": False}
    return model, kwargs


@pytest.mark.parametrize("name, key, block, placement, per_block, final_norm", [
    ("bert", "BertEncoder.layer", "BertLayer", "post", 2, True),
    ("gpt2", "GPT2Model.h", "GPT2Block", "pre", 2, True),
    ("llama", "LlamaModel.layers", "LlamaDecoderLayer", "pre", 2, True),
    ("neox", "GPTNeoXModel.layers", "GPTNeoXLayer", "parallel-pre", 1, True),
])
def test_transformers_models(name, key, block, placement, per_block, final_norm):
    model, kwargs = _tiny(name)
    facts = capture(model, (ids(2, 8),), kwargs, path=__file__, class_line=7)
    stack = facts.stacks[key]
    assert (stack.depth, stack.block_classes) == (2, (block,))
    assert facts.stack_placement(key) == placement
    assert [residual_placement(a) for a in facts.residuals] == [placement] * (2 * per_block)
    assert all(a.stack == key and a.skip_shape == a.branch_shape == (2, 8, 32) for a in facts.residuals)
    assert all(a.span.path == __file__ and a.span.line == 7 for a in facts.residuals)  # never a transformers line
    if placement != "post":
        assert stack.final_norm is final_norm
    found = codes(facts)
    assert not {"RL001", "RL002", "RL103"} & set(found)
    assert found == (["RL101"] if placement == "post" else [])


class TorchEncoder(nn.Module):
    def __init__(self, norm_first):
        super().__init__()
        layer = nn.TransformerEncoderLayer(32, 2, 64, batch_first=True, norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, 3, norm=nn.LayerNorm(32) if norm_first else None,
                                             enable_nested_tensor=False)

    def forward(self, x):
        return self.encoder(x)


@pytest.mark.parametrize("norm_first", [False, True])
def test_torch_transformer_encoder(norm_first):
    with torch.device("meta"):
        model = TorchEncoder(norm_first)
    facts = capture(model, (torch.zeros(2, 8, 32, device="meta"),), path=__file__)
    placement = "pre" if norm_first else "post"
    assert [a.placement for a in facts.residuals] == [placement] * 6
    assert {a.block for a in facts.residuals} == {"nn.TransformerEncoderLayer"}
    layer_line = TorchEncoder.__init__.__code__.co_firstlineno + 2
    assert {a.span.line for a in facts.residuals} == {layer_line}  # the user's layer, not torch's code
    assert facts.stacks["TorchEncoder.encoder"].iteration.line == TorchEncoder.forward.__code__.co_firstlineno + 1
    stack = facts.stacks["TorchEncoder.encoder"]
    assert (stack.depth, stack.block_classes) == (3, ("nn.TransformerEncoderLayer",))
    assert stack.span.line == TorchEncoder.__init__.__code__.co_firstlineno + 3
    found = codes(facts)
    assert not {"RL001", "RL002", "RL103"} & set(found)
    assert found == ([] if norm_first else ["RL101"])


def test_deep_graph_stays_fast():
    import time

    fixture = load(TRACE / "gpt_pre_ln.py")
    with torch.device("meta"):
        model = fixture.GPT(n_layer=40, d_model=64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exported = torch.export.export(model, (ids(1, 8),), strict=False)
    start = time.perf_counter()
    facts = facts_from_capture(Capture(exported.graph_module, model, "GPT"), str(TRACE / "gpt_pre_ln.py"))
    assert time.perf_counter() - start < 5
    assert len(facts.residuals) == 80 and facts.stacks["GPT.blocks"].depth == 40
