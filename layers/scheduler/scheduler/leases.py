"""The lease use cases callers drive: acquire, get, list, renew, release."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime

from aws_lambda_powertools import Logger

from scheduler.errors import NoCapacity, ProviderFailed, StoreUnavailable
from scheduler.models import Lease, LeaseRequest, LeaseStatus, ListFilter, expiry_after, utc_now
from scheduler.policy import candidates_for, provision_first_available
from scheduler.providers.base import Provider, ProviderRequestFailed
from scheduler.providers.registry import ProviderRegistry
from scheduler.store import Claim, LeaseStateChanged, LeaseStore
from scheduler.workers import release_claimed

logger = Logger(child=True)

Clock = Callable[[], datetime]


def acquire(request: LeaseRequest, store: LeaseStore, providers: ProviderRegistry, clock: Clock = utc_now) -> Lease:
    """Record a pending lease, provision a worker on the first provider with capacity, activate it."""
    candidates = candidates_for(providers.in_order(), request)
    if not candidates:
        raise NoCapacity(f"no configured provider offers kind={request.kind} gpu={request.gpu}")
    now = clock()
    pending = Lease(
        lease_id=str(uuid.uuid4()),
        provider=candidates[0].name,
        kind=request.kind,
        gpu=request.gpu,
        status=LeaseStatus.PENDING,
        created_at=now.replace(microsecond=0),
        expires_at=expiry_after(now, request.ttl_seconds),
        owner_id=request.owner_id,
        correlation_id=request.correlation_id,
        region=request.region,
        ttl_seconds=request.ttl_seconds,
    )
    logger.append_keys(lease_id=pending.lease_id)
    store.create_pending(pending)
    # From here to `activate`, a crash leaves a `pending` row, and any worker made for it carries the
    # lease id (container label / pod name). The reconciler finds pending rows older than
    # PENDING_DEADLINE_SECONDS, removes every worker with that lease id on every provider, and ends
    # the row as `failed`; a worker whose row never became live is an orphan it removes after grace.
    try:
        provider, worker = provision_first_available(candidates, pending, request.env)
    except NoCapacity:
        store.fail_pending(pending.lease_id, clock())
        raise
    except ProviderRequestFailed as error:
        _remove_everywhere(candidates, pending.lease_id)
        store.fail_pending(pending.lease_id, clock())
        raise ProviderFailed(str(error), details={"lease_id": pending.lease_id}) from error
    try:
        return store.activate(pending.lease_id, provider.name, worker)
    except (LeaseStateChanged, StoreUnavailable) as error:
        # The sweep or reconciler ended the row meanwhile, or the store went away: the caller will
        # not get this lease, so its worker must not outlive the answer.
        _remove_everywhere([provider], pending.lease_id, worker.token)
        if isinstance(error, StoreUnavailable):
            raise
        raise NoCapacity("the lease ended before its worker was ready; try again") from error


def get(lease_id: str, store: LeaseStore) -> Lease:
    """Any lease still within its retention period."""
    return store.get(lease_id)


def list_live(query: ListFilter, store: LeaseStore, clock: Clock = utc_now) -> tuple[list[Lease], str | None]:
    """One page of live leases matching the filters."""
    return store.list_live(query, clock())


def renew(
    lease_id: str, owner: str | None, ttl_seconds: int | None, store: LeaseStore, clock: Clock = utc_now
) -> Lease:
    """Extend an active lease to now + ttl (its own ttl when none is given)."""
    return store.renew(lease_id, owner, ttl_seconds, clock())


def release(
    lease_id: str, owner: str | None, store: LeaseStore, providers: ProviderRegistry, clock: Clock = utc_now
) -> Lease:
    """Claim the lease for its owner, remove its worker, and record the release once it is confirmed."""
    claim: Claim = store.claim_release(lease_id, owner, clock())
    try:
        return release_claimed(claim, store, providers, clock)
    except ProviderRequestFailed as error:
        # The claim stays `releasing` with a due time: the next sweep takes it up again.
        raise ProviderFailed(
            f"the worker could not be removed yet; the release will be retried: {error}",
            details={"lease_id": lease_id},
        ) from error


def _remove_everywhere(providers: list[Provider], lease_id: str, token: str | None = None) -> None:
    for provider in providers:
        try:
            provider.release(lease_id, token)
        except Exception as error:  # noqa: BLE001 - cleanup must try every provider; the reconciler backs it up
            logger.warning(
                "cleanup after a failed acquire did not finish", extra={"provider": provider.name, "error": str(error)}
            )
