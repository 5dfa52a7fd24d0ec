"""The events function's use case (`scheduler/events/publish.py`): a record → history, bus and the owner's
webhooks that take the type; a record handed over again → the same numbers and ids; an ended lease's removal →
its history deleted. On the memory history and registry."""

from __future__ import annotations

from typing import Any

from scheduler.events.channels import MemoryBus, MemoryQueue
from scheduler.events.publish import Pipeline
from scheduler.store.memory.history import MemoryHistory
from scheduler.store.memory.webhooks import MemoryWebhooks
from scheduler.webhooks.model import WebhookRecord

from ..builders import NOW
from .images import CREATED, LEASE_ID, active, image, modify, record

READY = {"worker_state": "ready", "ready_epoch": CREATED + 3}


class Arranged:
    def __init__(self) -> None:
        self.history = MemoryHistory()
        self.bus = MemoryBus()
        self.queue = MemoryQueue()
        self.webhooks = MemoryWebhooks()
        self.pipeline = Pipeline(self.history, self.bus, self.webhooks, self.queue, lambda: NOW)

    def webhook(self, owner: str, *events: str) -> str:
        webhook_id = f"wh_{len(self.webhooks.every()):032x}"
        record = WebhookRecord(webhook_id, "https://h.example.com/", events, owner, CREATED, "x")
        self.webhooks.create(record, "whsec_x")
        return webhook_id

    def queued(self) -> list[tuple[str, str, int]]:
        return [(m["webhook_id"], m["event"]["type"], m["event"]["data"]["sequence"]) for m, _ in self.queue.sent]


def types(documents: list[dict[str, Any]]) -> list[str]:
    return [document["type"] for document in documents]


def test_a_transition_is_recorded_published_and_queued_for_the_owners_webhooks_that_take_it() -> None:
    arranged = Arranged()
    ready_only = arranged.webhook("alice", "lease.ready")
    everything = arranged.webhook("alice", "lease.active", "lease.ready")
    arranged.webhook("bob", "lease.active", "lease.ready")

    published = arranged.pipeline.handle(modify(image(), active(**READY)))

    assert types(published.documents) == types(arranged.bus.published) == ["lease.active", "lease.ready"]
    assert sorted(arranged.queued()) == sorted(
        [(everything, "lease.active", 1), (ready_only, "lease.ready", 2), (everything, "lease.ready", 2)]
    )
    assert [document["data"]["sequence"] for document in arranged.history.page(LEASE_ID, 0, 10)[0]] == [1, 2]


def test_a_record_handed_over_again_is_published_again_under_the_same_ids_and_numbers() -> None:
    arranged = Arranged()
    found = modify(image(), active(**READY))

    first = arranged.pipeline.handle(found)
    again = arranged.pipeline.handle(found)

    assert first.documents == again.documents
    assert arranged.history.page(LEASE_ID, 0, 10)[1] is None and len(arranged.history.page(LEASE_ID, 0, 10)[0]) == 2


def test_a_change_that_is_no_transition_publishes_nothing() -> None:
    arranged = Arranged()
    arranged.webhook("alice", "lease.ready")

    published = arranged.pipeline.handle(modify(active(), active(ready_checked_epoch=CREATED + 9)))

    assert published.documents == [] and arranged.bus.published == [] and arranged.queue.sent == []


def test_a_lease_without_an_owner_reaches_no_webhook() -> None:
    arranged = Arranged()
    arranged.webhook("alice", "lease.active")

    arranged.pipeline.handle(modify(image(owner_id=None), active(owner_id=None)))

    assert types(arranged.bus.published) == ["lease.active"] and arranged.queue.sent == []


def test_an_ended_lease_removed_at_the_end_of_its_retention_takes_its_history_with_it() -> None:
    arranged = Arranged()
    arranged.pipeline.handle(modify(image(), active(**READY)))

    published = arranged.pipeline.handle(record("REMOVE", active(status="expired"), None))

    assert published.purged == 2 and arranged.history.page(LEASE_ID, 0, 10) == ([], None)


def test_the_owners_webhooks_are_read_once_per_invocation() -> None:
    arranged = Arranged()
    arranged.webhook("alice", "lease.renewed")
    reads: list[str] = []
    by_owner = arranged.webhooks.by_owner
    arranged.webhooks.by_owner = lambda owner: reads.append(owner) or by_owner(owner)  # type: ignore[method-assign]

    for ttl in (900, 1200, 1500):
        arranged.pipeline.handle(modify(active(expires_epoch=CREATED + ttl - 300), active(expires_epoch=CREATED + ttl)))

    assert reads == ["alice"] and len(arranged.queue.sent) == 3


def test_a_batch_is_published_at_once_ten_events_a_call() -> None:
    arranged = Arranged()
    arranged.webhook("alice", "lease.renewed")
    calls: list[int] = []
    put = arranged.bus.put
    arranged.bus.put = lambda documents: calls.append(len(documents)) or put(documents)  # type: ignore[method-assign]

    for ttl in range(900, 900 + 12 * 60, 60):
        arranged.pipeline.take(modify(active(expires_epoch=CREATED + ttl - 60), active(expires_epoch=CREATED + ttl)))
    published = arranged.pipeline.flush()

    assert calls == [12] and len(published.documents) == 12 and published.deliveries == 12
    assert [document["data"]["sequence"] for document in published.documents] == list(range(1, 13))
    assert arranged.pipeline.flush() == ([], 0, 0)
