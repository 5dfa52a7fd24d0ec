"""The events function's use case: one stream record of the leases table → its events numbered in the lease's
history, published on the stack's bus, and handed to the owner's webhooks (one queued delivery per webhook that
takes the type); an ended lease's REMOVE at the end of its retention takes its history with it.

Nothing here is on the API's path: acquire, renew and release write the lease as before, and the stream brings
each change here. A record is handled whole or raises (then Lambda hands it over again, with those after it):
the history gives a record handed over again the numbers it had, the bus and the queue may see its events twice,
with the same ids (receivers dedupe by `id` / `webhook-id`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from scheduler.events.producer import events_of, purged_lease

if TYPE_CHECKING:
    from scheduler.clock import Clock
    from scheduler.events.channels import Bus, DeliveryQueue
    from scheduler.store.port import HistoryPort, WebhooksPort
    from scheduler.webhooks.model import WebhookRecord


class Published(NamedTuple):
    """What one record gave: the events' documents, the deliveries queued, the history events purged."""

    documents: list[dict[str, Any]]
    deliveries: int = 0
    purged: int = 0


def delivery(webhook_id: str, document: dict[str, Any], now: datetime) -> dict[str, Any]:
    """A queued delivery: the webhook (its URL and secret are read when it is sent), the event, and when it was
    first queued (the retry time counts from it)."""
    return {"webhook_id": webhook_id, "event": document, "first": now.timestamp(), "attempt": 0}


class Pipeline:
    """One invocation's records, each through history, bus and webhooks (the owners' webhooks read once)."""

    def __init__(
        self, history: HistoryPort, bus: Bus, webhooks: WebhooksPort, queue: DeliveryQueue, clock: Clock
    ) -> None:
        self._history = history
        self._bus = bus
        self._webhooks = webhooks
        self._queue = queue
        self._clock = clock
        self._owners: dict[str, list[WebhookRecord]] = {}

    def handle(self, record: Mapping[str, Any]) -> Published:
        """Handle one record whole, or raise."""
        purged_id = purged_lease(record)
        if purged_id is not None:
            return Published([], purged=self._history.purge(purged_id))
        events = events_of(record)
        if not events:
            return Published([])
        now = self._clock()
        documents = self._history.record(events, now)
        self._bus.put(documents)
        messages = [
            delivery(webhook.webhook_id, document, now)
            for document in documents
            for webhook in self._subscribed(document["data"].get("owner_id"))
            if webhook.takes(document["type"])
        ]
        if messages:
            self._queue.send(messages)
        return Published(documents, deliveries=len(messages))

    def _subscribed(self, owner_id: object) -> list[WebhookRecord]:
        if not isinstance(owner_id, str):
            return []  # a lease without an owner has nobody's webhooks
        if owner_id not in self._owners:
            self._owners[owner_id] = self._webhooks.by_owner(owner_id)
        return self._owners[owner_id]
