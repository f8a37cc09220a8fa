"""The one exception type of reslint's Python API for problems with how it was called."""

from __future__ import annotations


class ReslintError(Exception):
    """reslint could not run as asked: a bad config, path or option, or a missing dependency.

    The message is one line that says what to change; the CLI prints it as
    `reslint: error: MESSAGE` and exits 2. Problems found *in the checked code* are never raised:
    they are findings (RL901-RL903 when the code cannot be parsed, built or traced).
    """

    def cli_message(self) -> str:
        """The message as the command line says it (naming its flags rather than the API's arguments)."""
        return str(self)


class UsageError(ReslintError):
    """An argument of the API (or a flag of the CLI) that cannot be used.

    `option` is the argument as the API spells it (`select`, `models`); the message names it so,
    and the CLI names the flag instead (`--select`, `--model`).
    """

    def __init__(self, problem: str, option: str | None = None, cli_problem: str | None = None, value: object = None):
        self.option = option
        self.problem = problem
        self.cli_problem = cli_problem or problem
        self.value = value  # the bad value, shown after the option: `models 'm.py:GPT(': ...`
        super().__init__(self.named(option))

    def named(self, name: str | None) -> str:
        if not name:
            return self.problem
        shown = name if self.value is None else f"{name} {self.value!r}"
        return f"{shown}: {self.problem}"

    def cli_message(self) -> str:
        if not self.option:
            return self.cli_problem
        self.problem, problem = self.cli_problem, self.problem
        try:
            return self.named(CLI_FLAGS.get(self.option, "--" + self.option.replace("_", "-")))
        finally:
            self.problem = problem


# API arguments whose flag is spelled differently.
CLI_FLAGS = {"models": "--model", "cache": "--no-cache", "fail_on": "--fail-on", "paths": "PATH"}
