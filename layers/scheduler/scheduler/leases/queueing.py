"""An acquire and the queue: the owner's priority limit, a lease yielding to queued ones of at least its priority,
and a request that may wait (`queue_seconds`) queued when nothing can serve it now.

What may wait: a provider at its cap (or yielded to the queue), a fleet host's cap or every provider answering
no capacity (`capacity`: lower priorities yield to it), the owner's `MAX_LEASES_PER_OWNER` or
`MAX_COST_PER_HOUR_PER_OWNER` (`owner`). A day's spend limit stays a refusal: waiting does not help within the day.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.budgets import PER_DAY
from scheduler.errors import BudgetExceeded, Forbidden, NoCapacity, QuotaExceeded, SchedulerError
from scheduler.leases.outcomes import Queued
from scheduler.lifecycle import LeaseStatus
from scheduler.models import Lease

if TYPE_CHECKING:  # the queue's records load when an acquire queues: one served at once never loads them
    from scheduler.leases.context import Context
    from scheduler.leases.provisioning import Requeue, Slots
    from scheduler.owner_policies import OwnerPolicies
    from scheduler.providers.base import Provider
    from scheduler.request_models import LeaseRequest
    from scheduler.store.queue_model import QueueWait


def check_priority(policies: OwnerPolicies | None, request: LeaseRequest) -> None:
    """Forbidden when the request's priority is above its owner's `max_priority` (OWNER_POLICIES). Without
    OWNER_POLICIES every priority a request can carry (0–100) is within the default: nothing is loaded."""
    if policies is None:
        return
    from scheduler.budgets import budget_owner

    owner = budget_owner(request.owner_id)
    highest = policies.of(owner).max_priority
    if request.priority > highest:
        raise Forbidden(
            f"priority {request.priority} is above owner {owner!r}'s max_priority {highest} (OWNER_POLICIES)",
            details={"max_priority": highest},
        )


def yielded(ctx: Context, request: LeaseRequest, candidates: list[Provider]) -> dict[str, str]:
    """The capped candidates a new lease leaves to the queue: those that queued leases of at least its priority wait
    for (one Query of the queue index, of those leases only). Only a cap's slot is the queue's first: where no cap
    counts a provider's room, the provider is asked for each lease alike (as admission treats it: room for all), so
    a queued lease it cannot serve (a GPU its host lacks) blocks nobody, and an acquire without caps reads nothing."""
    capped = [provider for provider in candidates if provider.name in ctx.limits.provider_caps]
    if not capped:
        return {}
    ahead = ctx.store.queue.queue_ahead(request.priority)
    return {
        provider.name: f"{ahead[provider.name]} queued lease(s) of priority {request.priority} or higher wait for it"
        for provider in capped
        if ahead.get(provider.name)
    }


def may_wait(error: SchedulerError) -> bool:
    """Whether a refusal is one that waiting in the queue can end."""
    if isinstance(error, BudgetExceeded):
        return (error.details or {}).get("budget") != PER_DAY
    return isinstance(error, QuotaExceeded | NoCapacity)


def wait_of(error: SchedulerError, candidates: list[Provider], request: LeaseRequest) -> QueueWait:
    """What a lease refused `error` waits for, in the caller's words."""
    from scheduler.store.queue_model import QueueWait

    providers = tuple(provider.name for provider in candidates)
    refusals = (error.details or {}).get("providers")
    reason = error.message
    if isinstance(refusals, dict) and refusals:
        reason += " (" + "; ".join(f"{name}: {why}" for name, why in refusals.items()) + ")"
    return QueueWait(reason, providers, isinstance(error, NoCapacity), dict(request.env))


def enqueue(
    ctx: Context, draft: Lease, request: LeaseRequest, candidates: list[Provider], error: SchedulerError
) -> Queued:
    """Record the lease `queued` (no slot, no worker) until its queued_until."""
    assert draft.queued_until is not None  # noqa: S101 - a request that may wait has one  # nosec B101
    lease = draft.replace(status=LeaseStatus.QUEUED, queued_at=draft.created_at, expires_at=draft.queued_until)
    wait = wait_of(error, candidates, request)
    ctx.store.queue.enqueue(lease, wait)
    return queued(ctx, lease.replace(queue_reason=wait.reason))


def requeuer(ctx: Context, pending: Lease, request: LeaseRequest, candidates: list[Provider], slots: Slots) -> Requeue:
    """Put a fresh acquire's pending lease in the queue when no provider had room (giving back its slots)."""
    from scheduler.store.queue_model import QueueWait

    providers = tuple(provider.name for provider in candidates)

    def requeue(reason: str) -> bool:
        # No backoff: the acquire's attempt is no failed admission; the queue's next pass tries it (and backs off).
        wait = QueueWait(reason, providers, True, dict(request.env))
        return ctx.store.queue.requeue(pending, ctx.clock(), slots.held, wait)

    return requeue


def queued(ctx: Context, lease: Lease) -> Queued:
    """The 202 answer: the queued lease with its place in the admission order."""
    from scheduler.leases.queue_view import position_of

    return Queued(lease.replace(queue_position=position_of(ctx, lease.lease_id)))
