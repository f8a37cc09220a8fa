"""The fix side of `reslint check`: --fix, --unsafe-fixes, --diff, --fix-only (as ruff spells them)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass

import click

from reslint.reporters.common import plural
from reslint.report import Report


@dataclass(frozen=True)
class FixOptions:
    fix: bool = False
    unsafe: bool = False
    diff: bool = False
    fix_only: bool = False

    @property
    def rewrites(self) -> bool:
        return self.fix or self.fix_only or self.diff


def fix_report(report: Report, options: FixOptions, check_again: Callable[[], Report]) -> tuple[Report, int | None]:
    """Apply or show the fixes; the report to print (None for --diff and --fix-only, which print
    their own) and, for --diff, the exit status. (`check_again`: the check after writing the fixes.)"""
    settings = report.settings
    if not options.rewrites:
        return report, None
    from reslint.fixes.apply import plan, with_fixes, write  # libcst: only when something is to be fixed

    planned = plan(report.findings, settings, options.unsafe, report.models)
    for fixed_file in planned:
        if fixed_file.refused:
            click.echo(f"reslint: warning: not fixing {fixed_file.display}: {fixed_file.refused}", err=True)
    count = sum(len(fixed_file.fixed) for fixed_file in planned)
    if options.diff:
        for fixed_file in planned:
            sys.stdout.write(fixed_file.diff())
        sys.stdout.flush()
        click.echo(f"Would fix {plural(count, 'finding')}.", err=True)
        return None, 1 if count else 0
    write(planned)
    if options.fix_only:
        click.echo(f"Fixed {plural(count, 'finding')}.")
        return None, 0
    if count:
        remaining = check_again()
    else:  # nothing written: the same findings, now with the fixes they offer
        remaining = report
        remaining.findings = with_fixes(report.findings, settings, report.models)
    remaining.fixed = count
    return remaining, None
