"""Provisioning a recorded lease: the slots it holds (taken with its own write), the providers tried in policy
order (falling over on capacity), its activation, and each way that can end. Shared by `acquire` (a new lease,
recorded `pending`) and the queue's admission (a queued lease admitted `pending`, `leases/admission.py`): each
hands `Slots` the write that records the lease with its slots, and says what happens when no provider has room.

From the pending write to `activate`, a crash leaves a `pending` row, and any worker made for it
carries the lease id (container label / pod name). The reconciler finds pending rows older than
PENDING_DEADLINE_SECONDS, removes every worker with that lease id on every provider, and ends the
row as `failed` (giving its slots back); a worker whose row never became live is an orphan it
removes after the grace period.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

from scheduler import policy
from scheduler.budgets import SHARED_OWNER, Reweighing, is_budget
from scheduler.costs import micros, money, usd
from scheduler.deadline import Deadline
from scheduler.errors import BudgetExceeded, NoCapacity, ProviderFailed, QuotaExceeded, StoreUnavailable
from scheduler.leases.outcomes import Acquired, AcquireOutcome, NotAcquired
from scheduler.limits import LeaseLimits
from scheduler.models import Lease
from scheduler.providers.base import Provider
from scheduler.store import LeaseStateChanged
from scheduler.store.counters import WEIGHED_PREFIXES, Limit
from scheduler.store.items import InvalidNumber, epoch
from scheduler.store.prices import price_key

if TYPE_CHECKING:
    from scheduler.leases.context import Context
    from scheduler.request_models import LeaseRequest
    from scheduler.store.port import LeaseStorePort

logger = Logger(child=True)

ENDED_MEANWHILE = "the lease ended before its worker was ready; try again"
_SHARED = f"{SHARED_OWNER!r} (leases without owner_id share it)"

Record = Callable[[Lease, Sequence[Limit]], "Limit | None"]
"""Write the lease with a slot of each limit (one transaction): None once written, else the limit that is full."""
Requeue = Callable[[str], bool]
"""No provider had room: put the lease (back) in the queue saying why; False when it may not wait (any more)."""


def is_budget_entry(entry: str) -> bool:
    return entry.startswith(WEIGHED_PREFIXES)


def provision(
    ctx: Context,
    request: LeaseRequest,
    slots: Slots,
    recorded: tuple[Lease, list[Provider], dict[str, str]],
    requeue: Requeue | None = None,
) -> AcquireOutcome:
    """Try the providers in policy order for a recorded lease, activate it on the first that serves."""
    pending, remaining, refusals = recorded
    attempts = Attempts(ctx, slots, pending, requeue)
    try:
        for provider in remaining:
            result = attempts.next(provider, request, refusals)
            if isinstance(result, policy.Provisioned):
                return attempts.activate(result)
            if isinstance(result, policy.Refused):
                return attempts.refused(remaining, refusals, result.reason)
    except LeaseStateChanged:
        _remove_everywhere(remaining, pending.lease_id, deadline=ctx.deadline)
        return NotAcquired(NoCapacity(ENDED_MEANWHILE))
    return attempts.none_served(refusals)


class Slots:
    """The cap and quota slots one acquire holds, taken atomically with the lease's own writes."""

    def __init__(self, store: LeaseStorePort, limits: LeaseLimits, draft: Lease, record: Record | None = None) -> None:
        self._store = store
        self._record: Record = record or store.create_pending
        self._limits = limits
        self._draft = draft
        self._owner = limits.for_owner(draft.owner_id)
        self._provider: str | None = None
        self.held: tuple[str, ...] = ()
        self.prices = PriceEstimates(store, draft)

    def record_pending(
        self,
        candidates: list[Provider],
        request: LeaseRequest,
        deadline: Deadline,
        yielded: Mapping[str, str] | None = None,
    ) -> tuple[Lease, list[Provider], dict[str, str]] | NotAcquired:
        """Write the pending lease with the owner's slot and budgets and the first provider slot that is free.
        `yielded`: providers passed over for the queue (queued leases of at least this priority wait for them)."""
        refusals: dict[str, str] = {}
        budgets = self._budget_limits(candidates, request, deadline)
        for index, provider in enumerate(candidates):
            if yielded and provider.name in yielded:
                refusals[provider.name] = yielded[provider.name]
                continue
            taken = self.limits_for(provider.name, budgets)
            lease = self._draft.replace(provider=provider.name)
            full = self._record(lease, taken)
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
        message = "every provider is at its lease cap"
        if yielded and set(refusals) & set(yielded):
            message += " or left to the queued leases of at least this priority that wait for it"
        return NotAcquired(NoCapacity(message, details={"providers": refusals}))

    def limits_for(self, provider: str, budgets: Sequence[Limit]) -> list[Limit]:
        """What a lease on `provider` takes: the owner's quota, the provider's cap, the owner's budgets."""
        cap = self._limits.for_provider(provider)
        return [limit for limit in (self._owner, cap, *budgets) if limit is not None]

    def budget_limits(self, candidates: list[Provider], request: LeaseRequest, deadline: Deadline) -> list[Limit]:
        return self._budget_limits(candidates, request, deadline)

    def holding(self, provider: str, held: tuple[str, ...]) -> None:
        """The lease was recorded elsewhere (handed a preempted lease's slot) holding `held` on `provider`."""
        self._provider = provider
        self.held = held

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


class PriceEstimates:
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


class Attempts:
    """Trying the providers one after another for one pending lease, and each way that can end."""

    def __init__(self, ctx: Context, slots: Slots, pending: Lease, requeue: Requeue | None = None) -> None:
        self._requeue = requeue
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
        if self._requeue is not None and self._requeue(f"no provider had room: {reason}"):
            return NotAcquired(error, lease_id, requeued=True)
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
