"""What the use cases return: results a handler turns into an answer and a metric, one per real outcome."""

from __future__ import annotations

from typing import Any, NamedTuple

from scheduler.errors import SchedulerError
from scheduler.lifecycle import LeaseStatus
from scheduler.models import Lease


class Acquired(NamedTuple):
    """A worker was provisioned and its lease is active (LeaseAcquired)."""

    lease: Lease

    def body(self) -> dict[str, Any]:
        """The 201 answer."""
        return {"lease": self.lease.wire(), "provider": self.lease.provider}


class Replayed(NamedTuple):
    """An Idempotency-Key repeated with the same body: the lease the first answer made, as it is now (read
    from the store, still usable), nothing provisioned."""

    lease: Lease

    @property
    def lease_id(self) -> str:
        return self.lease.lease_id

    @property
    def waiting(self) -> bool:
        """The lease waits in the queue, or is being admitted (answered 202, as the first answer was)."""
        return self.lease.status in (LeaseStatus.QUEUED, LeaseStatus.PENDING)

    def body(self) -> dict[str, Any]:
        """The 201 answer, shaped as the first one (the lease's own field order), with the lease as it is now."""
        return Acquired(self.lease).body()


class NotAcquired(NamedTuple):
    """No worker for the caller: `error` says why (its details name the lease row when one was written).

    `ended`: this attempt recorded a lease and ended it `failed` just now (LeaseFailed). A lease left
    `pending` for the reconciler (a worker may exist) is counted when the reconciler ends it.
    """

    error: SchedulerError
    lease_id: str | None = None
    ended: bool = False
    requeued: bool = False  # no provider had room and the lease went (back) to the queue, as it may wait


class Queued(NamedTuple):
    """Nothing can serve the request now and it may wait: its lease is `queued` (LeaseQueued), answered 202."""

    lease: Lease

    def body(self) -> dict[str, Any]:
        """The 202 answer, shaped as the 201 (the provider: the first it waits for)."""
        return {"lease": self.lease.wire(), "provider": self.lease.provider}


AcquireOutcome = Acquired | Replayed | NotAcquired | Queued


def lease_or_raise(outcome: AcquireOutcome) -> Lease:
    """The acquired lease, or the outcome's error raised (callers without a handler: tools and tests)."""
    if isinstance(outcome, Acquired):
        return outcome.lease
    if isinstance(outcome, NotAcquired):
        raise outcome.error
    raise TypeError("a replayed answer carries no Lease object; use its body")


class Read(NamedTuple):
    """A lease as read; `ended_now` when the read found its worker stopped and ended it (GhostLease);
    `became_ready` when this read recorded its worker ready (TimeToReady); `boot_failure` (the BootFailure
    reason) when this read ended it because its worker failed to boot."""

    lease: Lease
    ended_now: bool = False
    became_ready: bool = False
    boot_failure: str | None = None
