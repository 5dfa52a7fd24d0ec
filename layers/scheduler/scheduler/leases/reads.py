"""Reading leases: one by id (which may find its worker stopped and end it), a page of live ones."""

from __future__ import annotations

from collections.abc import Callable

from scheduler.clock import Clock, utc_now
from scheduler.deadline import Deadline
from scheduler.leases.outcomes import Read
from scheduler.models import Lease, ListFilter
from scheduler.store import LeaseStore

LeaseCheck = Callable[[Lease, Deadline | None], Read]


def get(lease_id: str, store: LeaseStore, check: LeaseCheck | None = None, deadline: Deadline | None = None) -> Read:
    """Any lease still within its retention period; `check` may find its worker stopped and end it first."""
    lease = store.get(lease_id)
    return check(lease, deadline) if check is not None else Read(lease)


def list_live(query: ListFilter, store: LeaseStore, clock: Clock = utc_now) -> tuple[list[Lease], str | None]:
    """One page of live leases matching the filters."""
    return store.list_live(query, clock())
