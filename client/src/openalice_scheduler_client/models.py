"""The Lease and the Caller the API returns (openapi.yaml `Lease`, `Caller`) as typed, immutable values, and the
API's vocabulary.

Each name of the contract is written here once, as openapi.yaml has it (the client reads no YAML and imports
nothing of the service); tests/client/test_wire_contract.py holds every one of them to openapi.yaml.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

KINDS = ("renderer", "anim")  # WorkerKind
GPU_CLASSES = ("none", "entry", "mid", "high")  # GpuClass
# LeaseStatus, in openapi.yaml's order: what may still own a worker, how a lease ends, then the queue's two.
STATUSES = ("pending", "active", "releasing", "released", "expired", "failed", "queued", "preempted")
PENDING, ACTIVE, RELEASING, RELEASED, EXPIRED, FAILED, QUEUED, PREEMPTED = STATUSES
LISTED_STATUSES = (PENDING, ACTIVE, RELEASING, QUEUED)  # LiveLease: what GET /v1/leases lists, in that order
LIVE_STATUSES = frozenset(LISTED_STATUSES)
ENDED_STATUSES = frozenset(STATUSES) - LIVE_STATUSES
USABLE_STATUSES = (PENDING, ACTIVE)  # live and not being released: its expires_at means something
WORKER_STATES = ("starting", "ready")  # Lease.worker_state
STARTING, READY = WORKER_STATES
ROLES = ("service", "operator", "viewer")  # Role: what a caller of the registry may do


def parse_time(value: Any) -> datetime:
    """An RFC 3339 time from the wire (`2026-11-30T04:00:00Z`) as an aware datetime in UTC."""
    if not isinstance(value, str):
        raise ValueError(f"expected an RFC 3339 time string, got {value!r}")
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:  # the contract always sends UTC; be lenient about a missing offset
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def _optional_time(value: Any) -> datetime | None:
    return None if value is None else parse_time(value)


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True)
class Lease:
    """A lease: every field of the contract's Lease, times as aware UTC datetimes.

    `raw` is the JSON object exactly as the server sent it (fields this version does not know
    included); it is left out of equality and repr.
    """

    lease_id: str
    provider: str
    kind: str
    gpu: str
    status: str
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
    failure_reason: str | None = None
    worker_state: str = READY
    ready_at: datetime | None = None
    max_cost_per_hour: float | None = None
    cost_usd: float | None = None  # accrued so far while live, final once ended
    created_by: str | None = None  # the caller whose acquire made it (null from a service older than callers)
    ended_by: str | None = None  # who ended it: a caller's name, sweep, ttl-stream or reconciler; null while live
    priority: int = 50
    preemptible: bool = False
    queued_at: datetime | None = None  # when it joined the queue (null: it never waited)
    queued_until: datetime | None = None  # until when its acquire could wait in the queue
    queue_position: int | None = None  # 1 = admitted next (only where the service read the queue)
    queue_reason: str | None = None  # what a queued lease waits for
    admitted_at: datetime | None = None  # when a lease that waited was admitted
    preempt_at: datetime | None = None  # a preemption notice: the lease ends then
    preempt_priority: int | None = None  # with a notice: the priority of the lease it is preempted for
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_wire(cls, data: Any) -> Lease:
        """Build a Lease from the API's JSON object; ValueError when a required field is missing or bad."""
        if not isinstance(data, dict):
            raise ValueError(f"a lease must be a JSON object, got {type(data).__name__}")
        try:
            cost = data.get("cost_per_hour")
            return cls(
                lease_id=str(data["lease_id"]),
                provider=str(data.get("provider") or ""),
                kind=str(data["kind"]),
                gpu=str(data.get("gpu") or "none"),
                status=str(data["status"]),
                endpoint=_optional_str(data.get("endpoint")),
                created_at=parse_time(data["created_at"]),
                expires_at=parse_time(data["expires_at"]),
                released_at=_optional_time(data.get("released_at")),
                provider_token=_optional_str(data.get("provider_token")),
                owner_id=_optional_str(data.get("owner_id")),
                correlation_id=_optional_str(data.get("correlation_id")),
                region=_optional_str(data.get("region")),
                ttl_seconds=int(data["ttl_seconds"]),
                cost_per_hour=None if cost is None else float(cost),
                failure_reason=_optional_str(data.get("failure_reason")),
                # A service older than readiness hands out workers usable at once.
                worker_state=str(data.get("worker_state") or READY),
                ready_at=_optional_time(data.get("ready_at")),
                max_cost_per_hour=_optional_float(data.get("max_cost_per_hour")),
                cost_usd=_optional_float(data.get("cost_usd")),
                created_by=_optional_str(data.get("created_by")),
                ended_by=_optional_str(data.get("ended_by")),
                # A service older than the queue: its default priority, nothing preemptible.
                priority=50 if data.get("priority") is None else int(data["priority"]),
                preemptible=bool(data.get("preemptible") or False),
                queued_at=_optional_time(data.get("queued_at")),
                queued_until=_optional_time(data.get("queued_until")),
                queue_position=_optional_int(data.get("queue_position")),
                queue_reason=_optional_str(data.get("queue_reason")),
                admitted_at=_optional_time(data.get("admitted_at")),
                preempt_at=_optional_time(data.get("preempt_at")),
                preempt_priority=_optional_int(data.get("preempt_priority")),
                raw=dict(data),
            )
        except KeyError as missing:
            raise ValueError(f"lease is missing the field {missing.args[0]!r}") from missing
        except TypeError as error:
            raise ValueError(f"lease has a field of the wrong type: {error}") from error

    @property
    def is_live(self) -> bool:
        """True while the lease may still own a worker (pending, active or releasing), or waits in the queue."""
        return self.status in LIVE_STATUSES

    @property
    def is_queued(self) -> bool:
        """True while the lease waits in the queue (no slot, no worker yet)."""
        return self.status == QUEUED

    @property
    def has_notice(self) -> bool:
        """True while the lease is live with a preemption notice: it ends `preempted` at `preempt_at`."""
        return self.preempt_at is not None and self.is_live

    @property
    def is_ready(self) -> bool:
        """True once the lease is active and its worker reported usable."""
        return self.status == ACTIVE and self.worker_state == READY

    @property
    def is_starting(self) -> bool:
        """True while the lease is live and its worker has not been reported usable yet."""
        return self.status in USABLE_STATUSES and self.worker_state != READY

    def remaining(self, now: datetime | None = None) -> timedelta:
        """Time left until `expires_at` (negative once past), from `now` (default: the current time)."""
        return self.expires_at - (now or datetime.now(UTC))


@dataclass(frozen=True)
class Caller:
    """A caller of the registry (`GET /v1/callers`): never its token, which only `add` and `rotate` show, once.

    `owners` are the owner ids it may act as, the first its default; `principal_arn` the IAM user or role it signs
    as (AUTH_MODE=iam); `created_by` the operator who added it. `raw` is the JSON object as received.
    """

    name: str
    role: str
    owners: tuple[str, ...]
    principal_arn: str | None
    created_at: datetime
    created_by: str
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_wire(cls, data: Any) -> Caller:
        """Build a Caller from the API's JSON object; ValueError when a required field is missing or bad."""
        if not isinstance(data, dict):
            raise ValueError(f"a caller must be a JSON object, got {type(data).__name__}")
        try:
            owners = data["owners"]
            if not isinstance(owners, list):
                raise TypeError(f"owners is a {type(owners).__name__}, not a list")
            return cls(
                name=str(data["name"]),
                role=str(data["role"]),
                owners=tuple(str(owner) for owner in owners),
                principal_arn=_optional_str(data.get("principal_arn")),
                created_at=parse_time(data["created_at"]),
                created_by=str(data["created_by"]),
                raw=dict(data),
            )
        except KeyError as missing:
            raise ValueError(f"caller is missing the field {missing.args[0]!r}") from missing
        except TypeError as error:
            raise ValueError(f"caller has a field of the wrong type: {error}") from error
