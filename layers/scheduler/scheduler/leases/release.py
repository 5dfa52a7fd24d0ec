"""Release: claim the lease for its owner, remove its worker, record the release once it is confirmed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.callers.access import LeaseAction
from scheduler.errors import LeaseQueued, ProviderFailed
from scheduler.leases.owned import write_owner
from scheduler.leases.workers import release_claimed
from scheduler.models import Lease
from scheduler.providers.base import ProviderRequestFailed

if TYPE_CHECKING:
    from scheduler.leases.context import Context


def release(ctx: Context, lease_id: str, header: str | None) -> Lease:
    """The released lease, if the caller may release it (`header`: the X-Lease-Owner sent); LeaseNotFound /
    OtherOwnersLease / NotLeaseOwner / Forbidden, or ProviderFailed if the worker stays.

    A worker that could not be removed keeps the claim `releasing` with a due time: the next sweep
    takes it up again.
    """
    return release_owned(ctx, lease_id, write_owner(ctx, LeaseAction.RELEASE, lease_id, header))


def release_owned(ctx: Context, lease_id: str, owner: str | None) -> Lease:
    """Release a lease the caller was found to act for: the claim holds it to `owner` (OWNER guard) and records
    the caller as its claimant (ended_by once released). A queued lease is cancelled (no worker was made for it:
    one write, no claim)."""
    try:
        claim = ctx.store.claim_release(lease_id, owner, ctx.clock(), by=ctx.caller.name)
    except LeaseQueued:
        return ctx.store.queue.cancel_queued(lease_id, owner, ctx.clock(), by=ctx.caller.name)
    try:
        return release_claimed(ctx, claim)
    except ProviderRequestFailed as error:
        raise ProviderFailed(
            f"the worker could not be removed yet; the release will be retried: {error}",
            details={"lease_id": lease_id},
        ) from error
