"""The events function's use case: one stream record of the leases table → its events numbered in the lease's
history, published on the stack's bus, and handed to the owner's webhooks (one queued delivery per webhook that
takes the type); an ended lease's REMOVE at the end of its retention takes its history with it.

Nothing here is on the API's path: acquire, renew and release write the lease as before, and the stream brings
each change here. A record is handled whole or raises (then Lambda hands it over again, with those after it):
the history gives a record handed over again the numbers it had, the bus and the queue may see its events twice,
with the same ids (receivers dedupe by `id` / `webhook-id`).

A batch is taken record by record into the history (`take`; the records of different leases at once, each
lease's in order), then what it gave is published at once (`flush`:
ten events per PutEvents, ten deliveries per SendMessageBatch): the calls a batch makes follow its leases and its
events, not one round of calls per record. A failed flush fails the batch, which is handed over again whole.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from scheduler.events.producer import events_of, purged_lease
from scheduler.store.history import Cursor

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
    """One invocation's records, each through history, then bus and webhooks (the owners' webhooks read once)."""

    def __init__(
        self, history: HistoryPort, bus: Bus, webhooks: WebhooksPort, queue: DeliveryQueue, clock: Clock
    ) -> None:
        self._history = history
        self._bus = bus
        self._webhooks = webhooks
        self._queue = queue
        self._clock = clock
        self._owners: dict[str, list[WebhookRecord]] = {}
        self._cursors: dict[str, Cursor] = {}
        self._documents: list[dict[str, Any]] = []
        self._messages: list[dict[str, Any]] = []
        self._purged = 0
        self._lock = threading.Lock()  # `take` runs on several threads, one lease's records on one

    def handle(self, record: Mapping[str, Any]) -> Published:
        """Take one record and publish what it gave at once, or raise."""
        self.take(record)
        return self.flush()

    def take(self, record: Mapping[str, Any]) -> None:
        """Number one record's events in the history (or delete an ended lease's history), and keep them for
        `flush`; raise when the record cannot be handled (nothing of it is kept then)."""
        purged_id = purged_lease(record)
        if purged_id is not None:
            purged = self._history.purge(purged_id)
            with self._lock:
                self._purged += purged
            return
        events = events_of(record)
        if not events:
            return
        now = self._clock()
        documents = self._history.record(events, now, self._cursors)
        messages = [
            delivery(webhook.webhook_id, document, now)
            for document in documents
            for webhook in self._subscribed(document["data"].get("owner_id"))
            if webhook.takes(document["type"])
        ]
        with self._lock:
            self._documents += documents
            self._messages += messages

    def flush(self) -> Published:
        """Publish every event taken since the last flush on the bus and queue their deliveries; what went."""
        documents, messages, purged = self._documents, self._messages, self._purged
        if messages and documents:  # both at once: each is round trips, and neither waits for the other
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="bus") as pool:
                published = pool.submit(self._bus.put, documents)
                self._queue.send(messages)
                published.result()
        elif documents:
            self._bus.put(documents)
        self._documents, self._messages, self._purged = [], [], 0
        return Published(documents, deliveries=len(messages), purged=purged)

    def _subscribed(self, owner_id: object) -> list[WebhookRecord]:
        if not isinstance(owner_id, str):
            return []  # a lease without an owner has nobody's webhooks
        with self._lock:
            known = self._owners.get(owner_id)
        if known is None:  # two threads may both read it once: the same answer
            known = self._webhooks.by_owner(owner_id)
            with self._lock:
                self._owners[owner_id] = known
        return known


def lease_of(record: Mapping[str, Any]) -> str:
    """The lease a stream record changes (its key)."""
    keys = (record.get("dynamodb") or {}).get("Keys") or {}
    return str((keys.get("lease_id") or {}).get("S", ""))
