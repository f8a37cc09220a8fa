"""A static check's fixes of one file, checked beside its analysis, and kept in the result cache with it.

Light to import (no libcst): a warm run reads them from the cache in workers that parse nothing."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from reslint.findings import Finding
from reslint.fixes import Edit, Fix
from reslint.settings import Settings


@dataclass
class FileFixes:
    """A static check's fixes of one file, checked in the worker that analysed it (see `apply.prepare_fixes`):
    for each fixable finding (`fix_key`), its checked Fix or None; `digest`: of the text they were made for."""

    digest: str
    fixes: dict[tuple, Fix | None] = field(default_factory=dict)

    def covers(self, text: str, findings: list[Finding]) -> bool:
        return self.digest == text_digest(text) and all(fix_key(finding) in self.fixes for finding in findings)

    def to_dict(self, settings: Settings) -> dict:
        return {"digest": self.digest, "settings": settings_key(settings),
                "fixes": [[list(key), fix.to_dict() if fix is not None else None] for key, fix in self.fixes.items()]}

    @classmethod
    def from_dict(cls, data: dict, settings: Settings) -> FileFixes | None:
        """None when they were checked under other settings than `settings`'s (see settings_key)."""
        if data.get("settings") != settings_key(settings):
            return None
        return cls(data["digest"], {tuple(key): Fix.from_dict(fix) if fix is not None else None
                                    for key, fix in data["fixes"]})


def settings_key(settings: Settings) -> str:
    """What, besides the file's text and its result's own cache key, decides which fixes check out: the findings
    reported before and after a fix (suppressions per file) and the codes that may be fixed."""
    return repr((settings.cache_key(), sorted((glob, sorted(codes)) for glob, codes in settings.per_file_ignores),
                 sorted(settings.fixable), sorted(settings.unfixable)))


def fix_key(finding: Finding) -> tuple:
    """A finding as the worker and the parent both know it (the parent's are copies)."""
    return finding.code, finding.path, finding.line, finding.column, finding.symbol, finding.message


def text_digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()
