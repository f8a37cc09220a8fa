"""The project stage's files outside the run, reached through a model's classes: read for their model links only
(reslint.project.model_links_result), with a cache section of their own. The real CLI, cache on."""

from __future__ import annotations

from cli_support import codes, run_reslint, write
from reslint.project import Project
from reslint.settings import Settings

POST_LN_BLOCKS = '''\
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ff = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(x + self.ff(x))


class Net(nn.Module):
    def __init__(self, d=32, n=4):
        super().__init__()
        self.blocks = nn.ModuleList([Block(d) for _ in range(n)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


optimizer = torch.optim.Adam(Net().parameters(), lr=1e-3)
'''
OPTIMIZER_LINE = 26

APP = '''\
import torch.nn as nn

from blocks import Net


class App(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = Net()

    def forward(self, x):
        return self.net(x)
'''

TRAIN_APP = '''\
import torch

from app import App

optimizer = torch.optim.Adam(App().parameters(), lr=1e-3)
'''


def check(*paths: str, cwd) -> list[tuple[str, str, int]]:
    result = run_reslint("check", "--static", "--select", "RL301", "--output-format", "json", *paths, cwd=cwd)
    assert result.returncode in (0, 1), result.stderr
    return codes(result.stdout)


def test_a_file_linked_for_its_model_still_reports_its_own_training_code_when_checked_later(tmp_path):
    write(tmp_path, {"blocks.py": POST_LN_BLOCKS, "app.py": APP, "train.py": TRAIN_APP})
    # train.py's model reaches blocks.py: its links are read without its optimizer, and cached apart
    assert check("app.py", "train.py", cwd=tmp_path) == [("train.py", "RL301", 5)]
    assert check("blocks.py", cwd=tmp_path) == [("blocks.py", "RL301", OPTIMIZER_LINE)]


def test_an_edit_to_a_linked_file_between_cached_runs_is_read(tmp_path):
    write(tmp_path, {"blocks.py": POST_LN_BLOCKS.split("\n\noptimizer")[0] + "\n", "app.py": APP,
                     "train.py": TRAIN_APP})
    assert check("app.py", "train.py", cwd=tmp_path) == [("train.py", "RL301", 5)]
    pre_ln = POST_LN_BLOCKS.split("\n\noptimizer")[0].replace("self.norm(x + self.ff(x))", "x + self.ff(self.norm(x))")
    write(tmp_path, {"blocks.py": pre_ln + "\n"})
    assert check("app.py", "train.py", cwd=tmp_path) == []
    write(tmp_path, {"blocks.py": POST_LN_BLOCKS.split("\n\noptimizer")[0] + "\n"})
    assert check("app.py", "train.py", cwd=tmp_path) == [("train.py", "RL301", 5)]


def test_links_read_without_training_code_are_read_again_when_the_training_code_is_asked_for(tmp_path):
    write(tmp_path, {"blocks.py": POST_LN_BLOCKS})
    project = Project(Settings(static=True, cache=False, root=str(tmp_path)))
    display = project.known(tmp_path / "blocks.py")
    model_links = project.links_of(display, training=False)
    assert model_links.optimizers == [] and [block.cls for block in model_links.post_ln_blocks] == ["Block"]
    links = project.links_of(display)
    assert [site.line for site in links.optimizers] == [OPTIMIZER_LINE]
    assert project.links_of(display, training=False) is links
