"""The full check without repeated work: what each trace child would import or compute on its own is done
once in the parent, before it forks them (reslint.analysis.warm_for_tracing), no torch._dynamo import
for weight initialisation on meta (reslint.trace.meta_init), the source index splits a file once
(reslint.trace.source_index), and a forked child does not walk the parent's objects (reslint.isolation)."""

from __future__ import annotations

import ast
import gc
import subprocess
import sys
import textwrap

import pytest

from golden import ROOT
from reslint.trace.source_index import source_segments


def test_source_segments_are_ast_get_source_segment():
    text = ("x = 1\r\ny = (a +\r b)\n\x0cz = 'é' + \"ü\"\nw = f(\n    1,\n    2)\nv = [\n  'α' +\n  'β']")
    tree = ast.parse(text)
    segment = source_segments(text)
    nodes = [node for node in ast.walk(tree) if hasattr(node, "lineno")]
    assert len(nodes) > 20
    assert [segment(node) for node in nodes] == [ast.get_source_segment(text, node) for node in nodes]
    assert segment(ast.parse("pass")) is None  # a node without a place


def run_python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_building_on_meta_does_not_import_dynamo():
    """nn.Embedding's normal_ on meta imports torch._dynamo (1.6 CPU-s); the values of meta tensors do
    not exist, so their initialisation is skipped while models are built there, and only there."""
    pytest.importorskip("torch")
    out = run_python("""
        import sys, torch
        from reslint.trace.meta_init import skipped_meta_init
        with torch.device("meta"), skipped_meta_init():
            embedding = torch.nn.Embedding(100, 8)
            other = torch.empty(4, 4)
            torch.nn.init.trunc_normal_(other, std=0.02)
            other.normal_(0.0, 1.0)
        real = torch.zeros(1000)
        with skipped_meta_init():
            torch.nn.init.normal_(real)
            torch.nn.init.normal_(tensor=real)
        print(tuple(embedding.weight.shape), embedding.weight.is_meta, "torch._dynamo" in sys.modules,
              bool(real.abs().sum() > 0))
    """)
    assert out == "(100, 8) True False True"


def test_the_parent_warms_up_what_its_trace_children_need():
    """Before the first trace child forks, the parent imports torch's symbolic shapes (every meta kernel's
    `torch._check` needs them) but not dynamo, which a child the fast path serves never needs; once a child
    needed torch.export, the parent warms export up before the next child, which then starts warm."""
    pytest.importorskip("torch")
    out = run_python("""
        import sys
        from reslint.analysis import analyze_file
        from reslint.settings import Settings

        def check(relative):
            settings = Settings(static=False, cache=False, root=".")
            return analyze_file(relative, open(relative, "rb").read(), settings)

        def warm():
            return "torch._export.non_strict_utils" in sys.modules

        first = check("examples/tiny_gpt.py")  # the fast path: no export in the child
        after_fast = ("torch._dynamo" in sys.modules, "torch.fx.experimental.symbolic_shapes" in sys.modules, warm())
        second = check("fixtures/builtin/torch_transformer.py")  # exported by its child
        after_export = warm()
        third = check("fixtures/builtin/torch_transformer.py")
        print(after_fast, after_export, warm(), *(sorted({model.engine for model in result.models})
                                                   for result in (first, second, third)))
    """)
    assert out == "(False, True, False) False True ['traced (fx)'] ['traced (export)'] ['traced (export)']"


def test_meta_kernels_run_without_dynamo_and_export_wraps_them_as_before():
    """torch's elementwise meta kernels are Python references whose first call imports dynamo (1.3 CPU-s)
    only to wrap them against compilation: within refs_without_dynamo a model runs on meta without it, and
    after it the references are torch's own again (export then imports dynamo and wraps them)."""
    pytest.importorskip("torch")
    out = run_python("""
        import sys, torch
        from reslint.trace.meta_init import CACHED_WRAPPER, disabled_references, refs_without_dynamo, skipped_meta_init

        with torch.device("meta"), skipped_meta_init():
            layer = torch.nn.TransformerEncoderLayer(16, 4, 32, batch_first=True)
            x = torch.empty(2, 8, 16)
        with refs_without_dynamo():
            y = layer(x) + torch.arange(16, device="meta")
        left = [function for function in disabled_references() if CACHED_WRAPPER in function.__dict__]
        print(len(disabled_references()) > 50, tuple(y.shape), y.is_meta, "torch._dynamo" in sys.modules, len(left))
        z = torch.empty(2, 8, 16, device="meta") + x
        print("torch._dynamo" in sys.modules)
    """)
    assert out == "True (2, 8, 16) True False 0\nTrue"


def test_the_parent_collects_its_garbage_again_after_forking_a_child():
    """gc.freeze() spares the child a walk over the parent's objects; the parent unfreezes them after the fork."""
    from reslint.isolation import run_isolated

    assert run_isolated(len, [1, 2, 3], timeout=60) == 3
    assert gc.get_freeze_count() == 0
