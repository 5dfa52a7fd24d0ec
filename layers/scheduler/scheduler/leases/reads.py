"""Reading leases: one by id (which may find its worker stopped and end it), a page of live ones."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from scheduler.callers.access import LeaseAction, readable_owners
from scheduler.leases.outcomes import Read
from scheduler.leases.owned import live_page, readable_lease
from scheduler.lifecycle import LeaseStatus
from scheduler.models import Lease, ListFilter

if TYPE_CHECKING:  # a read of a starting lease loads the readiness code (and the drivers) when it needs them
    from scheduler.leases.context import Context
    from scheduler.leases.readiness import ReadinessPolicy

LeaseCheck = Callable[["Context", Lease], Read]
# What a wait goes through before the worker's readiness: the queue, and an admission's provisioning.
_BEFORE_A_WORKER = frozenset({LeaseStatus.QUEUED, LeaseStatus.PENDING})
POLL_SECONDS = 1.0  # a waiting reader reads the lease item this often


def get(ctx: Context, lease_id: str, check: LeaseCheck | None = None, *, header: str | None = None) -> Read:
    """Any lease still within its retention period that the caller may read (`header`: the X-Lease-Owner sent);
    `check` may find its worker stopped and end it first."""
    lease = readable_lease(ctx, LeaseAction.READ, lease_id, header)
    return check(ctx, lease) if check is not None else Read(lease)


def get_when_ready(
    ctx: Context,
    lease_id: str,
    wait_seconds: float,
    policy: Callable[[], ReadinessPolicy],
    check: LeaseCheck | None = None,
    *,
    header: str | None = None,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> Read:
    """A lease whose worker is starting is refreshed from its provider (at most every couple of seconds per
    lease) and waited on for up to `wait_seconds`; a queued one (or one being admitted) is read once a second
    until it is active, within the same seconds; any other lease is read as `get` reads it. `policy` is
    asked for only then (it loads the readiness code). The caller's access is decided before anything else: a
    read it may not make never reaches a provider."""
    lease = readable_lease(ctx, LeaseAction.READ, lease_id, header)
    until = monotonic() + min(max(0.0, wait_seconds), ctx.deadline.remaining())
    while lease.status in _BEFORE_A_WORKER and monotonic() < until:
        sleep(min(POLL_SECONDS, until - monotonic()))
        lease = ctx.store.get(lease_id)
    if not lease.is_starting:
        return check(ctx, lease) if check is not None else Read(lease)
    from scheduler.leases.readiness import wait_ready

    left = max(0.0, until - monotonic())
    waited = wait_ready(ctx, lease_id, left, policy(), read=lease, sleep=sleep, monotonic=monotonic)
    return Read(waited.lease, became_ready=waited.became_ready, boot_failure=waited.boot_failure)


def list_live(ctx: Context, query: ListFilter) -> tuple[list[Lease], str | None]:
    """One page of the live leases matching the filters that the caller may read (a service: its owners')."""
    return live_page(ctx, query, readable_owners(ctx.caller, query.owner_id))
