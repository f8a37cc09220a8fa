"""The one exception type of reslint's Python API for problems with how it was called."""

from __future__ import annotations


class ReslintError(Exception):
    """reslint could not run as asked: a bad config, path or option, or a missing dependency.

    The message is one line that says what to change; the CLI prints it as
    `reslint: error: MESSAGE` and exits 2. Problems found *in the checked code* are never raised:
    they are findings (RL901-RL903 when the code cannot be parsed, built or traced).
    """


class UsageError(ReslintError):
    """An argument of the API (or a flag of the CLI) that cannot be used."""
