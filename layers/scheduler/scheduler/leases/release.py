"""Release: claim the lease for its owner, remove its worker, record the release once it is confirmed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.errors import ProviderFailed
from scheduler.leases.workers import release_claimed
from scheduler.models import Lease
from scheduler.providers.base import ProviderRequestFailed

if TYPE_CHECKING:
    from scheduler.leases.context import Context


def release(ctx: Context, lease_id: str, owner: str | None) -> Lease:
    """The released lease; LeaseNotFound / NotLeaseOwner from the claim, ProviderFailed if the worker stays.

    A worker that could not be removed keeps the claim `releasing` with a due time: the next sweep
    takes it up again.
    """
    claim = ctx.store.claim_release(lease_id, owner, ctx.clock())
    try:
        return release_claimed(ctx, claim)
    except ProviderRequestFailed as error:
        raise ProviderFailed(
            f"the worker could not be removed yet; the release will be retried: {error}",
            details={"lease_id": lease_id},
        ) from error
