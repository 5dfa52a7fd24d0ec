"""The producer (`scheduler/events/producer.py`): each transition of a lease, as its stream record shows it, gives
exactly its events, in order, with ids a redelivered record gives again, the actor and reason the lease records,
and nothing secret. Synthetic images stand for the statuses of issue 26 (queued, preempted, preempt_at)."""

from __future__ import annotations

import pytest

from scheduler.events.model import DATA_FIELDS, EventType
from scheduler.events.producer import events_of, purged_lease

from .images import CREATED, LEASE_ID, active, image, modify, record

READY = {"worker_state": "ready", "ready_epoch": CREATED + 3, "starting_shard": None}
RELEASING = {"status": "releasing", "claim_id": "c1", "release_outcome": "released", "claimed_by": "anim"}


def types(found: dict[str, object]) -> list[str]:
    return [event.type.value for event in events_of(found)]


@pytest.mark.parametrize(
    ("name", "found", "expected"),
    [
        ("a queued lease made", record("INSERT", None, image(status="queued")), ["lease.queued"]),
        ("a pending lease made", record("INSERT", None, image()), []),
        ("admitted from the queue", modify(image(status="queued"), image()), []),
        ("queued when the acquire found no room", modify(image(), image(status="queued")), ["lease.queued"]),
        ("activated, its worker starting", modify(image(), active()), ["lease.active"]),
        ("activated, its worker ready at once", modify(image(), active(**READY)), ["lease.active", "lease.ready"]),
        ("its worker became ready", modify(active(), active(**READY)), ["lease.ready"]),
        ("renewed", modify(active(**READY), active(**READY, expires_epoch=CREATED + 1200)), ["lease.renewed"]),
        ("renewed for less", modify(active(**READY), active(**READY, expires_epoch=CREATED + 300)), ["lease.renewed"]),
        ("given a preemption notice", modify(active(), active(preempt_at=CREATED + 120)), ["lease.preemption_notice"]),
        (
            "warned of its expiry",
            modify(active(), active(warned_expiry=CREATED + 600)),
            ["lease.expiring"],
        ),
        ("claimed for release", modify(active(), active(**RELEASING)), []),
        (
            "released",
            modify(active(**RELEASING), active(status="released", released_epoch=CREATED + 9)),
            ["lease.released"],
        ),
        ("expired", modify(active(**RELEASING), active(status="expired", ended_by="sweep")), ["lease.expired"]),
        ("failed after a claim", modify(active(**RELEASING), active(status="failed")), ["lease.failed"]),
        (
            "failed while pending",
            modify(image(), image(status="failed", failure_reason="no capacity")),
            ["lease.failed"],
        ),
        ("preempted", modify(active(**RELEASING), active(status="preempted")), ["lease.preempted"]),
        (
            "a queued lease expired unadmitted",
            modify(image(status="queued"), image(status="expired")),
            ["lease.expired"],
        ),
        ("asked about readiness", modify(active(), active(ready_checked_epoch=CREATED + 2)), []),
        ("a TTL deletion", record("REMOVE", active(status="released"), None), []),
        ("written back after TTL deleted it live", record("INSERT", None, active(**RELEASING)), []),
        ("restored from a snapshot", record("INSERT", None, active(status="released")), []),
    ],
)
def test_each_transition_gives_exactly_its_events(name: str, found: dict[str, object], expected: list[str]) -> None:
    assert types(found) == expected, name


def test_a_lease_put_back_in_the_queue_after_a_failed_admission_is_no_new_event() -> None:
    admitted = image(admitted_epoch=CREATED + 30, created_epoch=CREATED + 30, queued_epoch=CREATED)
    requeued = image(status="queued", queued_epoch=CREATED, queue_reason="attempt 1 failed, no provider had room")
    assert events_of(modify(admitted, requeued)) == []


def test_a_renewal_and_a_warning_in_one_write_are_both_told() -> None:
    renewed_and_warned = active(expires_epoch=CREATED + 1200, warned_expiry=CREATED + 1200)

    assert types(modify(active(), renewed_and_warned)) == ["lease.renewed", "lease.expiring"]


def test_a_warning_of_an_earlier_expiry_is_no_warning_of_the_current_one() -> None:
    old_mark = active(expires_epoch=CREATED + 1200, warned_expiry=CREATED + 600)

    assert types(modify(active(warned_expiry=CREATED + 600), old_mark)) == ["lease.renewed"]


def test_a_redelivered_record_gives_the_same_ids() -> None:
    found = modify(image(), active(**READY))

    assert [event.id for event in events_of(found)] == [event.id for event in events_of(dict(found))]


def test_each_event_of_each_record_has_its_own_id() -> None:
    first, second = events_of(modify(image(), active(**READY)))
    again = events_of(modify(image(), active(**READY)))

    assert len({first.id, second.id, *(event.id for event in again)}) == 4


def test_the_event_time_is_when_the_write_happened() -> None:
    (event,) = events_of(modify(image(), active()))

    assert event.document(1)["timestamp"] == "2026-11-30T00:53:25Z"


def test_an_activation_is_the_acquiring_callers() -> None:
    active_event, ready_event = events_of(modify(image(), active(**READY)))

    assert active_event.data["actor"] == ready_event.data["actor"] == "anim"


def test_an_end_is_the_actor_the_lease_names_as_ending_it() -> None:
    (event,) = events_of(modify(active(**RELEASING), active(status="expired", ended_by="ttl-stream")))

    assert event.data["actor"] == "ttl-stream"


def test_an_end_without_ended_by_is_its_claimants() -> None:
    (event,) = events_of(modify(active(**RELEASING), active(status="released")))

    assert event.data["actor"] == "anim"


def test_a_warning_is_the_sweeps() -> None:
    (event,) = events_of(modify(active(), active(warned_expiry=CREATED + 600)))

    assert event.data["actor"] == "sweep"


def test_a_renewal_is_the_renewing_callers() -> None:
    renewed = active(**READY, expires_epoch=CREATED + 1200, renewed_by="render-farm")
    (event,) = events_of(modify(active(**READY, renewed_by="ops"), renewed))

    assert (event.type.value, event.data["actor"]) == ("lease.renewed", "render-farm")


@pytest.mark.parametrize("finder", ["sweep", "render-farm"])
def test_a_worker_found_ready_after_its_activation_is_whoever_found_it_ready(finder: str) -> None:
    (event,) = events_of(modify(active(), active(**READY, ready_by=finder)))

    assert (event.type.value, event.data["actor"]) == ("lease.ready", finder)


def test_a_transition_the_lease_does_not_say_who_made_is_unknowns() -> None:
    (ready,) = events_of(modify(active(), active(**READY)))  # as recorded before ready_by and renewed_by existed
    (renewed,) = events_of(modify(active(**READY), active(**READY, expires_epoch=CREATED + 1200)))

    assert ready.data["actor"] == renewed.data["actor"] == "unknown"


def test_a_failure_says_why() -> None:
    failed = active(status="failed", failure_reason="worker exited (code 137)")
    (event,) = events_of(modify(active(**RELEASING), failed))

    assert event.data["reason"] == "worker exited (code 137)"


def test_a_preemption_notice_says_for_what_priority() -> None:
    noticed = active(preempt_epoch=CREATED + 420, preempt_priority=90, preempted_for="l-urgent")
    (event,) = events_of(modify(active(), noticed))

    assert (event.type, event.data["reason"]) == (
        "lease.preemption_notice",
        "preempted for a queued lease of priority 90",
    )


def test_an_event_carries_the_lease_and_never_its_worker_token_or_endpoint() -> None:
    (event,) = events_of(modify(image(), active()))
    shown = repr(event.document(1))

    assert set(event.document(1)["data"]) == {*DATA_FIELDS, "sequence"}
    assert event.data["lease_id"] == LEASE_ID and event.data["owner_id"] == "alice"
    assert "ctr-secret-token" not in shown and "10.0.0.5" not in shown


def test_the_history_of_an_ended_lease_goes_with_it() -> None:
    assert purged_lease(record("REMOVE", active(status="expired"), None)) == LEASE_ID


def test_a_live_lease_deleted_by_ttl_keeps_its_history() -> None:
    assert purged_lease(record("REMOVE", active(), None)) is None


def test_every_type_has_a_transition_that_gives_it() -> None:
    given = {
        kind
        for found in (
            record("INSERT", None, image(status="queued")),
            modify(image(), active(**READY)),
            modify(active(), active(expires_epoch=CREATED + 900, warned_expiry=CREATED + 900, preempt_at=CREATED)),
            *(modify(active(**RELEASING), active(status=status)) for status in ("released", "expired", "failed")),
            modify(active(**RELEASING), active(status="preempted")),
        )
        for kind in (event.type for event in events_of(found))
    }
    assert given == set(EventType)
