"""The TTL stream: a live lease that DynamoDB's TTL deleted still has a worker; release it.

The event source mapping's FilterCriteria passes only TTL deletions of live leases; the same test is
repeated here (`is_ttl_deletion_of_live_lease`) so a misconfigured mapping can never turn a user
deletion into a release.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from scheduler.leases.workers import release_claimed
from scheduler.lifecycle import LIVE
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


def release_ttl_deleted(ctx: Context, old_image: dict[str, Any]) -> Lease | None:
    """Release the worker of a live lease that DynamoDB's TTL deleted; None if the lease is already handled.

    The lease is written back as a `releasing` claim first (only if absent), so it stays readable
    as `expired` for the retention period and a failed release is retried by the sweep.
    """
    claim = ctx.store.reclaim_ttl_deleted(old_image, ctx.clock(), by=ctx.caller.name)
    if claim is None:
        return None
    return release_claimed(ctx, claim)
