"""What the operations routes answer: a worker's logs, and releasing every lease of an owner."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .models import Lease


@dataclass(frozen=True)
class WorkerLogs:
    """`GET /v1/lease/{id}/logs`: the text (one line per output line), the lease's status, whether cut short."""

    text: str
    lease_status: str | None = None
    truncated: bool = False

    @property
    def lines(self) -> list[str]:
        """The text as lines, without their newlines."""
        return self.text.splitlines()


@dataclass(frozen=True)
class NotReleased:
    """A lease `release_all` could not release, with the error a single release would have answered."""

    lease_id: str
    status: str
    code: str
    message: str

    @classmethod
    def from_wire(cls, data: Any) -> NotReleased:
        """From one entry of `not_released`; ValueError when it is not one."""
        if not isinstance(data, dict):
            raise ValueError(f"a not_released entry must be a JSON object, got {type(data).__name__}")
        try:
            return cls(str(data["lease_id"]), str(data["status"]), str(data["code"]), str(data["message"]))
        except KeyError as missing:
            raise ValueError(f"not_released entry lacks {missing.args[0]!r}") from missing


@dataclass
class OwnerRelease:
    """`DELETE /v1/leases?owner_id=` followed to its end: every lease released, every one that was not."""

    owner_id: str
    released: list[Lease] = field(default_factory=list)
    not_released: list[NotReleased] = field(default_factory=list)
    calls: int = 0

    @property
    def complete(self) -> bool:
        """True when every live lease of the owner was released."""
        return not self.not_released
