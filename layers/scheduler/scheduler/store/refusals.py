"""What a caller is told when a conditional write on a lease is refused: the state machine's one
classification (`lifecycle.refusal`), as the domain error the HTTP edge answers."""

from __future__ import annotations

from datetime import UTC, datetime

from scheduler import lifecycle
from scheduler.errors import LeaseConflict, LeaseNotFound, LeaseQueued, NotLeaseOwner, Preempting, SchedulerError
from scheduler.lifecycle import Refusal, Transition
from scheduler.models import format_time
from scheduler.store.items import Item, seen


def refusal_error(
    transition: Transition,
    lease_id: str,
    item: Item,
    now_epoch: int,
    owner: str | None,
    new_expiry: int | None = None,
) -> SchedulerError:
    """Why `transition` was refused for the lease as `item` holds it ({}: absent), in the caller's words;
    `new_expiry`: the expiry a renewal asked for (None: not known)."""
    found = seen(item)
    why = lifecycle.refusal(transition, found, now_epoch, owner, new_expiry)
    status = found.status.value if found else "absent"
    if why is Refusal.NOT_FOUND:
        return LeaseNotFound(f"lease {lease_id} not found")
    if why is Refusal.NOT_ACTIVE:
        return LeaseNotFound(f"lease {lease_id} is not active (status {status})")
    if why is Refusal.QUEUED:
        return LeaseQueued(f"lease {lease_id} is not active (status {status}: it waits in the queue)")
    if why is Refusal.EXPIRED:
        return LeaseNotFound(f"lease {lease_id} has expired")
    if why is Refusal.NOT_OWNER:
        return NotLeaseOwner(f"lease {lease_id} belongs to another owner")
    if why is Refusal.CONFLICT:
        return LeaseConflict(f"lease {lease_id} is {status}; it cannot be {transition.verb} now")
    if why is Refusal.PREEMPTING and found is not None and found.preempt_epoch is not None:
        at = format_time(datetime.fromtimestamp(found.preempt_epoch, UTC))
        return Preempting(
            f"lease {lease_id} has a preemption notice: it ends at {at} (preempted by a lease of higher priority)"
            " and cannot be renewed past that",
            details={"preempt_at": at},
        )
    if why is Refusal.PAST_WORKER_END and found is not None and found.worker_ends_epoch is not None:
        ends = format_time(datetime.fromtimestamp(found.worker_ends_epoch, UTC))
        provider = item.get("provider", {}).get("S", "its provider")
        return LeaseConflict(
            f"lease {lease_id} cannot be renewed past {ends}: {provider} ends its worker then, whatever the lease"
            " (fixed when the worker was made); acquire a new lease for longer",
            details={"worker_ends_at": ends},
        )
    return LeaseConflict(f"lease {lease_id} changed while it was being {transition.verb}; try again")
