"""Renew: extend an active lease, checking its owner, in one conditional write."""

from __future__ import annotations

from scheduler.clock import Clock, utc_now
from scheduler.models import Lease
from scheduler.store import LeaseStore


def renew(
    lease_id: str, owner: str | None, ttl_seconds: int | None, store: LeaseStore, clock: Clock = utc_now
) -> Lease:
    """Extend an active lease to now + ttl (its own ttl when none is given)."""
    return store.renew(lease_id, owner, ttl_seconds, clock())
