"""reslint's pytest plugin, registered through the `pytest11` entry point (disable with `-p no:reslint`).

* the `reslint` fixture: `reslint.assert_clean(model)` traces an in-memory model and fails the test
  with the rendered findings; `reslint.assert_gradients_healthy(model, inputs)` runs the probe
  (RL601-RL604) and fails the same way;
* `@pytest.mark.reslint(inputs="long[2,64]<50257", ignore=["RL101"], ...)`: defaults for the
  fixture's assertions in a test, class or module (the closest marker wins, per option);
* `pytest --reslint`: one `RESLINT` item per collected Python file, failing with the findings of
  `reslint check --static` at or above the config's `fail-on` (as pytest-ruff and pytest-flake8 do).

Importing this module imports neither torch nor libcst: the plugin is loaded in every pytest run
of an environment where reslint is installed, and costs nothing until it is used.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

ITEM_NAME = "RESLINT"
# Options of @pytest.mark.reslint: those of assert_clean and of assert_gradients_healthy.
CHECK_OPTIONS = ("inputs", "fail_on", "ignore", "select", "name", "config")
PROBE_OPTIONS = ("loss", "device", "dtype", "steps", "seed", "train", "vanishing_gradient_factor",
                 "exploding_gradient_factor", "activation_growth_factor")
MARKER_OPTIONS = CHECK_OPTIONS + PROBE_OPTIONS
UNTRACED = ("RL902", "RL903")  # the model could not be built or traced: nothing was checked
SETTINGS = pytest.StashKey[Any]()  # config.stash: the project's settings (--reslint)
SESSION_REPORT = pytest.StashKey[Any]()  # session.stash: the one check of the session's files


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("reslint", "reslint: lint PyTorch model code")
    group.addoption("--reslint", action="store_true", default=False,
                    help="Check every collected Python file with `reslint check --static` (one RESLINT item per "
                         "file; fails on findings at or above the config's fail-on).")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("reslint"):
        project_settings(config)  # a bad config is a usage error before anything is collected
    config.addinivalue_line(
        "markers",
        "reslint(**options): defaults for the reslint fixture's assert_clean / assert_gradients_healthy "
        f"(options: {', '.join(MARKER_OPTIONS)})",
    )


# ----- the fixture ---------------------------------------------------------------------------------


class Default:
    """A parameter's default that a `@pytest.mark.reslint` option replaces (shown as the value)."""

    def __init__(self, value: Any):
        self.value = value

    def __repr__(self) -> str:
        return repr(self.value)


class ReslintFixture:
    """What the `reslint` fixture gives a test: assertions over an in-memory model.

    An option not passed to a method comes from the closest `@pytest.mark.reslint(...)`, else it
    is the default shown in the signature. The project's `[tool.reslint]` config applies as in
    `reslint check` (its select, ignore, per-file-ignores and the model file's `# noqa`
    comments); `ignore` here ignores more codes on top of it.
    """

    def __init__(self, defaults: dict[str, Any] | None = None, cwd: str | None = None):
        self.defaults = dict(defaults or {})
        self.cwd = cwd

    def option(self, name: str, value: Any) -> Any:
        if not isinstance(value, Default):
            return value
        return self.defaults.get(name, value.value)

    def assert_clean(self, model: Any, inputs: Any = Default(None), fail_on: str = Default("warning"),
                     ignore: Any = Default(()), *, select: Any = Default(None), name: str | None = Default(None),
                     config: str | None = Default(None)):
        """Trace `model` with `reslint.check_model` and fail unless no finding is at or above `fail_on`.

        `inputs` as for `check_model` (None: inferred from the first layer); `ignore`: codes or
        prefixes not to fail on, besides the config's; `select` replaces the config's selection.
        A model that could not be traced (RL902/RL903) fails too, unless those codes are ignored:
        a check that saw nothing is not a clean check. Returns the `Report` when the model is clean.
        """
        __tracebackhide__ = True
        from reslint.api import check_model

        fail_on, ignore, name = self.option("fail_on", fail_on), self.option("ignore", ignore), self.option("name", name)
        report = check_model(model, self.option("inputs", inputs), select=self.option("select", select), name=name,
                             config=self.option("config", config), cwd=self.cwd)
        report.findings = without(report.findings, ignore)
        shown = name or type(getattr(model, "_orig_mod", model)).__name__
        if any(finding.code in UNTRACED for finding in report.findings):
            raise AssertionError(failure_text(f"reslint could not trace {shown}, so it checked nothing "
                                              "(pass inputs=, or ignore RL902/RL903)", report.render()))
        failing = [finding for finding in report.findings if finding.at_least(fail_on)]
        if failing:
            raise AssertionError(failure_text(
                f"reslint: {shown} has {plural(len(failing), 'finding')} at or above {fail_on}", report.render()))
        return report

    def assert_gradients_healthy(self, model: Any, inputs: Any = Default(None), *, fail_on: str = Default("warning"),
                                 ignore: Any = Default(()), select: Any = Default(None),
                                 config: str | None = Default(None), **probe_options: Any):
        """Run `reslint.probe(model, inputs, **probe_options)` and fail on RL601-RL604 at or above `fail_on`.

        `probe_options` are `reslint.probe`'s: loss, device, dtype, steps, seed, train and the
        three factors (which default to the config's). The config's select and ignore apply,
        then `select` and `ignore`. Returns the `ProbeReport` when the gradients are healthy.
        """
        __tracebackhide__ = True
        unknown = sorted(set(probe_options) - set(PROBE_OPTIONS))
        if unknown:
            raise TypeError(f"assert_gradients_healthy() got unknown options: {', '.join(unknown)} "
                            f"(reslint.probe's are {', '.join(PROBE_OPTIONS)})")
        from reslint.api import probe
        from reslint.config import Overrides, load_settings

        settings = load_settings(self.cwd or os.getcwd(), self.option("config", config), Overrides())
        arguments = {name: self.defaults[name] for name in PROBE_OPTIONS if name in self.defaults}
        arguments.update(probe_options)
        for factor in PROBE_OPTIONS[-3:]:
            arguments.setdefault(factor, getattr(settings, factor))
        report = probe(model, self.option("inputs", inputs), **arguments)
        findings = [finding for finding in report.findings if settings.enabled(finding.code)]
        select, fail_on = self.option("select", select), self.option("fail_on", fail_on)
        if select:
            findings = kept(findings, select)
        report.findings = without(findings, self.option("ignore", ignore))
        failing = [finding for finding in report.findings if finding.at_least(fail_on)]
        if failing:
            raise AssertionError(failure_text(
                f"reslint probe: {report.model} has {plural(len(failing), 'gradient-flow finding')} at or above {fail_on}",
                probe_text(report)))
        return report


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def failure_text(headline: str, rendered: str) -> str:
    return f"{headline}\n\n{rendered.rstrip()}"


def codes_of(codes: Any) -> set[str]:
    from reslint.api import codes_argument
    from reslint.catalog import expand_codes
    from reslint.errors import UsageError

    try:
        return expand_codes(codes_argument(codes) or ())
    except ValueError as error:
        raise UsageError(str(error)) from None


def without(findings: list, ignore: Any) -> list:
    ignored = codes_of(ignore) if ignore else set()
    return [finding for finding in findings if finding.code not in ignored]


def kept(findings: list, select: Any) -> list:
    selected = codes_of(select)
    return [finding for finding in findings if finding.code in selected]


def probe_text(report: Any) -> str:
    """The probe's header, per-stack gradient line and findings (the full table is `reslint probe`'s)."""
    from reslint.probing.text import header, stack_lines, summary
    from reslint.reporters.text import Painter, finding_line

    lines = [header(report)]
    if report.inputs:
        lines.append(f"inputs: {report.inputs}")
    lines.extend(stack_lines(report))
    lines.append("")
    lines.extend(finding_line(finding, Painter(False)) for finding in report.findings)
    lines.append("")
    lines.append(summary(report.findings))
    return "\n".join(lines)


def marker_defaults(node: pytest.Item) -> dict[str, Any]:
    """The options of the `reslint` markers on the test, its class and module; the closest wins."""
    defaults: dict[str, Any] = {}
    for marker in reversed(list(node.iter_markers("reslint"))):  # farthest first, so the closest overrides
        if marker.args:
            raise TypeError("@pytest.mark.reslint takes keyword options only, e.g. @pytest.mark.reslint(ignore=['RL101'])")
        unknown = sorted(set(marker.kwargs) - set(MARKER_OPTIONS))
        if unknown:
            raise TypeError(f"@pytest.mark.reslint: unknown option {unknown[0]!r} (options: {', '.join(MARKER_OPTIONS)})")
        defaults.update(marker.kwargs)
    return defaults


@pytest.fixture
def reslint(request: pytest.FixtureRequest) -> ReslintFixture:
    """Assertions over in-memory models: `reslint.assert_clean(model)`, `reslint.assert_gradients_healthy(model, inputs)`."""
    return ReslintFixture(marker_defaults(request.node), str(request.config.invocation_params.dir))


# ----- pytest --reslint ----------------------------------------------------------------------------


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    config = parent.config
    if not config.getoption("reslint") or file_path.suffix != ".py":
        return None
    if is_excluded(config, file_path):
        return None
    return ReslintFile.from_parent(parent, path=file_path)


def project_settings(config: pytest.Config) -> Any:
    """The `[tool.reslint]` settings found from pytest's invocation directory, loaded once per session."""
    if SETTINGS not in config.stash:
        from reslint.config import Overrides, load_settings
        from reslint.errors import ReslintError

        try:
            config.stash[SETTINGS] = load_settings(str(config.invocation_params.dir), None, Overrides(static=True))
        except ReslintError as error:
            raise pytest.UsageError(f"reslint: {error}") from None
    return config.stash[SETTINGS]


def is_excluded(config: pytest.Config, path: Path) -> bool:
    from reslint.discovery import is_excluded as excluded, root_relative

    settings = project_settings(config)
    return excluded(root_relative(str(path), settings.root), settings.exclude)


class ReslintFile(pytest.File):
    def collect(self):
        yield ReslintItem.from_parent(self, name=ITEM_NAME)


class ReslintCheckFailed(Exception):
    """The findings of one file at or above the fail-on severity (the message is the rendered report)."""


class ReslintItem(pytest.Item):
    """`reslint check --static FILE`; the files of the session are checked together on first use, so
    that RL301 sees the models a training script imports and the workers run in parallel."""

    def runtest(self) -> None:
        from reslint.report import Report

        report = session_report(self.session, self.config)
        mine = os.path.normcase(os.path.abspath(self.path))
        root = str(self.config.invocation_params.dir)

        def here(path: str) -> bool:
            return os.path.normcase(os.path.abspath(os.path.join(root, path))) == mine

        errors = [error for error in report.internal_errors if here(error.path)]
        if errors:
            raise ReslintCheckFailed(f"reslint failed on {errors[0].path}: {errors[0].error}")
        threshold = report.settings.fail_on
        findings = [finding for finding in report.findings if here(finding.path)]
        if any(finding.at_least(threshold) for finding in findings):
            file_report = Report(findings=findings, models=[model for model in report.models if here(model.path)],
                                 files_checked=1, settings=report.settings)
            count = sum(1 for finding in findings if finding.at_least(threshold))
            headline = f"reslint: {plural(count, 'finding')} at or above {threshold} (fail-on)"
            raise ReslintCheckFailed(failure_text(headline, file_report.render()))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, ReslintCheckFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.path.name}::{ITEM_NAME}"


def session_report(session: pytest.Session, config: pytest.Config) -> Any:
    """One `reslint.check(static=True)` over the files of every RESLINT item of the session."""
    if SESSION_REPORT not in session.stash:
        from reslint.api import check

        paths = sorted({str(item.path) for item in session.items if isinstance(item, ReslintItem)})
        session.stash[SESSION_REPORT] = check(paths, static=True, cwd=str(config.invocation_params.dir))
    return session.stash[SESSION_REPORT]
