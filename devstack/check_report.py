"""What `scripts/check-docker-host` found: each finding with its level and fix, and the verdict."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TextIO


@dataclass(frozen=True)
class Finding:
    """One line of the report: `ok`, `warn`, `FAIL` or `skip`, what was seen, and what to do about it."""

    level: str
    message: str
    fix: str | None = None


@dataclass
class Report:
    """Everything the check found, in order."""

    findings: list[Finding] = field(default_factory=list)

    def add(self, level: str, message: str, fix: str | None = None) -> None:
        self.findings.append(Finding(level, message, fix))

    @property
    def failed(self) -> bool:
        return any(finding.level == "FAIL" for finding in self.findings)

    @property
    def warnings(self) -> int:
        return sum(finding.level == "warn" for finding in self.findings)

    def render(self, out: TextIO) -> None:
        for finding in self.findings:
            out.write(f"  {finding.level:<5} {finding.message}\n")
            if finding.fix:
                out.write(f"        fix: {finding.fix}\n")
        if self.failed:
            out.write(f"\nThe host does NOT work with the service ({self._count('FAIL')} to fix).\n")
        else:
            warned = f" ({self.warnings} warning{'s' if self.warnings != 1 else ''})" if self.warnings else ""
            out.write(f"\nThe host works with the service{warned}.\n")

    def _count(self, level: str) -> int:
        return sum(finding.level == level for finding in self.findings)
