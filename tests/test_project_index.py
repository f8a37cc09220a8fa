"""reslint.project_index: the one import resolver (the files a file imports, what a name resolves to,
where a class is built, what the trace loader puts on sys.path), read statically."""

from __future__ import annotations

from pathlib import Path

from cli_support import write

from reslint.project_index import ProjectIndex


def deps(root: Path, path: str) -> list[str]:
    return [found.relative_to(root).as_posix() for found in ProjectIndex.for_file(root / path, root).dependencies(root / path)]


def test_a_script_imports_its_neighbours_transitively(tmp_path):
    write(tmp_path, {
        "train.py": "import torch\nfrom model import GPT\nimport config as cfg\n",
        "model.py": "from layers import Block\nimport os\n",
        "layers.py": "def helper():\n    import norms  # an import inside a function counts too\n",
        "norms.py": "",
        "config.py": "",
        "unrelated.py": "",
    })
    assert deps(tmp_path, "train.py") == ["config.py", "layers.py", "model.py", "norms.py"]
    assert deps(tmp_path, "norms.py") == []


def test_packages_run_their_init_files_and_from_imports_may_name_submodules(tmp_path):
    write(tmp_path, {
        "run.py": "import pkg.sub.mod\nfrom pkg import tools\nfrom pkg.sub import helper as h, CONSTANT\n",
        "pkg/__init__.py": "",
        "pkg/tools.py": "",
        "pkg/sub/__init__.py": "CONSTANT = 1\n",
        "pkg/sub/mod.py": "",
        "pkg/sub/helper.py": "",
        "pkg/sub/unused.py": "",
    })
    assert deps(tmp_path, "run.py") == [
        "pkg/__init__.py", "pkg/sub/__init__.py", "pkg/sub/helper.py", "pkg/sub/mod.py", "pkg/tools.py",
    ]


def test_relative_imports_resolve_from_the_importing_file(tmp_path):
    write(tmp_path, {
        "src/lib/__init__.py": "",
        "src/lib/models/__init__.py": "from .gpt import GPT\n",
        "src/lib/models/gpt.py": "from ..nn import layers\nfrom . import blocks\nfrom .. import util\n",
        "src/lib/models/blocks.py": "",
        "src/lib/nn/__init__.py": "",
        "src/lib/nn/layers.py": "",
        "src/lib/util.py": "",
    })
    # Checking gpt.py imports it as lib.models.gpt: lib/__init__ and lib/models/__init__ run first.
    assert deps(tmp_path, "src/lib/models/gpt.py") == [
        "src/lib/__init__.py", "src/lib/models/__init__.py", "src/lib/models/blocks.py",
        "src/lib/nn/__init__.py", "src/lib/nn/layers.py", "src/lib/util.py",
    ]


def test_namespace_packages_and_the_project_root_on_the_search_path(tmp_path):
    write(tmp_path, {
        "common/shapes.py": "",  # no __init__.py: a namespace package
        "scripts/check.py": "from common import shapes\nimport common.shapes\n",
    })
    assert deps(tmp_path, "scripts/check.py") == ["common/shapes.py"]


def test_only_files_under_the_root_count_and_broken_files_do_not_stop_it(tmp_path):
    root = tmp_path / "project"
    write(tmp_path, {"external.py": "", "project/pkg/__init__.py": ""})
    write(root, {
        "pkg/main.py": "import broken\nimport missing_module\nimport json\nfrom ... import external\n",
        "pkg/broken.py": "def (:\n",
        "pkg/json.py": "",  # shadows the standard library here, as it would at run time
    })
    assert (tmp_path / "external.py").is_file()
    assert deps(root, "pkg/main.py") == ["pkg/__init__.py", "pkg/broken.py", "pkg/json.py"]


def test_import_cycles_end(tmp_path):
    write(tmp_path, {"a.py": "import b\n", "b.py": "import a\nimport c\n", "c.py": "from a import x\n"})
    assert deps(tmp_path, "a.py") == ["b.py", "c.py"]
