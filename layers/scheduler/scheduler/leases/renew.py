"""Renew: extend an active lease, checking its owner, in one conditional write (with the owner's daily
budget, one transaction that also reserves the extension's spend).

Never past the end its provider gives the worker by itself (`ProvisionedWorker.ends_at`, a Modal
Sandbox's timeout, which nothing can extend): acquire recorded it on the lease, and the same write holds
the new expiry against it (409 `conflict` naming it). So renew asks no provider, and the renew function
never loads a driver. In `secret` mode it reads nothing first: one write, its owner checked in it. In `token`
and `iam` modes one read comes first, the caller's access to the lease (`leases/owned.py`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.callers.access import LeaseAction
from scheduler.leases.owned import write_owner
from scheduler.models import Lease
from scheduler.store.counters import Limit

if TYPE_CHECKING:
    from scheduler.leases.context import Context


def renew(ctx: Context, lease_id: str, header: str | None, ttl_seconds: int | None) -> Lease:
    """Extend an active lease the caller may renew (`header`: the X-Lease-Owner sent) to now + ttl (its own ttl
    when none is given), recording the caller as its renewed_by in the same write; BudgetExceeded when the
    extension's spend does not fit the owner's day, LeaseConflict when it would outlast the lease's worker."""
    owner = write_owner(ctx, LeaseAction.RENEW, lease_id, header)
    now, budgets, store = ctx.clock(), ctx.limits.budgets, ctx.store
    by = ctx.caller.name
    if budgets.per_day is None:
        return store.renew(lease_id, owner, ttl_seconds, now, by=by)
    renewed = store.renew_reserving(lease_id, owner, ttl_seconds, now, budgets, by=by)
    if isinstance(renewed, Limit):
        in_use = store.counters([renewed.counter]).get(renewed.counter, 0)
        raise budgets.refusal(renewed, in_use)
    return renewed
