"""What a caller is told when a transition's conditional write lost: one mapping for both lease stores.

`lifecycle.refusal()` classifies why (from the lease as it was found); this turns the classification into
the error the caller sees, so `LeaseStore` and `MemoryLeaseStore` answer every refusal the same way.
"""

from __future__ import annotations

from scheduler import lifecycle
from scheduler.errors import LeaseConflict, LeaseNotFound, NotLeaseOwner, SchedulerError
from scheduler.lifecycle import Refusal, Seen, Transition


def refusal_error(
    transition: Transition, lease_id: str, found: Seen | None, now_epoch: int, owner: str | None
) -> SchedulerError:
    """The error for `transition` refused on a lease found as `found` (None: absent) at `now_epoch`."""
    why = lifecycle.refusal(transition, found, now_epoch, owner)
    status = found.status.value if found else "absent"
    if why is Refusal.NOT_FOUND:
        return LeaseNotFound(f"lease {lease_id} not found")
    if why is Refusal.NOT_ACTIVE:
        return LeaseNotFound(f"lease {lease_id} is not active (status {status})")
    if why is Refusal.EXPIRED:
        return LeaseNotFound(f"lease {lease_id} has expired")
    if why is Refusal.NOT_OWNER:
        return NotLeaseOwner(f"lease {lease_id} belongs to another owner")
    if why is Refusal.CONFLICT:
        return LeaseConflict(f"lease {lease_id} is {status}; it cannot be {transition.verb} now")
    return LeaseConflict(f"lease {lease_id} changed while it was being {transition.verb}; try again")
