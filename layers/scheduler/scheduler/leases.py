"""The lease use cases callers drive: acquire, get, list, renew, release."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable
from datetime import datetime

from aws_lambda_powertools import Logger

from scheduler.deadline import Deadline
from scheduler.errors import NoCapacity, ProviderFailed, QuotaExceeded, StoreUnavailable
from scheduler.limits import LeaseLimits
from scheduler.models import Lease, LeaseRequest, LeaseStatus, ListFilter, expiry_after, utc_now
from scheduler.policy import NoCapacityWorkerUnsettled, ProviderRefused, candidates_for, provision_first_available
from scheduler.providers.base import Provider, ProviderCapacityError, ProviderRequestFailed
from scheduler.providers.registry import ProviderRegistry
from scheduler.store import Claim, LeaseStateChanged, LeaseStore
from scheduler.store.counters import LimitReached
from scheduler.store.items import InvalidNumber
from scheduler.workers import release_claimed

logger = Logger(child=True)

Clock = Callable[[], datetime]


def acquire(
    request: LeaseRequest,
    store: LeaseStore,
    providers: ProviderRegistry,
    limits: LeaseLimits | None = None,
    clock: Clock = utc_now,
    lease_id: str | None = None,
    deadline: Deadline | None = None,
) -> Lease:
    """Record a pending lease, provision a worker on the first provider with capacity, activate it.

    `lease_id` lets the caller name the lease up front (so its log lines carry it); default a new UUID.
    Every provider call ends by `deadline`; a worker whose removal could not be confirmed by then
    leaves the lease `pending` for the reconciler.
    """
    limits = limits or LeaseLimits()
    candidates = candidates_for(providers.in_order(), request)
    if not candidates:
        raise NoCapacity(f"no configured provider offers kind={request.kind} gpu={request.gpu}")
    now = clock()
    draft = Lease(
        lease_id=lease_id or new_lease_id(),
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
    slots = _Slots(store, limits, draft)
    pending, remaining, refusals = slots.record_pending(candidates)
    # From here to `activate`, a crash leaves a `pending` row, and any worker made for it carries the
    # lease id (container label / pod name). The reconciler finds pending rows older than
    # PENDING_DEADLINE_SECONDS, removes every worker with that lease id on every provider, and ends
    # the row as `failed` (giving its slots back); a worker whose row never became live is an orphan
    # it removes after the grace period.
    try:
        provider, worker = provision_first_available(
            remaining, pending, request.env, before_attempt=slots.hold_for, refusals=refusals, deadline=deadline
        )
    except NoCapacity as error:
        if isinstance(error, NoCapacityWorkerUnsettled):
            logger.warning("a worker may exist; the lease stays pending for the reconciler", extra=error.details)
        else:
            store.fail_pending(pending.lease_id, clock(), slots.held, reason=_reason(error))
        error.details = {**(error.details or {}), "lease_id": pending.lease_id}
        raise
    except LeaseStateChanged as error:
        _remove_everywhere(remaining, pending.lease_id, deadline=deadline)
        raise NoCapacity("the lease ended before its worker was ready; try again") from error
    except ProviderRequestFailed as error:
        failed_on = error.refusals if isinstance(error, ProviderRefused) else {}
        if _remove_everywhere(remaining, pending.lease_id, deadline=deadline):
            store.fail_pending(pending.lease_id, clock(), slots.held, reason=str(error))
        raise ProviderFailed(str(error), details={"lease_id": pending.lease_id, "providers": failed_on}) from error
    try:
        return store.activate(pending.lease_id, provider.name, worker)
    except BaseException as error:
        # Whatever stopped the write — the sweep or reconciler ended the row, the store went away, a
        # value DynamoDB refuses, a bug — the caller will not get this lease, so its worker must not
        # outlive the answer: removed now, not when the reconciler finds it.
        removed = _remove_everywhere([provider], pending.lease_id, worker.token, deadline=deadline)
        if isinstance(error, LeaseStateChanged):
            raise NoCapacity("the lease ended before its worker was ready; try again") from error
        if removed and not isinstance(error, StoreUnavailable):
            with contextlib.suppress(Exception):  # best effort: else the reconciler ends the pending row
                store.fail_pending(pending.lease_id, clock(), slots.held)
        if isinstance(error, InvalidNumber):
            raise ProviderFailed(
                f"{provider.name} described the worker with a value the lease store cannot record: {error}",
                details={"lease_id": pending.lease_id},
            ) from error
        raise


class _Slots:
    """The cap and quota slots one acquire holds, taken atomically with the lease's own writes."""

    def __init__(self, store: LeaseStore, limits: LeaseLimits, draft: Lease) -> None:
        self._store = store
        self._limits = limits
        self._draft = draft
        self._owner = limits.for_owner(draft.owner_id)
        self._provider: str | None = None
        self.held: tuple[str, ...] = ()

    def record_pending(self, candidates: list[Provider]) -> tuple[Lease, list[Provider], dict[str, str]]:
        """Write the pending lease with the owner's slot and the first provider slot that is free."""
        refusals: dict[str, str] = {}
        for index, provider in enumerate(candidates):
            cap = self._limits.for_provider(provider.name)
            taken = [limit for limit in (self._owner, cap) if limit is not None]
            lease = self._draft.model_copy(update={"provider": provider.name})
            try:
                self._store.create_pending(lease, taken)
            except LimitReached as reached:
                if reached.limit == self._owner:
                    raise QuotaExceeded(
                        f"owner {self._draft.owner_id!r} already holds {reached.limit.maximum} live leases,"
                        f" the limit (MAX_LEASES_PER_OWNER={reached.limit.maximum})",
                        details={"limit": reached.limit.maximum},
                    ) from reached
                refusals[provider.name] = f"at its cap of {reached.limit.maximum} live leases"
                continue
            self._provider = provider.name
            self.held = tuple(sorted(limit.counter for limit in taken))
            return lease, candidates[index:], refusals
        raise NoCapacity("every provider is at its lease cap", details={"providers": refusals})

    def hold_for(self, provider: Provider) -> None:
        """Before trying `provider`: move the provider slot to it (failover), or refuse if it is full."""
        if provider.name == self._provider:
            return
        old = self._limits.for_provider(self._provider) if self._provider else None
        new = self._limits.for_provider(provider.name)
        if old is not None or new is not None:
            try:
                self.held = self._store.move_slot(self._draft.lease_id, self.held, old.counter if old else None, new)
            except LimitReached as reached:
                raise ProviderCapacityError(f"at its cap of {reached.limit.maximum} live leases") from reached
        self._provider = provider.name


def new_lease_id() -> str:
    """A fresh lease id (a UUID: unguessable, and safe in container and pod names)."""
    return str(uuid.uuid4())


LeaseCheck = Callable[[Lease, Deadline | None], Lease]


def get(lease_id: str, store: LeaseStore, check: LeaseCheck | None = None, deadline: Deadline | None = None) -> Lease:
    """Any lease still within its retention period; `check` may find its worker stopped and end it first."""
    lease = store.get(lease_id)
    return check(lease, deadline) if check is not None else lease


def list_live(query: ListFilter, store: LeaseStore, clock: Clock = utc_now) -> tuple[list[Lease], str | None]:
    """One page of live leases matching the filters."""
    return store.list_live(query, clock())


def renew(
    lease_id: str, owner: str | None, ttl_seconds: int | None, store: LeaseStore, clock: Clock = utc_now
) -> Lease:
    """Extend an active lease to now + ttl (its own ttl when none is given)."""
    return store.renew(lease_id, owner, ttl_seconds, clock())


def release(
    lease_id: str,
    owner: str | None,
    store: LeaseStore,
    providers: ProviderRegistry,
    clock: Clock = utc_now,
    deadline: Deadline | None = None,
) -> Lease:
    """Claim the lease for its owner, remove its worker, and record the release once it is confirmed."""
    claim: Claim = store.claim_release(lease_id, owner, clock())
    try:
        return release_claimed(claim, store, providers, clock, deadline)
    except ProviderRequestFailed as error:
        # The claim stays `releasing` with a due time: the next sweep takes it up again.
        raise ProviderFailed(
            f"the worker could not be removed yet; the release will be retried: {error}",
            details={"lease_id": lease_id},
        ) from error


def _reason(error: NoCapacity) -> str:
    refusals = (error.details or {}).get("providers")
    if isinstance(refusals, dict) and refusals:
        return "; ".join(f"{name}: {why}" for name, why in refusals.items())
    return error.message


def _remove_everywhere(
    providers: list[Provider], lease_id: str, token: str | None = None, deadline: Deadline | None = None
) -> bool:
    """Remove the lease's worker on every provider; False if any removal was not confirmed."""
    removed = True
    for provider in providers:
        try:
            provider.release(lease_id, token, deadline)
        except Exception as error:  # noqa: BLE001 - cleanup must try every provider; the reconciler backs it up
            removed = False
            logger.warning(
                "cleanup after a failed acquire did not finish", extra={"provider": provider.name, "error": str(error)}
            )
    return removed
