"""The leases table's stream: a live lease that DynamoDB's TTL deleted still has a worker, release it; a lease that
gave its slots back, or joined the queue, may let a queued one in, serve the queue.

The event source mapping's FilterCriteria passes only those records: TTL deletions of live leases, ends of
leases that held capacity (and so gave their slots back, a budget included), and leases entering the queue. The
same tests are repeated here (`is_ttl_deletion_of_live_lease`, `may_free_capacity`) so a misconfigured mapping
can never turn a user deletion into a release, nor every change of a lease into an admission pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from scheduler.leases.workers import release_claimed
from scheduler.lifecycle import ENDED, HOLDING, LIVE, LeaseStatus
from scheduler.models import Lease

if TYPE_CHECKING:
    from scheduler.leases.context import Context

TTL_PRINCIPAL = "dynamodb.amazonaws.com"


def is_ttl_deletion_of_live_lease(record: Mapping[str, Any]) -> bool:
    """True for a stream REMOVE made by DynamoDB's TTL process of a lease that was still live."""
    identity = record.get("userIdentity") or {}
    old_status = record.get("dynamodb", {}).get("OldImage", {}).get("status", {}).get("S")
    return (
        record.get("eventName") == "REMOVE"
        and identity.get("type") == "Service"
        and identity.get("principalId") == TTL_PRINCIPAL
        and old_status in {status.value for status in LIVE}
    )


def may_free_capacity(record: Mapping[str, Any]) -> bool:
    """True for a lease that ended after holding capacity (its slots given back), or one that joined the queue
    (a slot may have freed before it was visible there): a change after which the queue is to be served."""
    images = record.get("dynamodb", {})
    old = images.get("OldImage", {}).get("status", {}).get("S")
    new = images.get("NewImage", {}).get("status", {}).get("S")
    ended = record.get("eventName") == "MODIFY" and old in _HOLDING and new in _ENDED
    queued = record.get("eventName") == "INSERT" and new == LeaseStatus.QUEUED.value
    return ended or queued


_HOLDING = {status.value for status in HOLDING}
_ENDED = {status.value for status in ENDED}


def release_ttl_deleted(ctx: Context, old_image: dict[str, Any]) -> Lease | None:
    """Release the worker of a live lease that DynamoDB's TTL deleted; None if the lease is already handled.

    The lease is written back as a `releasing` claim first (only if absent), so it stays readable
    as `expired` for the retention period and a failed release is retried by the sweep.
    """
    claim = ctx.store.reclaim_ttl_deleted(old_image, ctx.clock(), by=ctx.caller.name)
    if claim is None:
        return None
    return release_claimed(ctx, claim)
