"""Release: claim the lease for its owner, remove its worker, record the release once it is confirmed."""

from __future__ import annotations

from scheduler.clock import Clock, utc_now
from scheduler.deadline import Deadline
from scheduler.errors import ProviderFailed
from scheduler.leases.workers import release_claimed
from scheduler.models import Lease
from scheduler.providers.base import ProviderRequestFailed
from scheduler.providers.configured import ConfiguredProviders
from scheduler.store import LeaseStore


def release(
    lease_id: str,
    owner: str | None,
    store: LeaseStore,
    providers: ConfiguredProviders,
    clock: Clock = utc_now,
    deadline: Deadline | None = None,
) -> Lease:
    """The released lease; LeaseNotFound / NotLeaseOwner from the claim, ProviderFailed if the worker stays.

    A worker that could not be removed keeps the claim `releasing` with a due time: the next sweep
    takes it up again.
    """
    claim = store.claim_release(lease_id, owner, clock())
    try:
        return release_claimed(claim, store, providers, clock, deadline)
    except ProviderRequestFailed as error:
        raise ProviderFailed(
            f"the worker could not be removed yet; the release will be retried: {error}",
            details={"lease_id": lease_id},
        ) from error
