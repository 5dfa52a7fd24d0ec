"""What a release claim is, and what a conditional write that lost is called: shared by every lease store."""

from __future__ import annotations

from typing import NamedTuple

from scheduler.lifecycle import LeaseStatus
from scheduler.models import Lease
from scheduler.store import counters
from scheduler.store.items import Item, claimed_by, lease_from_item

# TTL must not delete a lease while someone holds a release claim on it: the claim pushes `ttl` out.
CLAIM_TTL_SECONDS = 30 * 24 * 3600


class LeaseStateChanged(Exception):
    """A conditional write lost: another actor changed the lease first."""


class Claim(NamedTuple):
    """The right, held by one actor, to release a lease's worker and record how it ended."""

    lease: Lease
    claim_id: str
    outcome: LeaseStatus
    held_counters: tuple[str, ...] = ()
    by: str | None = None  # who claimed it (the end records it as ended_by); None: not recorded
    preempted_for: str | None = None  # a preempted lease's: the queued lease its slot goes to
    preempt_priority: int | None = None  # and that lease's priority


def claim_of(item: Item, claim_id: str) -> Claim:
    """The claim a claiming write left on the lease (`item`: the lease after it)."""
    preempt_priority = item.get("preempt_priority", {}).get("N")
    return Claim(
        lease_from_item(item),
        claim_id,
        LeaseStatus(item["release_outcome"]["S"]),
        counters.held_by(item),
        claimed_by(item),
        item.get("preempted_for", {}).get("S"),
        None if preempt_priority is None else int(preempt_priority),
    )
