from __future__ import annotations

from pathlib import Path

import pytest

from cli_support import BATCHNORM, POST_LN, codes, run_reslint, write
from reslint.catalog import RULES
from reslint.config import ConfigError, Overrides, find_config, load_settings
from reslint.errors import UsageError
from reslint.settings import ModelFactory

FULL_CONFIG = '''\
[project]
name = "demo"

[tool.reslint]
select = ["RL1", "RL201"]
ignore = ["RL104"]
fail-on = "error"
exclude = ["generated", "legacy/*.py"]
norm-placement = "pre"
deep-post-ln-layers = 12
train = ["train*.py", "scripts/**/*.py"]
vanishing-gradient-factor = 1000
exploding-gradient-factor = 50.5
activation-growth-factor = 20

[tool.reslint.per-file-ignores]
"tests/*" = ["RL2"]
"__init__.py" = ["RL101", "RL102"]

[[tool.reslint.models]]
factory = "model.py:GPT(GPTConfig())"
inputs = "long[2,64]<50257"

[[tool.reslint.models]]
factory = "pkg.models:build()"
'''


def settings_for(directory: Path, text: str | None = None, overrides: Overrides = Overrides(), config: str | None = None):
    if text is not None:
        (directory / "pyproject.toml").write_text(text)
    return load_settings(directory, config, overrides)


def config_error(directory: Path, table: str) -> str:
    with pytest.raises(ConfigError) as caught:
        settings_for(directory, "[tool.reslint]\n" + table)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_every_key_is_parsed(tmp_path):
    settings = settings_for(tmp_path, FULL_CONFIG)
    assert settings.select == frozenset({"RL101", "RL102", "RL103", "RL104", "RL201"})
    assert settings.ignore == frozenset({"RL104"})
    assert settings.fail_on == "error"
    assert settings.exclude == ("generated", "legacy/*.py")
    assert settings.per_file_ignores == (
        ("tests/*", frozenset({"RL201"})),
        ("__init__.py", frozenset({"RL101", "RL102"})),
    )
    assert settings.norm_placement == "pre"
    assert settings.deep_post_ln_layers == 12
    assert settings.train == ("train*.py", "scripts/**/*.py")
    assert (settings.vanishing_gradient_factor, settings.exploding_gradient_factor,
            settings.activation_growth_factor) == (1000.0, 50.5, 20.0)
    assert settings.models == (
        ModelFactory("model.py:GPT(GPTConfig())", "long[2,64]<50257"),
        ModelFactory("pkg.models:build()", None),
    )
    assert settings.root == str(tmp_path)


def test_defaults_without_any_config(tmp_path):
    settings = settings_for(tmp_path)
    assert settings.select == frozenset() and settings.ignore == frozenset()
    assert settings.fail_on == "warning"
    assert settings.norm_placement == "any"
    assert settings.deep_post_ln_layers == 20
    assert settings.vanishing_gradient_factor == settings.exploding_gradient_factor == 100.0
    assert settings.activation_growth_factor == 100.0
    assert settings.root == str(tmp_path)


def test_nearest_pyproject_with_a_reslint_table_wins_walking_up(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.reslint]\nfail-on = 'info'\n")
    nested = tmp_path / "pkg" / "sub"
    nested.mkdir(parents=True)
    (tmp_path / "pkg" / "pyproject.toml").write_text("[project]\nname = 'no-reslint-table'\n")
    assert find_config(nested) == tmp_path / "pyproject.toml"
    settings = load_settings(nested, None, Overrides())
    assert settings.fail_on == "info"
    assert settings.root == str(tmp_path)


def test_explicit_config_file_pyproject_or_top_level_toml(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.reslint]\nfail-on = 'info'\n")
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "reslint.toml").write_text("fail-on = 'error'\nselect = ['RL2']\n")
    settings = load_settings(tmp_path, "ci/reslint.toml", Overrides())
    assert settings.fail_on == "error"
    assert settings.select == frozenset({"RL201"})
    assert settings.root == str(tmp_path / "ci")
    assert load_settings(tmp_path / "ci", "../pyproject.toml", Overrides()).fail_on == "info"


def test_cli_flags_override_the_file(tmp_path):
    overrides = Overrides(select=("RL2",), ignore=(), fail_on="INFO", static=True, jobs=3, cache=False)
    settings = settings_for(tmp_path, FULL_CONFIG, overrides)
    assert settings.select == frozenset({"RL201"})
    assert settings.ignore == frozenset()
    assert settings.fail_on == "info"
    assert (settings.static, settings.jobs, settings.cache) == (True, 3, False)
    assert settings.norm_placement == "pre"  # untouched by the flags


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ("selct = ['RL1']", "pyproject.toml: tool.reslint.selct: unknown key (did you mean 'select'?)"),
        ("fail_on = 'error'", "tool.reslint.fail_on: unknown key (did you mean 'fail-on'?)"),
        ("zzz = 1", "tool.reslint.zzz: unknown key (known keys: select, ignore,"),
        ("select = ['RL999']", "tool.reslint.select: unknown rule code or prefix: 'RL999'"),
        ("ignore = ['E501']", "tool.reslint.ignore: unknown rule code or prefix: 'E501'"),
        ("select = 'RL1'", "tool.reslint.select: expected an array of strings, got a string"),
        ("exclude = [1]", "tool.reslint.exclude: expected an array of strings, got an array"),
        ("fail-on = 'fatal'", "tool.reslint.fail-on: expected one of info, warning, error, got 'fatal'"),
        ("norm-placement = 1", "tool.reslint.norm-placement: expected one of any, pre, post, got an integer"),
        ("deep-post-ln-layers = 0", "tool.reslint.deep-post-ln-layers: expected an integer >= 1, got 0"),
        ("deep-post-ln-layers = true", "tool.reslint.deep-post-ln-layers: expected an integer >= 1, got a boolean"),
        ("deep-post-ln-layers = '24'", "tool.reslint.deep-post-ln-layers: expected an integer >= 1, got a string"),
        ("vanishing-gradient-factor = 1", "tool.reslint.vanishing-gradient-factor: expected a number greater than 1, got 1"),
        ("exploding-gradient-factor = inf", "tool.reslint.exploding-gradient-factor: expected a number greater than 1, got inf"),
        ("activation-growth-factor = '10'", "tool.reslint.activation-growth-factor: expected a number greater than 1, got a string"),
        ("activation-growth-factor = true", "tool.reslint.activation-growth-factor: expected a number greater than 1, got a boolean"),
        ("per-file-ignores = ['x']", "tool.reslint.per-file-ignores: expected a table of glob = [codes], got an array"),
        ("[tool.reslint.per-file-ignores]\n'tests/*' = ['RL9X']", 'tool.reslint.per-file-ignores."tests/*": unknown rule code'),
        ("models = 'model.py:M()'", "tool.reslint.models: expected an array of tables"),
        ("[[tool.reslint.models]]\ninputs = 'float[2,8]'", "tool.reslint.models[0]: missing required key 'factory'"),
        ("[[tool.reslint.models]]\nfactory = 'm.py:M()'\ninput = 'x'", "tool.reslint.models[0].input: unknown key (did you mean 'inputs'?)"),
        ("[[tool.reslint.models]]\nfactory = 3", "tool.reslint.models[0].factory: expected a non-empty string"),
        ("[[tool.reslint.models]]\nfactory = 'm.py:M()'\ninputs = 3", "tool.reslint.models[0].inputs: expected a string, got an integer"),
    ],
)
def test_invalid_config_is_one_line_naming_file_and_key(tmp_path, table, expected):
    assert expected in config_error(tmp_path, table)


def test_bad_toml_names_the_file(tmp_path):
    with pytest.raises(ConfigError, match=r"^pyproject.toml: invalid TOML: ") as caught:
        settings_for(tmp_path, "[tool.reslint\nselect = [")
    assert "\n" not in str(caught.value)


def test_missing_or_tableless_explicit_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="config file not found: nope.toml"):
        load_settings(tmp_path, "nope.toml", Overrides())
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    with pytest.raises(ConfigError, match=r"pyproject.toml: no \[tool.reslint\] table"):
        load_settings(tmp_path, "pyproject.toml", Overrides())


def test_unknown_cli_code_is_a_usage_error_naming_the_option(tmp_path):
    with pytest.raises(UsageError, match="^select: unknown rule code or prefix: 'RL77'$") as caught:
        settings_for(tmp_path, None, Overrides(select=("RL1", "RL77")))
    assert caught.value.cli_message() == "--select: unknown rule code or prefix: 'RL77'"


@pytest.mark.parametrize("option", ["select", "extend_select"])
def test_selecting_no_code_is_a_usage_error_not_every_rule(tmp_path, option):
    with pytest.raises(UsageError, match=f"^{option}: no rule code given"):
        settings_for(tmp_path, None, Overrides(**{option: ()}))


def test_extend_select_and_extend_ignore_add_to_the_files_lists(tmp_path):
    config = "[tool.reslint]\nselect = ['RL1']\nignore = ['RL101']\nexclude = ['legacy']\n"
    settings = settings_for(tmp_path, config, Overrides(extend_select=("RL201",), extend_ignore=("RL103",),
                                                        extend_exclude=("gen",)))
    assert settings.select == frozenset({"RL101", "RL102", "RL103", "RL104", "RL201"})
    assert settings.ignore == frozenset({"RL101", "RL103"})
    assert settings.exclude == ("legacy", "gen")
    replaced = settings_for(tmp_path, config, Overrides(select=("RL2",), extend_select=("RL501",), exclude=("x",)))
    assert (replaced.select, replaced.exclude) == (frozenset({"RL201", "RL501"}), ("x",))


def test_all_selects_every_rule(tmp_path):
    assert settings_for(tmp_path, "[tool.reslint]\nselect = ['ALL']\n").select == frozenset(RULES)


# End to end: the config reaches the check.

def test_bad_config_exits_2_with_one_line(tmp_path):
    write(tmp_path, {"pyproject.toml": "[tool.reslint]\nsleect = ['RL1']\n", "model.py": POST_LN})
    result = run_reslint("check", "--static", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == "reslint: error: pyproject.toml: tool.reslint.sleect: unknown key (did you mean 'select'?)\n"


def test_config_exclude_and_per_file_ignores_apply(tmp_path):
    write(tmp_path, {
        "pyproject.toml": (
            "[tool.reslint]\nexclude = ['generated']\nfail-on = 'info'\n"
            "[tool.reslint.per-file-ignores]\n'tests/*' = ['RL2']\n"
        ),
        "generated/model.py": BATCHNORM,
        "tests/test_model.py": BATCHNORM,
        "src/model.py": BATCHNORM,
    })
    # generated/ is excluded even when named explicitly, as pre-commit does.
    result = run_reslint("check", "--static", "--no-cache", ".", "generated/model.py", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    lines = [line for line in result.stdout.splitlines() if ": RL" in line]
    assert [line.split(":")[0] for line in lines] == ["src/model.py"]
    assert "in 2 files." in result.stdout


def test_fail_on_from_config_and_its_override(tmp_path):
    write(tmp_path, {"pyproject.toml": "[tool.reslint]\nfail-on = 'info'\n", "model.py": POST_LN})
    assert run_reslint("check", "--static", "--no-cache", cwd=tmp_path).returncode == 1
    assert run_reslint("check", "--static", "--no-cache", "--fail-on", "warning", cwd=tmp_path).returncode == 0


def test_root_keeps_symlinked_paths_so_globs_still_match(tmp_path):
    real = tmp_path / "real"
    write(real, {"pyproject.toml": "[tool.reslint]\nexclude = ['src/legacy']\n", "src/legacy/old.py": BATCHNORM, "src/new.py": BATCHNORM})
    (tmp_path / "link").symlink_to(real)
    result = run_reslint(
        "check", "--static", "--no-cache", "--output-format", "json", "--config", "link/pyproject.toml", "link",
        cwd=tmp_path,
    )
    assert [path for path, _, _ in codes(result.stdout)] == ["link/src/new.py"]
