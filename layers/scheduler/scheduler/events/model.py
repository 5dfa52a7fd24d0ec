"""What a lifecycle event is: its type, its stable id, and the one document every channel carries.

The document — `{"id", "type", "timestamp", "data"}` — is the EventBridge event's `detail`, an entry of
`GET /v1/lease/{id}/events`, and, without `id` (which travels as the `webhook-id` header), the body of a
webhook delivery as the Standard Webhooks specification shapes it. docs/events/<type>.schema.json describes
it per type; tests/unit/events hold every event the producer emits to its schema.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

# EventBridge `source` of every event; its `detail-type` is the event's type.
SOURCE = "openalice.scheduler"


class EventType(StrEnum):
    """One per lease transition a caller may care about (the README's "Lifecycle events" lists when each comes)."""

    QUEUED = "lease.queued"
    ACTIVE = "lease.active"
    READY = "lease.ready"
    RENEWED = "lease.renewed"
    PREEMPTION_NOTICE = "lease.preemption_notice"
    EXPIRING = "lease.expiring"
    RELEASED = "lease.released"
    EXPIRED = "lease.expired"
    FAILED = "lease.failed"
    PREEMPTED = "lease.preempted"


# The service's own actors (a caller's name otherwise); "unknown" where the lease does not record who acted.
SWEEP = "sweep"
UNKNOWN = "unknown"
# The fields of `data` besides `sequence`, in the order the schemas list them. Never a provider token, an
# endpoint, an environment value or any other credential: a webhook may go to a third party.
DATA_FIELDS = (
    "lease_id",
    "owner_id",
    "status",
    "worker_state",
    "provider",
    "kind",
    "gpu",
    "region",
    "correlation_id",
    "created_at",
    "expires_at",
    "ready_at",
    "released_at",
    "preempt_at",
    "actor",
    "reason",
)


def event_id(lease_id: str, record_sequence: str, index: int) -> str:
    """The event's id: the same for the same stream record (a redelivered record gives the same ids), distinct
    across records (a record's SequenceNumber is unique in its stream) and across a record's events (`index`)."""
    digest = hashlib.sha256(f"{lease_id}\n{record_sequence}\n{index}".encode()).hexdigest()
    return f"evt_{digest[:32]}"


def format_epoch(epoch: int | None) -> str | None:
    """Epoch seconds as every time on the wire is written (RFC 3339, UTC, `Z`)."""
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class LifecycleEvent:
    """One event of one transition, before the lease's history numbered it (a plain class: the events function
    builds many per batch and a dataclass would compile its methods at its cold start)."""

    __slots__ = ("data", "epoch", "id", "record", "type")

    def __init__(self, *, id: str, type: EventType, epoch: int, record: str, data: dict[str, Any]) -> None:
        self.id = id
        self.type = type
        self.epoch = epoch  # when the transition was written (the stream record's ApproximateCreationDateTime)
        self.record = record  # the stream record's SequenceNumber
        self.data = data  # DATA_FIELDS, without `sequence`

    @property
    def lease_id(self) -> str:
        return str(self.data["lease_id"])

    @property
    def owner_id(self) -> str | None:
        owner = self.data.get("owner_id")
        return owner if isinstance(owner, str) else None

    def document(self, sequence: int) -> dict[str, Any]:
        """The event as every channel carries it, numbered `sequence` in its lease's history."""
        return {
            "id": self.id,
            "type": self.type.value,
            "timestamp": format_epoch(self.epoch),
            "data": {**self.data, "sequence": sequence},
        }

    def __repr__(self) -> str:
        return f"LifecycleEvent({self.type.value} {self.lease_id} {self.id})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LifecycleEvent):
            return NotImplemented
        return (self.id, self.type, self.epoch, self.record, self.data) == (
            other.id,
            other.type,
            other.epoch,
            other.record,
            other.data,
        )

    def __hash__(self) -> int:
        return hash(self.id)


def webhook_body(document: dict[str, Any]) -> str:
    """A delivery's body: the document without its id (the `webhook-id` header), as the specification shapes it."""
    body = {"type": document["type"], "timestamp": document["timestamp"], "data": document["data"]}
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)
