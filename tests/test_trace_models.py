"""Model discovery, construction on the meta device, factories and the isolated import."""

from __future__ import annotations

import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

from reslint.trace.loader import ImportFailed, loaded_module
from reslint.trace.models import (
    build_model,
    discover_models,
    factory_matches,
    outermost,
    split_factory,
)

MODELS = textwrap.dedent('''\
    import dataclasses
    import torch.nn as nn
    from helper_config import SharedConfig


    @dataclasses.dataclass
    class GPTConfig:
        vocab: int = 50
        width: int = 16
        layers: int = 2


    class Block(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.fc = nn.Linear(width, width)

        def forward(self, x):
            return x + self.fc(x)


    class GPT(nn.Module):
        def __init__(self, config: GPTConfig):
            super().__init__()
            self.embed = nn.Embedding(config.vocab, config.width)
            self.blocks = nn.ModuleList([Block(config.width) for _ in range(config.layers)])

        def forward(self, idx):
            x = self.embed(idx)
            for block in self.blocks:
                x = block(x)
            return x


    class Wrapper(nn.Module):
        def __init__(self):
            super().__init__()
            self.gpt = GPT(GPTConfig())

        def forward(self, idx):
            return self.gpt(idx)


    class Huge(nn.Module):
        def __init__(self, cfg: SharedConfig):
            super().__init__()
            self.proj = nn.Linear(cfg.width, cfg.width)

        def forward(self, x):
            return self.proj(x)


    class Abstract(nn.Module):
        pass


    class Gate(nn.Module):
        def __init__(self, fn):
            super().__init__()
            self.fn = fn

        def forward(self, x):
            return self.fn(x) * x
''')


@pytest.fixture
def model_file(tmp_path):
    (tmp_path / "helper_config.py").write_text(
        "class SharedConfig:\n    width = 100_000  # a 10-billion-parameter Linear: meta only\n")
    path = tmp_path / "models.py"
    path.write_text(MODELS)
    return path


def test_discovery_builds_on_meta_and_keeps_the_outermost(model_file, tmp_path):
    with loaded_module(str(model_file), str(tmp_path)) as module:
        specs, skipped = discover_models(module, str(model_file))
        assert [spec.name for spec in specs] == ["Block", "GPT", "Wrapper", "Huge"]
        assert [spec.line for spec in specs] == [13, 22, 35, 44]
        # Block(width): its argument inferred from its name; Gate(fn) wraps a module: nothing to infer
        assert [spec.origin for spec in specs] == ["inferred", "discovered", "discovered", "discovered"]
        assert specs[0].site == "inferred arguments (width=32)"
        assert "needs arguments (fn)" in skipped["Gate"]
        built = [build_model(spec, str(model_file)) for spec in specs]
        assert {item.device for item in built} == {"meta"}
        assert built[0].model.fc.weight.shape == (32, 32)
        huge = built[3].model
        assert huge.proj.weight.shape == (100_000, 100_000) and huge.proj.weight.is_meta
        assert [item.spec.name for item in outermost(built)] == ["Wrapper", "Huge"]


def test_import_is_undone(model_file, tmp_path):
    path_before, modules_before = list(sys.path), set(sys.modules)
    with loaded_module(str(model_file), str(tmp_path)) as module:
        assert module.__name__.startswith("_reslint_trace_") and "helper_config" in sys.modules
        assert str(tmp_path) in sys.path
    assert sys.path == path_before
    assert "helper_config" not in sys.modules and module.__name__ not in sys.modules
    assert not {name for name in set(sys.modules) - modules_before if name.startswith(("_reslint", "helper"))}


def test_import_failure_points_at_the_users_line(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("import torch\n\n\ndef helper():\n    raise RuntimeError('no GPU here\\nsecond line')\n\n\nhelper()\n")
    with pytest.raises(ImportFailed) as caught, loaded_module(str(path), str(tmp_path)):
        pass
    assert caught.value.line == 5
    assert caught.value.message == "importing the file failed: RuntimeError: no GPU here"


def test_factory_specs():
    assert split_factory("model.py:GPT(GPTConfig(n_layer=2))") == ("model.py", "GPT(GPTConfig(n_layer=2))")
    assert split_factory("C:\\src\\model.py:build({'a': 1})") == ("C:\\src\\model.py", "build({'a': 1})")
    assert split_factory("pkg.models:make()") == ("pkg.models", "make()")


def test_factory_matching(tmp_path, monkeypatch):
    (tmp_path / "pkg").mkdir()
    target = tmp_path / "pkg" / "models.py"
    target.write_text("")
    monkeypatch.chdir(tmp_path)
    assert factory_matches("pkg/models.py", str(target), str(tmp_path))
    assert factory_matches("pkg.models", str(target), str(tmp_path))
    assert not factory_matches("other.py", str(target), str(tmp_path))


def test_a_file_without_modules_is_never_imported(tmp_path):
    from reslint.settings import Settings
    from reslint.trace.engine import trace_file

    marker = tmp_path / "imported"
    path = tmp_path / "train.py"
    path.write_text(f"open({str(marker)!r}, 'w').close()\nimport torch\nprint(torch.zeros(1))\n")
    result = trace_file(str(path), path.read_bytes(), Settings(root=str(tmp_path)))
    assert (result.imported, result.findings, marker.exists()) == (False, [], False)


def test_package_modules_keep_their_relative_imports(tmp_path):
    package = tmp_path / "src" / "mypkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "config.py").write_text("WIDTH = 12\n")
    (package / "model.py").write_text(
        "import torch.nn as nn\nfrom .config import WIDTH\n\n\nclass Net(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(WIDTH, WIDTH)\n\n"
        "    def forward(self, x):\n        return x + self.fc(x)\n")
    before = set(sys.modules)
    with loaded_module(str(package / "model.py"), str(tmp_path)) as module:
        assert module.__name__ == "mypkg.model" and module.WIDTH == 12
    assert not {name for name in set(sys.modules) - before if name.startswith("mypkg")}


def test_an_installed_packages_subpackages_do_not_shadow_the_standard_library(tmp_path):
    """torch_geometric has a `profile` subpackage: with the package folder on sys.path, `import cProfile` found it
    instead of the standard `profile` module and every torch-geometric file failed to import."""
    package = tmp_path / "lib" / "site-packages" / "graphpkg"
    (package / "profile").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "profile" / "__init__.py").write_text("")  # no `run`: cProfile's `import profile as _pyprofile` needs it
    (package / "model.py").write_text("import cProfile\n\nRUN = cProfile.run\n")
    with loaded_module(str(package / "model.py"), str(tmp_path)) as module:
        assert module.__name__ == "graphpkg.model" and callable(module.RUN)
