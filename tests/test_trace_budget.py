"""A data-dependent forward whose draft_export runs past its share of the time left is captured by fx with
concrete values instead (ViLT: 433 s of draft_export), and that capture takes the forwards transformers writes:
a decorator that passes `**kwargs` on (fx stops outside the checked file), a registered buffer sliced and
expanded to `ids.size()`, a layer made inside the forward, an in-place masked assignment."""

from __future__ import annotations

import signal
import textwrap

import pytest

torch = pytest.importorskip("torch")

from reslint.settings import Settings
from reslint.trace import capture as capture_module
from reslint.trace.engine import time_limit, trace_file
from reslint.trace.loader import TraceTimeout

HELPERS = textwrap.dedent('''\
    import functools


    def returns_outputs(forward):
        @functools.wraps(forward)
        def wrapper(self, *args, **kwargs):
            return forward(self, *args, **kwargs)
        return wrapper
''')

MATCHER = textwrap.dedent('''\
    import torch
    import torch.nn as nn

    from helpers import returns_outputs


    class Matcher(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)
            self.norm = nn.LayerNorm(8)
            self.register_buffer("kinds", torch.zeros(1, 32, dtype=torch.long), persistent=False)

        @returns_outputs
        def forward(self, x, **kwargs):
            shape = x.size()
            kinds = self.kinds[:, : shape[1]].expand(shape[0], shape[1])
            h = self.fc(x) + kinds.unsqueeze(-1)
            weights = nn.Softmax(dim=-1)(h)
            weights[weights < 0.01] = 0.0
            if h.sum() > 0:
                return self.norm(x + h * weights)
            return self.norm(x - h)
''')


class Expired(Exception):
    pass


def busy_until_raised() -> None:
    while True:
        sum(range(1000))


def test_an_inner_limit_raises_its_own_error_and_the_outer_runs_on():
    with time_limit(30):
        with pytest.raises(Expired):
            with time_limit(0.05, Expired):
                busy_until_raised()
        left = signal.getitimer(signal.ITIMER_REAL)[0]
        assert 25 < left <= 30  # the outer limit is re-armed with what is left of it
    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0


def test_an_inner_limit_longer_than_the_outer_ends_with_the_outer_error():
    with pytest.raises(TraceTimeout):
        with time_limit(0.05):
            with time_limit(30, Expired):
                busy_until_raised()
    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0


def test_draft_export_past_its_share_falls_back_to_concrete_fx(tmp_path, monkeypatch):
    (tmp_path / "helpers.py").write_text(HELPERS)
    path = tmp_path / "matcher.py"
    path.write_text(MATCHER)
    monkeypatch.setattr(capture_module, "DRAFT_SHARE", 1e-6)  # as for a draft_export of minutes
    result = trace_file(str(path), None, Settings(root=str(tmp_path), timeout=120))
    assert result.findings == []
    [capture] = result.captures
    assert capture.method == "concrete_fx"
    assert capture.notes[0] == "export failed: GuardOnDataDependentSymNode: " + capture.notes[0].split(": ", 2)[2]
    assert any("matcher.py:21" in note for note in capture.notes), capture.notes  # the guard: `if h.sum() > 0`
    targets = [getattr(node.target, "__name__", node.target) for node in capture.graph_module.graph.nodes]
    assert {"expand", "softmax", "setitem", "norm"} <= set(targets), targets


def test_draft_export_within_its_share_is_kept(tmp_path):
    (tmp_path / "helpers.py").write_text(HELPERS)
    path = tmp_path / "matcher.py"
    path.write_text(MATCHER)
    result = trace_file(str(path), None, Settings(root=str(tmp_path), timeout=120))
    assert result.findings == []
    assert [capture.method for capture in result.captures] == ["draft_export"]


SHARED = textwrap.dedent('''\
    import torch
    import torch.nn as nn


    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)
            self.norm = nn.LayerNorm(8)

        def forward(self, x):
            h = self.fc(x)
            if h.sum() > 0:
                return self.norm(x + h)
            return self.norm(x - h)


    class Backbone(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([Block(), Block()])

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x


    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = Backbone()
            self.head = nn.Linear(8, 2)

        def forward(self, x):
            return self.head(self.backbone(x))


    class Regressor(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = Backbone()
            self.head = nn.Linear(8, 1)

        def forward(self, x):
            return self.head(self.backbone(x))
''')


def test_a_backbone_captured_on_cpu_is_replayed_on_cpu_for_its_heads(tmp_path, monkeypatch):
    """ViLT: the backbone's patch selection cannot run on meta, so its heads replay the CPU build it was captured on."""
    path = tmp_path / "shared.py"
    path.write_text(SHARED)
    monkeypatch.setattr(capture_module, "DRAFT_SHARE", 1e-6)
    result = trace_file(str(path), None, Settings(root=str(tmp_path), timeout=120))
    assert result.findings == []
    captured = {capture.model_name: (capture.method, capture.backbone.method) for capture in result.captures}
    assert captured == {"Classifier": ("export", "concrete_fx"), "Regressor": ("export", "concrete_fx")}
