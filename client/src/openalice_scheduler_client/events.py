"""What the lifecycle events and webhooks routes answer: a lease's events (its history), and webhooks.

A webhook delivery is signed as the Standard Webhooks specification says; verify one with any of its libraries
before trusting it, e.g. Python's `standardwebhooks` (not a dependency of this client):

```python
from standardwebhooks import Webhook

event = Webhook(secret).verify(body, headers)  # the secret `add_webhook` showed once; raises when forged or stale
LeaseEvent.from_delivery(headers["webhook-id"], event)
```
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# openalice-scheduler's event types (openapi.yaml EventType; tests/client hold the two together).
EVENT_TYPES = (
    "lease.queued",
    "lease.active",
    "lease.ready",
    "lease.renewed",
    "lease.preemption_notice",
    "lease.expiring",
    "lease.released",
    "lease.expired",
    "lease.failed",
    "lease.preempted",
)


@dataclass(frozen=True)
class LeaseEvent:
    """One lifecycle event of a lease: `sequence` orders a lease's events, `id` is the same however often it
    comes (dedupe by it), `actor` says who made the transition and `reason` why, where the lease says."""

    id: str
    type: str
    timestamp: str
    lease_id: str
    sequence: int
    status: str
    actor: str
    reason: str | None = None
    data: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_wire(cls, document: Any) -> LeaseEvent:
        """From an event document (history, EventBridge detail); ValueError when it is not one."""
        if not isinstance(document, dict) or not isinstance(document.get("data"), dict):
            raise ValueError("an event must be a JSON object with `data`")
        data = document["data"]
        try:
            return cls(
                id=str(document.get("id", "")),
                type=str(document["type"]),
                timestamp=str(document["timestamp"]),
                lease_id=str(data["lease_id"]),
                sequence=int(data["sequence"]),
                status=str(data.get("status")),
                actor=str(data.get("actor", "unknown")),
                reason=data.get("reason"),
                data=dict(data),
            )
        except (KeyError, TypeError, ValueError) as bad:
            raise ValueError(f"not an event document: {bad}") from bad

    @classmethod
    def from_delivery(cls, webhook_id: str, body: Any) -> LeaseEvent:
        """From a verified webhook delivery: its body, and its `webhook-id` header (the event's id)."""
        return cls.from_wire({**body, "id": webhook_id})


@dataclass(frozen=True)
class Webhook:
    """An owner's webhook (never its secret, which `add_webhook` shows once)."""

    id: str
    url: str
    events: tuple[str, ...]
    owner_id: str
    created_at: str
    created_by: str

    @classmethod
    def from_wire(cls, data: Any) -> Webhook:
        if not isinstance(data, dict):
            raise ValueError("a webhook must be a JSON object")
        try:
            return cls(
                id=str(data["id"]),
                url=str(data["url"]),
                events=tuple(str(kind) for kind in data["events"]),
                owner_id=str(data["owner_id"]),
                created_at=str(data["created_at"]),
                created_by=str(data["created_by"]),
            )
        except (KeyError, TypeError) as bad:
            raise ValueError(f"not a webhook: {bad}") from bad


@dataclass(frozen=True)
class CreatedWebhook:
    """`add_webhook`'s answer: the webhook and its signing secret (`whsec_…`), shown this once."""

    webhook: Webhook
    secret: str = field(repr=False)
