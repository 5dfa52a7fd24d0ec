"""Acquire: record a pending lease, provision a worker on the first provider that serves, activate it.

From the pending write to `activate`, a crash leaves a `pending` row, and any worker made for it
carries the lease id (container label / pod name). The reconciler finds pending rows older than
PENDING_DEADLINE_SECONDS, removes every worker with that lease id on every provider, and ends the
row as `failed` (giving its slots back); a worker whose row never became live is an orphan it
removes after the grace period.
"""

from __future__ import annotations

import contextlib
import uuid
from datetime import datetime
from typing import TYPE_CHECKING

from scheduler import policy
from scheduler.budgets import SHARED_OWNER, Reweighing, is_budget
from scheduler.callers.access import acquire_owner, check_owner_header
from scheduler.clock import expiry_after
from scheduler.costs import micros, money, usd
from scheduler.deadline import Deadline
from scheduler.errors import BudgetExceeded, InvalidRequest, NoCapacity, ProviderFailed, QuotaExceeded, StoreUnavailable
from scheduler.leases.outcomes import Acquired, AcquireOutcome, NotAcquired
from scheduler.lifecycle import LeaseStatus
from scheduler.limits import LeaseLimits
from scheduler.models import Lease
from scheduler.observability.log import Logger
from scheduler.providers.base import Provider
from scheduler.store import LeaseStateChanged
from scheduler.store.counters import WEIGHED_PREFIXES, Limit
from scheduler.store.items import InvalidNumber, epoch
from scheduler.store.prices import price_key

if TYPE_CHECKING:  # only the acquire path builds one
    from scheduler.callers.model import Caller
    from scheduler.leases.context import Context
    from scheduler.request_models import LeaseRequest
    from scheduler.store.port import LeaseStorePort

logger = Logger(child=True)

ENDED_MEANWHILE = "the lease ended before its worker was ready; try again"
_SHARED = f"{SHARED_OWNER!r} (leases without owner_id share it)"


def is_budget_entry(entry: str) -> bool:
    return entry.startswith(WEIGHED_PREFIXES)


def new_lease_id() -> str:
    """A fresh lease id (a UUID: unguessable, and safe in container and pod names)."""
    return str(uuid.uuid4())


def owned_request(caller: Caller, request: LeaseRequest, header: str | None = None) -> LeaseRequest:
    """The request with the owner its lease gets (`callers.access.acquire_owner`: the one it names, else the
    caller's first; secret mode: as named), once the caller may acquire for it (`header`: the X-Lease-Owner
    sent). What an Idempotency-Key's request is compared by, so a key means one owner's lease."""
    check_owner_header(caller, header)
    owner = acquire_owner(caller, request.owner_id)
    return request if owner == request.owner_id else request._replace(owner_id=owner)


def acquire(ctx: Context, request: LeaseRequest, lease_id: str | None = None) -> AcquireOutcome:
    """The lease, active on the first provider in policy order that served, or why there is none. Its owner is
    the one the caller may acquire for (`owned_request`; Forbidden raised otherwise), and its quota and budgets
    that owner's; it records the caller as its created_by.

    `lease_id` names the lease up front (so the caller's log lines carry it); default a new UUID.
    Every provider call ends by the context's deadline; a worker whose removal could not be confirmed by
    then leaves the lease `pending` for the reconciler.
    """
    request = owned_request(ctx.caller, request)
    deadline = ctx.deadline
    candidates = policy.candidates_for(ctx.providers.in_order(), request)
    if not candidates:
        return NotAcquired(NoCapacity(f"no configured provider offers kind={request.kind} gpu={request.gpu}"))
    unknown_region = _unknown_region(request, candidates)
    if unknown_region is not None:
        return NotAcquired(unknown_region)
    now = ctx.clock()
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
        max_cost_per_hour=request.max_cost_per_hour,
        created_by=ctx.caller.name,
    )
    slots = _Slots(ctx.store, ctx.limits, draft)
    recorded = slots.record_pending(candidates, request, deadline)
    if isinstance(recorded, NotAcquired):
        return recorded
    pending, remaining, refusals = recorded
    attempts = _Attempts(ctx, slots, pending)
    try:
        for provider in remaining:
            result = attempts.next(provider, request, refusals)
            if isinstance(result, policy.Provisioned):
                return attempts.activate(result)
            if isinstance(result, policy.Refused):
                return attempts.refused(remaining, refusals, result.reason)
    except LeaseStateChanged:
        _remove_everywhere(remaining, pending.lease_id, deadline=deadline)
        return NotAcquired(NoCapacity(ENDED_MEANWHILE))
    return attempts.none_served(refusals)


class _Slots:
    """The cap and quota slots one acquire holds, taken atomically with the lease's own writes."""

    def __init__(self, store: LeaseStorePort, limits: LeaseLimits, draft: Lease) -> None:
        self._store = store
        self._limits = limits
        self._draft = draft
        self._owner = limits.for_owner(draft.owner_id)
        self._provider: str | None = None
        self.held: tuple[str, ...] = ()
        self.prices = _PriceEstimates(store, draft)

    def record_pending(
        self, candidates: list[Provider], request: LeaseRequest, deadline: Deadline
    ) -> tuple[Lease, list[Provider], dict[str, str]] | NotAcquired:
        """Write the pending lease with the owner's slot and budgets and the first provider slot that is free."""
        refusals: dict[str, str] = {}
        budgets = self._budget_limits(candidates, request, deadline)
        for index, provider in enumerate(candidates):
            cap = self._limits.for_provider(provider.name)
            taken = [limit for limit in (self._owner, cap, *budgets) if limit is not None]
            lease = self._draft.replace(provider=provider.name)
            full = self._store.create_pending(lease, taken)
            if full is None:
                self._provider = provider.name
                self.held = tuple(sorted(limit.held for limit in taken))
                return lease, candidates[index:], refusals
            if is_budget(full):
                return NotAcquired(self.budget_refusal(full))
            if full == self._owner:
                owner = repr(self._draft.owner_id) if self._draft.owner_id is not None else _SHARED
                return NotAcquired(
                    QuotaExceeded(
                        f"owner {owner} already holds {full.maximum} live leases,"
                        f" the limit (MAX_LEASES_PER_OWNER={full.maximum})",
                        details={"limit": full.maximum},
                    )
                )
            refusals[provider.name] = _at_cap(full)
        return NotAcquired(NoCapacity("every provider is at its lease cap", details={"providers": refusals}))

    def _budget_limits(self, candidates: list[Provider], request: LeaseRequest, deadline: Deadline) -> list[Limit]:
        """The owner budgets, reserving the most any candidate's worker can cost (the worker's own price
        replaces it at activation)."""
        budgets = self._limits.budgets
        if not budgets.active:
            return []
        estimate = self.prices.estimate(candidates, request, deadline)
        return budgets.limits(self._draft.owner_id, estimate, self._lifetime(), epoch(self._draft.created_at))

    def _lifetime(self) -> int:
        """Seconds from the lease's creation to its expiry, as recorded (whole seconds: it may bill all of them)."""
        return epoch(self._draft.expires_at) - epoch(self._draft.created_at)

    def budget_refusal(self, limit: Limit) -> BudgetExceeded:
        """The 429 for a budget that would not take `limit`, with what it holds now."""
        in_use = self._store.counters([limit.counter]).get(limit.counter, 0)
        return self._limits.budgets.refusal(limit, in_use)

    def reweighing(self, cost_per_hour: float | None) -> Reweighing | None:
        """The held budgets re-weighed to the worker's own price (None: no budget held)."""
        if not any(is_budget_entry(entry) for entry in self.held):
            return None
        return self._limits.budgets.reweigh(
            self.held, cost_per_hour or 0.0, self._lifetime(), epoch(self._draft.created_at)
        )

    def hold_for(self, provider: Provider) -> str | None:
        """Before trying `provider`: move the provider slot to it (failover); why not, if it is full."""
        if provider.name == self._provider:
            return None
        old = self._limits.for_provider(self._provider) if self._provider else None
        new = self._limits.for_provider(provider.name)
        if old is not None or new is not None:
            moved = self._store.move_slot(self._draft.lease_id, self.held, old.counter if old else None, new)
            if isinstance(moved, Limit):
                return _at_cap(moved)
            self.held = moved
        self._provider = provider.name
        return None


class _PriceEstimates:
    """What a candidate's worker may cost, for the owner budgets: its provider's estimate (`price_bound`),
    or what the last worker of that sort was seen to cost when that was more (`store/prices.py`), within
    the request's ceiling. What a worker costs is noted at its activation when its provider's estimate
    did not cover it, so that the next acquires reserve it and no pod is made that the budget cannot keep."""

    def __init__(self, store: LeaseStorePort, draft: Lease) -> None:
        self._store = store
        self._draft = draft
        self._bounds: dict[str, float] = {}
        self._seen: dict[str, int] = {}

    def estimate(self, candidates: list[Provider], request: LeaseRequest, deadline: Deadline) -> float:
        """The most any candidate's worker may cost per hour (USD)."""
        self._bounds = {provider.name: provider.price_bound(request, deadline) or 0.0 for provider in candidates}
        keys = {name: self._key(name) for name in self._bounds}
        try:
            seen = self._store.seen_prices(list(keys.values()), self._draft.created_at)
        except StoreUnavailable:
            seen = {}  # an estimate: the lease's own write says whether the store is there
        self._seen = {name: seen[key] for name, key in keys.items() if key in seen}
        ceiling = request.max_cost_per_hour
        estimates = [
            max(bound, min(usd(self._seen.get(name, 0)), ceiling if ceiling is not None else float("inf")))
            for name, bound in self._bounds.items()
        ]
        return max(estimates, default=0.0)

    def note(self, provider: str, cost_per_hour: float | None, now: datetime) -> None:
        """After activation: what the worker costs, noted when its provider's estimate did not cover it (or
        a price noted before is no longer what workers cost). Best effort: a note lost costs an estimate."""
        if cost_per_hour is None or provider not in self._bounds:
            return
        price, seen = micros(cost_per_hour), self._seen.get(provider)
        if price == seen or (seen is None and price <= micros(self._bounds[provider])):
            return
        try:
            self._store.note_price(self._key(provider), price, now)
        except Exception as error:  # noqa: BLE001 - never fail an acquire over an estimate
            logger.warning("the worker's price could not be noted", extra={"provider": provider, "error": str(error)})

    def _key(self, provider: str) -> str:
        return price_key(provider, self._draft.kind.value, self._draft.gpu.value)


class _Attempts:
    """Trying the providers one after another for one pending lease, and each way that can end."""

    def __init__(self, ctx: Context, slots: _Slots, pending: Lease) -> None:
        self._store = ctx.store
        self._slots = slots
        self._pending = pending
        self._clock = ctx.clock
        self._deadline = ctx.deadline
        self._by = ctx.caller.name  # who gives up on the lease, when it ends `failed` here
        self._worker_may_exist = False
        self._cheapest: float | None = None

    def next(self, provider: Provider, request: LeaseRequest, refusals: dict[str, str]) -> policy.Attempt | None:
        """Try `provider` (None: it was passed over, its reason added to `refusals`)."""
        if self._deadline.expired:
            refusals[provider.name] = "not tried: the request's time budget ran out"
            return None
        full = self._slots.hold_for(provider)
        if full is not None:
            policy.skipped(provider.name, full)
            refusals[provider.name] = full
            return None
        result = policy.attempt(provider, self._pending, request.env, self._deadline)
        if isinstance(result, policy.Skipped):
            self._worker_may_exist = self._worker_may_exist or result.worker_may_exist
            if result.cheapest is not None:
                self._cheapest = min(result.cheapest, self._cheapest or result.cheapest)
        if isinstance(result, policy.Skipped | policy.Refused):
            refusals[provider.name] = result.reason
        return result

    def none_served(self, refusals: dict[str, str]) -> NotAcquired:
        """No provider served: the lease ends `failed` with each provider's reason, unless a worker may exist."""
        lease_id = self._pending.lease_id
        message = f"no provider can serve kind={self._pending.kind} gpu={self._pending.gpu} now"
        details: dict[str, object] = {**({"providers": refusals} if refusals else {}), "lease_id": lease_id}
        if self._pending.max_cost_per_hour is not None:
            details["max_cost_per_hour"] = self._pending.max_cost_per_hour
            details["cheapest_cost_per_hour"] = self._cheapest
            seen = f"{money(self._cheapest)} USD/h" if self._cheapest is not None else "no price"
            message += f" within max_cost_per_hour {money(self._pending.max_cost_per_hour)} (cheapest seen: {seen})"
        error = NoCapacity(message, details=details)
        if self._worker_may_exist:
            logger.warning("a worker may exist; the lease stays pending for the reconciler", extra=error.details)
            return NotAcquired(error, lease_id)
        reason = "; ".join(f"{name}: {why}" for name, why in refusals.items()) or message
        ended = self._store.fail_pending(lease_id, self._clock(), self._slots.held, reason=reason, by=self._by)
        return NotAcquired(error, lease_id, ended)

    def refused(self, tried: list[Provider], refusals: dict[str, str], reason: str) -> NotAcquired:
        """A provider refused: nothing may be left behind on any provider tried; then the lease ends `failed`."""
        lease_id = self._pending.lease_id
        ended = False
        if _remove_everywhere(tried, lease_id, deadline=self._deadline):
            ended = self._store.fail_pending(lease_id, self._clock(), self._slots.held, reason=reason, by=self._by)
        error = ProviderFailed(reason, details={"lease_id": lease_id, "providers": dict(refusals)})
        return NotAcquired(error, lease_id, ended)

    def activate(self, provisioned: policy.Provisioned) -> AcquireOutcome:
        """Record the worker; if that fails, the worker must not outlive the answer: removed now, not when
        the reconciler finds it."""
        provider, worker = provisioned.provider, provisioned.worker
        lease_id = self._pending.lease_id
        self._slots.held = tuple(sorted({*self._slots.held, *worker.held}))  # a fleet host's slot, if it took one
        try:
            now = self._clock()
            activated = self._store.activate(
                lease_id, provider.name, worker, now, self._slots.reweighing(worker.cost_per_hour)
            )
            self._slots.prices.note(provider.name, worker.cost_per_hour, now)
            if isinstance(activated, Limit):
                return self._over_budget(provider, worker.token, activated)
            return Acquired(activated)
        except BaseException as error:
            # Whatever stopped the write — the sweep or reconciler ended the row, the store went away,
            # a value DynamoDB refuses, a bug — the caller will not get this lease.
            removed = _remove_everywhere([provider], lease_id, worker.token, deadline=self._deadline)
            if isinstance(error, LeaseStateChanged):
                return NotAcquired(NoCapacity(ENDED_MEANWHILE))
            ended = False
            if removed and not isinstance(error, StoreUnavailable):
                with contextlib.suppress(Exception):  # best effort: else the reconciler ends the pending row
                    ended = self._store.fail_pending(lease_id, self._clock(), self._slots.held, by=self._by)
            if isinstance(error, InvalidNumber):
                message = f"{provider.name} described the worker with a value the lease store cannot record: {error}"
                return NotAcquired(ProviderFailed(message, details={"lease_id": lease_id}), lease_id, ended)
            raise

    def _over_budget(self, provider: Provider, token: str, limit: Limit) -> NotAcquired:
        """The worker costs more than the budget reserved for it and the rest does not fit: it goes at once."""
        lease_id = self._pending.lease_id
        refusal = self._slots.budget_refusal(limit)
        ended = False
        if _remove_everywhere([provider], lease_id, token, deadline=self._deadline):
            held, by = self._slots.held, self._by
            ended = self._store.fail_pending(lease_id, self._clock(), held, reason=refusal.message, by=by)
        return NotAcquired(refusal, lease_id, ended)


def _unknown_region(request: LeaseRequest, candidates: list[Provider]) -> InvalidRequest | None:
    """A 400 when the request names a region that no candidate with regions knows (None: fine)."""
    if request.region is None:
        return None
    known = [provider.regions() for provider in candidates]
    if all(regions is None for regions in known):
        return None  # no candidate places by region: the region is a label, as it always was
    names = sorted({region for regions in known if regions for region in regions})
    if request.region in names:
        return None
    return InvalidRequest(
        f"unknown region {request.region!r}; known regions: {', '.join(names)}",
        details={"problems": [{"field": "region", "problem": f"must be one of {', '.join(names)}"}]},
    )


def _at_cap(limit: Limit) -> str:
    return f"at its cap of {limit.maximum} live leases"


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
