"""Reading leases: one by id (which may find its worker stopped and end it), a page of live ones."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from scheduler.clock import Clock, utc_now
from scheduler.deadline import Deadline
from scheduler.leases.outcomes import Read
from scheduler.models import Lease, ListFilter

if TYPE_CHECKING:  # a read of a starting lease loads the readiness code (and the drivers) when it needs them
    from scheduler.leases.readiness import ReadinessPolicy
    from scheduler.providers.configured import ConfiguredProviders
    from scheduler.store import LeaseStore

LeaseCheck = Callable[[Lease, Deadline | None], Read]


def get(lease_id: str, store: LeaseStore, check: LeaseCheck | None = None, deadline: Deadline | None = None) -> Read:
    """Any lease still within its retention period; `check` may find its worker stopped and end it first."""
    lease = store.get(lease_id)
    return check(lease, deadline) if check is not None else Read(lease)


def get_when_ready(
    lease_id: str,
    wait_seconds: float,
    store: LeaseStore,
    providers: ConfiguredProviders,
    policy: Callable[[], ReadinessPolicy],
    check: LeaseCheck | None = None,
    clock: Clock = utc_now,
    deadline: Deadline | None = None,
) -> Read:
    """A lease whose worker is starting is refreshed from its provider (at most every couple of seconds per
    lease) and waited on for up to `wait_seconds`; any other lease is read as `get` reads it."""
    lease = store.get(lease_id)
    if not lease.is_starting:
        return check(lease, deadline) if check is not None else Read(lease)
    from scheduler.leases.readiness import wait_ready

    waited = wait_ready(lease_id, wait_seconds, store, providers, policy(), clock, deadline, read=lease)
    return Read(waited.lease, became_ready=waited.became_ready, boot_failure=waited.boot_failure)


def list_live(query: ListFilter, store: LeaseStore, clock: Clock = utc_now) -> tuple[list[Lease], str | None]:
    """One page of live leases matching the filters."""
    return store.list_live(query, clock())
