"""Wire shapes of the lease API (`openapi.yaml`) that every function shares: the Lease, the read queries,
the renew body, and their enums.

Plain classes with hand-written validation (`scheduler.inputs`). The acquire body and the usage query,
with their many rules, are in `scheduler.request_models`, which only those paths import.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, NamedTuple, Self

from scheduler.inputs import fields_of
from scheduler.lifecycle import LeaseStatus, WorkerState

MAX_TTL_SECONDS = 28_800
DEFAULT_TTL_SECONDS = 3_600
MAX_ENV_ENTRIES = 64
MAX_ENV_VALUE_CHARS = 4_096
MAX_COST_PER_HOUR = 10_000.0  # USD; a ceiling above any price, refused beyond as a likely typo
MIN_COST_PER_HOUR = 0.000001  # USD: the smallest amount the budgets count (one micro-dollar)
MAX_LABEL_CHARS = 128
MAX_TOKEN_CHARS = 4_096
# Owners travel back in the X-Lease-Owner header, so they must be header-safe: printable ASCII,
# no surrounding spaces (a value no header can carry would lock its lease for good).
OWNER_ID_PATTERN = r"^[!-~]([ -~]*[!-~])?$"
OWNER_ID = re.compile(OWNER_ID_PATTERN.removeprefix("^").removesuffix("$"))


class WorkerKind(StrEnum):
    RENDERER = "renderer"
    ANIM = "anim"


class GpuClass(StrEnum):
    NONE = "none"
    ENTRY = "entry"
    MID = "mid"
    HIGH = "high"


def is_lease_id(value: object) -> bool:
    """True for the UUIDs this service issues as lease ids (anything else cannot name a lease)."""
    if not isinstance(value, str) or len(value) != 36:
        return False
    try:
        return str(uuid.UUID(value)) == value
    except ValueError:
        return False


def format_time(value: datetime) -> str:
    """RFC 3339 UTC with a `Z`, as every time on the wire is written."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _time(value: datetime | None) -> str | None:
    return None if value is None else format_time(value)


_FLOATS = frozenset({"cost_per_hour", "max_cost_per_hour", "cost_usd"})


class Lease:
    """A lease as callers see it: immutable, compared by value; `replace` makes a changed copy.

    Written out rather than a dataclass: a function builds this class at every cold start, and a
    20-field dataclass compiles its generated methods there (milliseconds each time); these are
    compiled once, into the layer's bytecode.
    """

    FIELDS = (
        "lease_id",
        "provider",
        "kind",
        "gpu",
        "status",
        "endpoint",
        "created_at",
        "expires_at",
        "released_at",
        "provider_token",
        "owner_id",
        "correlation_id",
        "region",
        "ttl_seconds",
        "cost_per_hour",
        "failure_reason",
        "worker_state",
        "ready_at",
        "max_cost_per_hour",
        "cost_usd",
    )
    REQUIRED = frozenset({"lease_id", "provider", "kind", "gpu", "status", "created_at", "expires_at", "ttl_seconds"})
    __slots__ = FIELDS

    lease_id: str
    provider: str
    kind: WorkerKind
    gpu: GpuClass
    status: LeaseStatus
    endpoint: str | None
    created_at: datetime
    expires_at: datetime
    released_at: datetime | None
    provider_token: str | None
    owner_id: str | None
    correlation_id: str | None
    region: str | None
    ttl_seconds: int
    cost_per_hour: float | None
    failure_reason: str | None
    worker_state: WorkerState
    ready_at: datetime | None
    max_cost_per_hour: float | None
    # What the lease cost: accrued so far while live, final once ended (rate × time from create to release).
    cost_usd: float | None

    def __init__(
        self,
        *,
        lease_id: str,
        provider: str,
        kind: WorkerKind,
        gpu: GpuClass,
        status: LeaseStatus,
        endpoint: str | None = None,
        created_at: datetime,
        expires_at: datetime,
        released_at: datetime | None = None,
        provider_token: str | None = None,
        owner_id: str | None = None,
        correlation_id: str | None = None,
        region: str | None = None,
        ttl_seconds: int,
        cost_per_hour: float | None = None,
        failure_reason: str | None = None,
        worker_state: WorkerState = WorkerState.STARTING,
        ready_at: datetime | None = None,
        max_cost_per_hour: float | None = None,
        cost_usd: float | None = None,
    ) -> None:
        values = locals()
        for name in self.FIELDS:
            value = values[name]
            # Amounts are JSON numbers with a fraction on the wire (2.0, not 2), whatever the caller passed.
            if name in _FLOATS and isinstance(value, int):
                value = float(value)
            object.__setattr__(self, name, value)

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.FIELDS)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}: a Lease is immutable (use replace)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}: a Lease is immutable")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Lease)  # noqa: S101 - narrowing for mypy  # nosec B101
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.FIELDS)
        return f"Lease({shown})"

    def replace(self, **changes: Any) -> Lease:
        """A copy with `changes` (field names) applied."""
        unknown = set(changes) - set(self.FIELDS)
        if unknown:
            raise TypeError(f"Lease has no field {', '.join(sorted(unknown))}")
        return Lease(**{name: getattr(self, name) for name in self.FIELDS} | changes)

    @property
    def is_starting(self) -> bool:
        """True while the lease is active and its worker has not been reported ready."""
        return self.status == LeaseStatus.ACTIVE and self.worker_state == WorkerState.STARTING

    def is_expired(self, now: datetime) -> bool:
        """True once the lease has run past `expires_at`."""
        return self.expires_at <= now

    def wire(self, now: datetime | None = None) -> dict[str, object]:
        """The JSON-ready shape `openapi.yaml` describes (schema Lease); a live lease's `cost_usd` is what it
        has accrued by `now` (default: the wall clock)."""
        cost_usd = self.cost_usd
        if cost_usd is None and self.cost_per_hour is not None and self.status.is_live:
            seconds = max(0.0, ((now or datetime.now(UTC)) - self.created_at).total_seconds())
            cost_usd = round(self.cost_per_hour * int(seconds) / 3600, 6)
        return {
            "lease_id": self.lease_id,
            "provider": self.provider,
            "kind": self.kind.value,
            "gpu": self.gpu.value,
            "status": self.status.value,
            "endpoint": self.endpoint,
            "created_at": format_time(self.created_at),
            "expires_at": format_time(self.expires_at),
            "released_at": _time(self.released_at),
            "provider_token": self.provider_token,
            "owner_id": self.owner_id,
            "correlation_id": self.correlation_id,
            "region": self.region,
            "ttl_seconds": self.ttl_seconds,
            "cost_per_hour": self.cost_per_hour,
            "failure_reason": self.failure_reason,
            "worker_state": self.worker_state.value,
            "ready_at": _time(self.ready_at),
            "max_cost_per_hour": self.max_cost_per_hour,
            "cost_usd": cost_usd,
        }


class RenewRequest(NamedTuple):
    """Body of `POST /v1/lease/{lease_id}/renew`; an absent ttl keeps the lease's own."""

    ttl_seconds: int | None = None

    @classmethod
    def parse(cls, data: object) -> Self:
        """From the decoded JSON body; InvalidRequest naming each problem otherwise."""
        body = fields_of(data, "request body", ("ttl_seconds",))
        ttl_seconds = body.strict_int("ttl_seconds", 1, MAX_TTL_SECONDS)
        body.check("request body")
        return cls(ttl_seconds=ttl_seconds)


MAX_WAIT_READY_SECONDS = 25  # API Gateway gives a route 30 s


class ReadQuery(NamedTuple):
    """Query of `GET /v1/lease/{lease_id}`: `wait_ready` seconds to wait for a starting worker (0: none)."""

    wait_ready: int = 0

    @classmethod
    def parse(cls, data: object) -> Self:
        """From the query string's parameters; InvalidRequest naming each problem otherwise."""
        query = fields_of(data, "query", ("wait_ready",))
        wait_ready = query.whole_number(
            "wait_ready",
            0,
            0,
            MAX_WAIT_READY_SECONDS,
            f"wait_ready must be a whole number of seconds from 0 to {MAX_WAIT_READY_SECONDS}",
            digits=6,
        )
        query.check("query")
        return cls(wait_ready=wait_ready)


MAX_LIST_LIMIT = 1000


class ListFilter(NamedTuple):
    """Query of `GET /v1/leases` (`_replace(next_token=…)` gives the next page's)."""

    owner_id: str | None = None
    kind: WorkerKind | None = None
    provider: str | None = None
    limit: int = 100
    next_token: str | None = None

    @classmethod
    def parse(cls, data: object) -> Self:
        """From the query string's parameters; InvalidRequest naming each problem otherwise."""
        query = fields_of(data, "query", ("owner_id", "kind", "provider", "limit", "next_token"))
        found = cls(
            owner_id=query.text("owner_id", max_length=MAX_LABEL_CHARS, pattern=OWNER_ID),
            kind=query.choice("kind", WorkerKind),
            provider=query.text("provider", max_length=64),
            limit=query.whole_number(
                "limit", 100, 1, MAX_LIST_LIMIT, f"limit must be a whole number from 1 to {MAX_LIST_LIMIT}", digits=10
            ),
            next_token=query.text("next_token", max_length=MAX_TOKEN_CHARS),
        )
        query.check("query")
        return found
