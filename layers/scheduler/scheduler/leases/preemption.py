"""Preemption at the end of its notice: the sweep claims a lease whose preempt_at has passed, removes its worker,
and ends it `preempted`, handing its provider slot to the queued lease it was preempted for in the same
transaction (`LeaseStore.finish_preempted`) — so nobody else can take that slot in between — then provisions that
lease at once, as an admission does. When the preemptor no longer waits (admitted through another slot,
cancelled, expired) or cannot take the slot (its own quota or budget), the lease ends as any other, its slots
given back for the queue's next admission.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

from scheduler import policy
from scheduler.leases.admission import Admitted, draft_of, provision_admitted, request_of
from scheduler.leases.outcomes import AcquireOutcome
from scheduler.leases.provisioning import Slots
from scheduler.leases.workers import remove_worker
from scheduler.lifecycle import LeaseStatus
from scheduler.models import Lease
from scheduler.store import Claim, LeaseStateChanged
from scheduler.store.queue_model import Handover

if TYPE_CHECKING:
    from scheduler.leases.context import Context


class Preempted(NamedTuple):
    """A preemption done: the lease ended `preempted`, and its preemptor's provisioning when the slot went to it."""

    lease: Lease
    preemptor: AcquireOutcome | None = None


def reason_of(claim: Claim) -> str:
    by = f"a lease of priority {claim.preempt_priority}" if claim.preempt_priority is not None else "a lease"
    return f"preempted by {by} (lease {claim.preempted_for}), after its notice"


def preempt(ctx: Context, lease_id: str, now: datetime) -> Preempted | None:
    """End a lease whose preemption notice ran out; None when another actor has it. ProviderRequestFailed when
    its worker could not be removed yet: the claim keeps a due time and the next sweep retries."""
    claim = ctx.store.claim_preempted(lease_id, now, by=ctx.caller.name)
    if claim is None:
        return None
    note = remove_worker(ctx, claim.lease, claim.held_counters)
    reason = reason_of(claim) + (f"; {note}" if note else "")
    handed = _hand_over(ctx, claim, reason)
    if handed is not None:
        return handed
    try:
        return Preempted(ctx.store.finish_release(claim, ctx.clock(), reason=reason))
    except LeaseStateChanged:
        return Preempted(ctx.store.get(lease_id))


def _hand_over(ctx: Context, claim: Claim, reason: str) -> Preempted | None:
    """End the lease and admit its preemptor on its slot (one transaction), then provision the preemptor; None
    (nothing written) when the preemptor does not take it."""
    if claim.preempted_for is None:
        return None
    item = ctx.store.queue.queued_lease(claim.preempted_for)
    now = ctx.clock()
    if item is None or (item.lease.queued_until is not None and item.lease.queued_until <= now):
        return None
    provider_name = claim.lease.provider
    cap = ctx.limits.for_provider(provider_name)
    request = request_of(item)
    candidates = policy.candidates_for(ctx.providers.in_order(), request)
    own = [provider for provider in candidates if provider.name == provider_name]
    if cap is None or not own:
        return None  # no counted slot to hand over, or not one it could use
    slots = Slots(ctx.store, ctx.limits, draft_of(item, now, provider_name))
    budgets = slots.budget_limits(own, request, ctx.deadline)
    others = tuple(limit for limit in slots.limits_for(provider_name, budgets) if limit.counter != cap.counter)
    pending = draft_of(item, now, provider_name)
    handover = Handover(pending, cap.counter, others)
    try:
        ended = ctx.store.queue.finish_preempted(claim, now, handover, reason)
    except LeaseStateChanged:
        return Preempted(ctx.store.get(claim.lease.lease_id))
    if ended is None:
        return None
    slots.holding(provider_name, handover.held)
    rest = [provider for provider in candidates if provider.name != provider_name]
    outcome = provision_admitted(ctx, Admitted(request, slots, (pending, [*own, *rest], {}), item))
    return Preempted(ended.replace(status=LeaseStatus.PREEMPTED), outcome)
