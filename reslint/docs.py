"""Rule doc pages: `rules/CODE.md` in a checkout, `reslint/ruledocs/CODE.md` in an installed wheel."""

from __future__ import annotations

from pathlib import Path

from reslint.catalog import RULES, RuleInfo

PACKAGE_DIR = Path(__file__).resolve().parent
# pyproject maps the package `reslint.ruledocs` to the repository's `rules/` directory.
DOC_DIRS = (PACKAGE_DIR / "ruledocs", PACKAGE_DIR.parent / "rules")


def rule_page(code: str) -> str | None:
    """The markdown page of a rule, or None when it is not available."""
    for directory in DOC_DIRS:
        page = directory / f"{code}.md"
        try:
            return page.read_text(encoding="utf-8")
        except OSError:
            continue
    return None


def catalog_page(rule: RuleInfo) -> str:
    """A short page built from the catalog, for when the doc page is missing."""
    return (
        f"# {rule.code} {rule.name}\n\n"
        f"Default severity: {rule.severity}\n\n"
        f"{rule.summary[0].upper()}{rule.summary[1:]}.\n\n"
        f"How to fix: {rule.fix}.\n\n"
        f"Suppress with `# noqa: {rule.code}` or `# reslint: ignore[{rule.code}]` on the reported line.\n\n"
        f"Docs: {rule.doc_url}\n"
    )


def rule_text(code: str) -> str:
    return rule_page(code) or catalog_page(RULES[code])


def find_rule(name_or_code: str) -> RuleInfo | None:
    """A rule by code (any case) or by name, e.g. `rl101` or `post-ln`."""
    wanted = name_or_code.strip()
    if wanted.upper() in RULES:
        return RULES[wanted.upper()]
    return next((rule for rule in RULES.values() if rule.name == wanted.lower()), None)
