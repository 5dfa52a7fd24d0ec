"""The TTL stream: a live lease that DynamoDB's TTL deleted still has a worker; release it.

The event source mapping's FilterCriteria passes only TTL deletions of live leases; the same test is
repeated here (`is_ttl_deletion_of_live_lease`) so a misconfigured mapping can never turn a user
deletion into a release.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.clock import Clock, utc_now
from scheduler.deadline import Deadline
from scheduler.leases.workers import release_claimed
from scheduler.lifecycle import LIVE
from scheduler.models import Lease
from scheduler.providers.configured import ConfiguredProviders
from scheduler.store import LeaseStore

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


def release_ttl_deleted(
    old_image: dict[str, Any],
    store: LeaseStore,
    providers: ConfiguredProviders,
    clock: Clock = utc_now,
    deadline: Deadline | None = None,
) -> Lease | None:
    """Release the worker of a live lease that DynamoDB's TTL deleted; None if the lease is already handled.

    The lease is written back as a `releasing` claim first (only if absent), so it stays readable
    as `expired` for the retention period and a failed release is retried by the sweep.
    """
    claim = store.reclaim_ttl_deleted(old_image, clock())
    if claim is None:
        return None
    return release_claimed(claim, store, providers, clock, deadline)
