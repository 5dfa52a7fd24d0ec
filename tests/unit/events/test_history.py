"""Each lease's history (`store/history.py`): its events numbered 1, 2, 3… in transition order, a record handed
over again keeping its numbers, read back in order and in pages, deleted with the lease. On moto, dynalite and
the memory store."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.events.model import LifecycleEvent
from scheduler.events.producer import events_of
from scheduler.store.history import HistoryConflict

from ..builders import NOW
from .images import CREATED, LEASE_ID, active, image, modify

READY = {"worker_state": "ready", "ready_epoch": CREATED + 3}


def life() -> list[list[LifecycleEvent]]:
    """A lease's records in stream order: activated ready at once (two events), renewed twice, released."""
    releasing = {"status": "releasing", "claim_id": "c", "release_outcome": "released"}
    return [
        events_of(modify(image(), active(**READY))),
        events_of(modify(active(**READY), active(**READY, expires_epoch=CREATED + 900))),
        events_of(modify(active(**READY, expires_epoch=CREATED + 900), active(**READY, expires_epoch=CREATED + 1200))),
        events_of(modify(active(**releasing), active(status="released", released_epoch=CREATED + 1000))),
    ]


def numbers(documents: list[dict[str, Any]]) -> list[int]:
    return [document["data"]["sequence"] for document in documents]


def everything(history: Any, lease_id: str = LEASE_ID) -> list[dict[str, Any]]:
    documents, after = history.page(lease_id, 0, 1000)
    assert after is None
    return list(documents)


def test_events_are_numbered_in_transition_order(history: Any) -> None:
    recorded = [history.record(events, NOW) for events in life()]

    assert [numbers(documents) for documents in recorded] == [[1, 2], [3], [4], [5]]
    assert [document["type"] for document in everything(history)] == [
        "lease.active",
        "lease.ready",
        "lease.renewed",
        "lease.renewed",
        "lease.released",
    ]


def test_a_record_handed_over_again_keeps_its_numbers(history: Any) -> None:
    records = life()
    for events in records[:3]:
        history.record(events, NOW)

    again = history.record(records[1], NOW)

    assert numbers(again) == [3]
    assert numbers(everything(history)) == [1, 2, 3, 4]


def test_a_record_whose_first_event_landed_before_a_failure_gets_the_rest_numbered_after_it(history: Any) -> None:
    activated = life()[0]
    history.record(activated[:1], NOW)

    assert numbers(history.record(activated, NOW)) == [1, 2]
    assert [document["id"] for document in everything(history)] == [event.id for event in activated]


def test_a_batch_handed_over_again_after_later_records_keeps_every_number(history: Any) -> None:
    records = life()
    first = [history.record(events, NOW) for events in records]

    again = [history.record(events, NOW) for events in records]

    assert again == first
    assert numbers(everything(history)) == [1, 2, 3, 4, 5]


def test_a_number_another_event_took_meanwhile_is_refused(history: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    activated, renewed = life()[:2]
    history.record(activated, NOW)
    # A writer that read the history before the first record was numbered (two writers at once).
    monkeypatch.setattr(history, "_newest", lambda lease_id: iter(()))

    with pytest.raises(HistoryConflict):
        history.record(renewed, NOW)
    monkeypatch.undo()
    assert numbers(everything(history)) == [1, 2]


def test_the_history_reads_back_in_pages(history: Any) -> None:
    for events in life():
        history.record(events, NOW)

    seen: list[int] = []
    after: int | None = 0
    while after is not None:
        documents, after = history.page(LEASE_ID, after, 2)
        seen += numbers(documents)

    assert seen == [1, 2, 3, 4, 5]


def test_a_read_after_a_number_starts_past_it(history: Any) -> None:
    for events in life():
        history.record(events, NOW)

    documents, _ = history.page(LEASE_ID, 3, 100)

    assert numbers(documents) == [4, 5]


def test_an_unknown_lease_has_no_history(history: Any) -> None:
    assert history.page("00000000-0000-4000-8000-000000000000", 0, 10) == ([], None)


def test_a_purge_deletes_the_leases_history_only(history: Any) -> None:
    for events in life():
        history.record(events, NOW)
    other = "5d0c1a3e-0000-4000-8000-00000000abcd"
    history.record(events_of(modify(image(lease_id=other), active(lease_id=other))), NOW)

    assert history.purge(LEASE_ID) == 5
    assert everything(history) == []
    assert numbers(everything(history, other)) == [1]


def test_a_batch_of_one_lease_s_changes_reads_its_history_once(history: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[str] = []
    newest = history._newest
    monkeypatch.setattr(history, "_newest", lambda lease_id: reads.append(lease_id) or newest(lease_id))
    memo: dict[str, Any] = {}

    numbered = [history.record(events, NOW, memo) for events in life()]

    assert [numbers(documents) for documents in numbered] == [[1, 2], [3], [4], [5]] and reads == [LEASE_ID]


def test_a_record_seen_again_within_a_batch_keeps_its_numbers(history: Any) -> None:
    activated, renewed = life()[:2]
    memo: dict[str, Any] = {}
    history.record(activated, NOW, memo)
    history.record(renewed, NOW, memo)

    assert numbers(history.record(renewed, NOW, memo)) == [3]
    assert numbers(everything(history)) == [1, 2, 3]


def test_a_batch_handed_over_again_reads_the_history_and_keeps_every_number(history: Any) -> None:
    records = life()
    first = [history.record(events, NOW, {}) for events in records[:2]]
    memo: dict[str, Any] = {}

    again = [history.record(events, NOW, memo) for events in records]

    assert [numbers(documents) for documents in again] == [[1, 2], [3], [4], [5]] and again[:2] == first
