"""The producer: one DynamoDB stream record of the leases table (old image → new image) → the events of that
transition, in order. Pure: no AWS call, no clock but the record's own time.

Statuses are read by name from the images, not through `LeaseStatus`, so that a status this code does not know
yet (`queued`, `preempted`, issue 26) maps by its name the day it is written, and an image of any age decodes:

- a new lease `queued` → lease.queued; `pending` (provisioning) → nothing yet; a pending lease put in the queue
  when no provider had room → lease.queued, unless it was admitted from the queue (its old image has
  `admitted_epoch`): then it is back where it was, its reason and retry written on the lease, and no event is
  sent (a lease that keeps failing its admission would otherwise send one at each retry);
- into `active` → lease.active, then lease.ready when its worker ran at once (one record, two events);
- an active lease's worker `starting` → `ready` → lease.ready;
- an active lease's `expires_epoch` moved (a renewal: later, or sooner with a shorter ttl) → lease.renewed;
- `preempt_at` (issue 26) appearing → lease.preemption_notice;
- the sweep's warning mark (`warned_expiry`) set for the lease's current expiry → lease.expiring;
- into an ended status (released, expired, failed, preempted) → lease.<status>;
- `releasing` (a claim), a readiness check, a slot moved, index keys: no event; a REMOVE (TTL): none either,
  but the history of an ended lease goes with it (`purged_lease`).

Only a MODIFY changes status: an INSERT of anything but a queued lease (the TTL stream handler writing a
deleted lease back as `releasing`, `make run` restoring its snapshot) is no transition.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from scheduler.events.model import SWEEP, UNKNOWN, EventType, LifecycleEvent, event_id, format_epoch

Image = Mapping[str, Mapping[str, Any]]

ENDED = {
    "released": EventType.RELEASED,
    "expired": EventType.EXPIRED,
    "failed": EventType.FAILED,
    "preempted": EventType.PREEMPTED,
}
# The attribute the sweep writes when it warns of an expiry: the expires_epoch it warned of (lifecycle.WARN_EXPIRY).
WARNED = "warned_expiry"
# Written by an admission from the queue (lifecycle.ADMITTED): a pending lease that has it came from the queue.
ADMITTED = "admitted_epoch"
# Issue 26's preemption notice, by the names its item may use (epoch seconds).
PREEMPT_AT = ("preempt_at", "preempt_epoch")


def _text(image: Image, name: str) -> str | None:
    value = image.get(name, {}).get("S")
    return value if isinstance(value, str) else None


def _epoch(image: Image, *names: str) -> int | None:
    for name in names:
        value = image.get(name, {}).get("N")
        if isinstance(value, str):
            return int(float(value))
    return None


def _record_epoch(dynamodb: Mapping[str, Any]) -> int:
    """When the write happened: Lambda hands ApproximateCreationDateTime as epoch seconds (boto3, as a datetime)."""
    stamp = dynamodb.get("ApproximateCreationDateTime")
    if isinstance(stamp, datetime):
        return int(stamp.timestamp())
    if isinstance(stamp, int | float) and not isinstance(stamp, bool):
        return int(stamp)
    return int(time.time())


def transitions(event_name: str, old: Image, new: Image) -> list[EventType]:
    """The event types of one change of a lease item, in the order they happened."""
    if event_name == "REMOVE" or not new:
        return []
    before, after = _text(old, "status"), _text(new, "status")
    if event_name == "INSERT" or not old:
        return [EventType.QUEUED] if after == "queued" else []
    found: list[EventType] = []
    if after != before:
        if after == "queued":
            if before != "pending" or ADMITTED not in old:
                found.append(EventType.QUEUED)
        elif after == "active":
            found.append(EventType.ACTIVE)
            if _text(new, "worker_state") == "ready":
                found.append(EventType.READY)
        elif after in ENDED:
            found.append(ENDED[after])
        return found
    if after != "active":
        return found
    if _text(old, "worker_state") != "ready" and _text(new, "worker_state") == "ready":
        found.append(EventType.READY)
    old_expiry, new_expiry = _epoch(old, "expires_epoch"), _epoch(new, "expires_epoch")
    if old_expiry is not None and new_expiry is not None and new_expiry != old_expiry:
        found.append(EventType.RENEWED)  # only a renewal moves an active lease's expiry (later, or sooner)
    if _epoch(old, *PREEMPT_AT) is None and _epoch(new, *PREEMPT_AT) is not None:
        found.append(EventType.PREEMPTION_NOTICE)
    warned = _epoch(new, WARNED)
    if warned is not None and warned == new_expiry and _epoch(old, WARNED) != warned:
        found.append(EventType.EXPIRING)
    return found


def actor_of(kind: EventType, old: Image, new: Image, types: list[EventType]) -> str:
    """Who made the transition, as the lease records it (`created_by`, `renewed_by`, `ready_by`, `ended_by`,
    `claimed_by`: a caller's name, `sweep`, `ttl-stream`, `reconciler`); `unknown` where it does not."""
    if kind in (EventType.QUEUED, EventType.ACTIVE) or (kind is EventType.READY and EventType.ACTIVE in types):
        return _text(new, "created_by") or UNKNOWN
    if kind is EventType.READY:
        return _text(new, "ready_by") or UNKNOWN
    if kind is EventType.RENEWED:
        return _text(new, "renewed_by") or UNKNOWN
    if kind is EventType.EXPIRING:
        return SWEEP  # only the sweep writes the warning mark
    if kind in ENDED.values():
        return _text(new, "ended_by") or _text(old, "claimed_by") or UNKNOWN
    return UNKNOWN


def reason_of(kind: EventType, new: Image) -> str | None:
    """Why, where the lease says: an end's failure_reason (a failed worker, a host retired, a preemption)."""
    if kind in ENDED.values():
        return _text(new, "failure_reason") or _text(new, "preempt_reason")
    if kind is EventType.PREEMPTION_NOTICE:
        priority = _epoch(new, "preempt_priority")  # a number attribute, read as one
        return f"preempted for a queued lease of priority {priority}" if priority is not None else None
    return None


def data_of(new: Image) -> dict[str, Any]:
    """What every event says of the lease (`model.DATA_FIELDS`), never a token, an endpoint or a setting."""
    return {
        "lease_id": _text(new, "lease_id"),
        "owner_id": _text(new, "owner_id"),
        "status": _text(new, "status"),
        "worker_state": _text(new, "worker_state") or "starting",
        "provider": _text(new, "provider"),
        "kind": _text(new, "kind"),
        "gpu": _text(new, "gpu"),
        "region": _text(new, "region"),
        "correlation_id": _text(new, "correlation_id"),
        "created_at": format_epoch(_epoch(new, "created_epoch")),
        "expires_at": format_epoch(_epoch(new, "expires_epoch")),
        "ready_at": format_epoch(_epoch(new, "ready_epoch")),
        "released_at": format_epoch(_epoch(new, "released_epoch")),
        "preempt_at": format_epoch(_epoch(new, *PREEMPT_AT)),
    }


def events_of(record: Mapping[str, Any]) -> list[LifecycleEvent]:
    """The events of one stream record, in order (none for a change that is no lifecycle transition)."""
    dynamodb = record.get("dynamodb") or {}
    old: Image = dynamodb.get("OldImage") or {}
    new: Image = dynamodb.get("NewImage") or {}
    types = transitions(str(record.get("eventName", "")), old, new)
    if not types:
        return []
    sequence = str(dynamodb.get("SequenceNumber", ""))
    lease_id = _text(new, "lease_id") or ""
    epoch = _record_epoch(dynamodb)
    base = data_of(new)
    return [
        LifecycleEvent(
            id=event_id(lease_id, sequence, index),
            type=kind,
            epoch=epoch,
            record=sequence,
            data={**base, "actor": actor_of(kind, old, new, types), "reason": reason_of(kind, new)},
        )
        for index, kind in enumerate(types)
    ]


def purged_lease(record: Mapping[str, Any]) -> str | None:
    """The lease whose history goes with this record: an ended lease TTL deleted at the end of its retention
    (a live one TTL deleted is written back by the TTL stream handler, and keeps its history)."""
    if record.get("eventName") != "REMOVE":
        return None
    old: Image = (record.get("dynamodb") or {}).get("OldImage") or {}
    if _text(old, "status") in ENDED:
        return _text(old, "lease_id")
    return None
