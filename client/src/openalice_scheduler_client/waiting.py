"""Waiting on a lease: through the queue, until it is admitted, and until its worker is ready.

Every wait long-polls `GET /v1/lease/{id}?wait_ready=N`: the service answers as soon as the worker is ready, or
after N seconds with the lease as it is. N is at most 25 s (the service's bound) and 5 s under the client's own
request timeout; while the lease is queued it is at most `QUEUED_POLL_SECONDS`, so that an admission is seen
soon and a caller showing the queue position can refresh it.

The time a lease spends queued does not count toward the wait's `timeout`: the queue has its own bound, the
lease's `queued_until`, at which the service ends it (`NotAdmitted` here). A lease still seen queued past its
`queued_until` (the service has not ended it yet) stops extending the wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

from .errors import BootFailed, NotAdmitted, ReadyTimeout
from .models import ACTIVE, Lease

MAX_WAIT_READY_SECONDS = 25  # the service's bound on one long poll (within API Gateway's 30 s)
QUEUED_POLL_SECONDS = 5  # while queued: one long poll's length

Progress = Callable[[Lease, float], None]


class LeaseReader(Protocol):
    """What a wait needs of a client (`SchedulerClient` is one)."""

    timeout: float

    def get(self, lease_id: str, *, wait_ready: int | None = None) -> Lease: ...

    def _sleep(self, seconds: float) -> None: ...


def wait_for(
    client: LeaseReader,
    lease_id: str,
    timeout: float,
    *,
    ready: bool = True,
    on_progress: Progress | None = None,
    lease: Lease | None = None,
    queued_poll: float = QUEUED_POLL_SECONDS,
) -> Lease:
    """The lease once its worker is ready (`ready`), or once it is active at all (not `ready`: out of the queue
    and provisioned). `lease` is the lease as last known, if known (a queued one is polled briefly from the
    start). Raises NotAdmitted (it ended in the queue), BootFailed (it ended otherwise first), ReadyTimeout
    (`timeout` seconds passed outside the queue first; the lease is still live)."""
    started = time.monotonic()
    deadline = started + timeout
    while True:
        waiting = lease is not None and lease.is_queued and not _past(lease.queued_until)
        longest = queued_poll if waiting or not ready else MAX_WAIT_READY_SECONDS
        left = longest if waiting else deadline - time.monotonic()  # the queue's time is not the wait's
        wait = int(max(0.0, min(longest, left, client.timeout - 5.0)))
        lease = client.get(lease_id, wait_ready=wait)
        now = time.monotonic()
        if on_progress is not None:
            on_progress(lease, now - started)
        if lease.is_ready or (not ready and lease.status == ACTIVE):
            return lease
        if lease.is_queued and not _past(lease.queued_until):
            deadline = max(deadline, now + timeout)  # the queue's time is not the wait's
        elif not lease.is_queued and not lease.is_starting:
            raise _ended(lease_id, lease)
        if now >= deadline:
            what = "still queued past its queued_until" if lease.is_queued else "still starting"
            raise ReadyTimeout(f"lease {lease_id}: the worker was {what} after {timeout:g} s", lease=lease)
        if wait == 0:
            client._sleep(min(1.0, max(0.0, deadline - now)))


def _past(moment: datetime | None) -> bool:
    return moment is not None and moment <= datetime.now(UTC)


def _ended(lease_id: str, lease: Lease) -> BootFailed | NotAdmitted:
    why = lease.failure_reason or f"the lease is {lease.status}"
    if lease.queued_at is not None and lease.admitted_at is None:
        return NotAdmitted(f"lease {lease_id}: never admitted from the queue: {why}", lease=lease)
    return BootFailed(f"lease {lease_id}: the worker never became ready: {why}", lease=lease)
