"""The queue's part of the state machine as declared (queued, preempted, admit, requeue, cancel, expire_queued,
notice, claim_preempted), the DynamoDB expressions rendered from it, and the memory store's evaluation of the same
declarations: rules checked without a database."""

from __future__ import annotations

import pytest

from scheduler import lifecycle
from scheduler.lifecycle import ENDED, HOLDING, LIVE, Guard, LeaseStatus, Refusal, Seen, Write, refusal
from scheduler.store import conditions
from scheduler.store.conditions import Inputs
from scheduler.store.items import Item, number_attr, string_attr
from scheduler.store.memory.rules import applied, holds
from scheduler.store.queue_model import retry_backoff
from scheduler.store.queue_records import QUEUE_ATTRIBUTES, NoticeRecord, QueueEntry

NOW = 1_796_011_200
PREEMPTOR = "b8c1d2e3-0000-4000-8000-000000000001"
ADMITTING = Inputs(now=NOW, start=NOW, ttl_seconds=600, shard="0", provider="p", admission_id="a-1")
ENTRY = QueueEntry("0", 50 * 10**10 + NOW, NOW + 600, NOW + 700, "every provider is at its lease cap", ("p",), True)
NOTICE = NoticeRecord(NOW + 120, PREEMPTOR, 80)


def seen(status: LeaseStatus, *, expires: int = NOW + 600, preempt: int | None = None) -> Seen:
    return Seen(status, expires, "alice", None, preempt)


def active_item(**changes: object) -> Item:
    """An active lease item as the store keeps it: preemptible, priority 40, made 10 minutes ago, an hour left."""
    item: Item = {
        "lease_id": string_attr("a8c1d2e3-0000-4000-8000-000000000002"),
        "status": string_attr("active"),
        "priority": number_attr(40),
        "preemptible": {"BOOL": True},
        "created_epoch": number_attr(NOW - 600),
        "expires_epoch": number_attr(NOW + 3600),
        "ttl_seconds": number_attr(3600),
        "owner_id": string_attr("alice"),
    }
    for name, value in changes.items():
        if value is None:
            item.pop(name, None)
        else:
            item[name] = value  # type: ignore[assignment]
    return item


def notice_inputs(priority: int = 80, ran_since: int = NOW - 300) -> Inputs:
    return Inputs(now=NOW, notice=NOTICE._replace(priority=priority), priority=priority, ran_since=ran_since)


# --- the statuses ------------------------------------------------------------------------------------------


def test_a_queued_lease_is_live_and_listed_until_its_queued_until_but_holds_nothing() -> None:
    assert LeaseStatus.QUEUED in LIVE and LeaseStatus.QUEUED in lifecycle.LISTED_UNTIL_EXPIRY
    assert LeaseStatus.QUEUED not in HOLDING


def test_preempted_is_an_end() -> None:
    assert LeaseStatus.PREEMPTED in ENDED


def test_the_sweeps_expiry_claim_never_takes_a_queued_lease() -> None:
    assert lifecycle.CLAIM_DUE.source == HOLDING


# --- admission ---------------------------------------------------------------------------------------------


def test_only_a_queued_lease_before_its_queued_until_is_admitted() -> None:
    assert lifecycle.ADMIT.source == frozenset({LeaseStatus.QUEUED}) and lifecycle.ADMIT.target is LeaseStatus.PENDING
    rendered = conditions.render(lifecycle.ADMIT, ADMITTING)
    assert rendered.condition == "#status = :status_queued AND expires_epoch > :now"


def test_admission_takes_the_slots_in_its_own_transaction_as_a_new_lease_does() -> None:
    assert {Write.TAKE_COUNTERS, Write.HOLD_COUNTERS} <= set(lifecycle.ADMIT.writes)
    assert {Write.TAKE_COUNTERS, Write.HOLD_COUNTERS} <= set(lifecycle.RECORD.writes)


def test_an_admitted_lease_bills_and_counts_its_deadlines_from_its_admission() -> None:
    inputs = ADMITTING._replace(held=("provider#p",))
    update = conditions.render(lifecycle.ADMIT, inputs).update
    assert "created_epoch = :now" in update and "admitted_epoch = :now" in update
    assert "expires_epoch = :expires" in update and "starting_shard = :shard" in update
    assert "admission_id = :admission_id" in update  # whose admission it was: a resent one knows its own
    assert all(name in update.split("REMOVE", 1)[1] for name in QUEUE_ATTRIBUTES)


def test_a_lease_admitted_once_cannot_be_admitted_again() -> None:
    inputs = ADMITTING
    queued: Item = {"status": string_attr("queued"), "expires_epoch": number_attr(NOW + 60)}
    admitted = applied(lifecycle.ADMIT, inputs, queued)
    assert holds(lifecycle.ADMIT, inputs, queued) and not holds(lifecycle.ADMIT, inputs, admitted)


def test_a_lease_past_its_queued_until_is_not_admitted() -> None:
    inputs = ADMITTING
    assert not holds(lifecycle.ADMIT, inputs, {"status": string_attr("queued"), "expires_epoch": number_attr(NOW)})


# --- requeue, cancel, expiry -------------------------------------------------------------------------------


def test_a_pending_lease_goes_back_to_the_queue_only_before_its_queued_until_giving_its_slots_back() -> None:
    assert lifecycle.REQUEUE.source == frozenset({LeaseStatus.PENDING}) and Guard.QUEUE_OPEN in lifecycle.REQUEUE.guards
    assert Write.GIVE_BACK_COUNTERS in lifecycle.REQUEUE.writes
    rendered = conditions.render(lifecycle.REQUEUE, Inputs(now=NOW, queue=ENTRY))
    assert "queue_until > :now" in rendered.condition
    assert "held_counters" in rendered.update.split("REMOVE", 1)[1]
    assert "queued_epoch = if_not_exists(queued_epoch, :now)" in rendered.update  # its place by age is kept


def test_a_requeued_lease_keeps_the_time_it_first_joined_the_queue() -> None:
    pending: Item = {"status": string_attr("pending"), "queue_until": number_attr(NOW + 60)}
    pending["queued_epoch"] = number_attr(NOW - 500)
    requeued = applied(lifecycle.REQUEUE, Inputs(now=NOW, queue=ENTRY), pending)
    assert requeued["queued_epoch"] == number_attr(NOW - 500) and requeued["status"] == string_attr("queued")
    assert not holds(lifecycle.REQUEUE, Inputs(now=NOW + 60, queue=ENTRY), pending)


RETRYING = ENTRY._replace(created=NOW - 500, failures=3, retry_at=NOW + 8)


def test_a_requeue_puts_back_when_the_lease_was_made_and_forgets_its_admission() -> None:
    assert Write.UNADMIT in lifecycle.REQUEUE.writes
    rendered = conditions.render(lifecycle.REQUEUE, Inputs(now=NOW, queue=RETRYING))
    assert "created_epoch = :created" in rendered.update and rendered.values[":created"] == number_attr(NOW - 500)
    assert {"admitted_epoch", "admission_id"} <= set(rendered.update.split("REMOVE", 1)[1].replace(",", " ").split())
    admitted: Item = {"status": string_attr("pending"), "queue_until": number_attr(NOW + 60)}
    admitted |= {
        "created_epoch": number_attr(NOW),
        "admitted_epoch": number_attr(NOW),
        "admission_id": string_attr("a"),
    }
    requeued = applied(lifecycle.REQUEUE, Inputs(now=NOW, queue=RETRYING), admitted)
    assert requeued["created_epoch"] == number_attr(NOW - 500)
    assert "admitted_epoch" not in requeued and "admission_id" not in requeued


def test_a_requeue_records_when_the_lease_may_be_tried_again_and_how_often_it_failed() -> None:
    assert Write.RETRY_LATER in lifecycle.REQUEUE.writes
    rendered = conditions.render(lifecycle.REQUEUE, Inputs(now=NOW, queue=RETRYING))
    assert "retry_epoch = :retry_at" in rendered.update and "failed_admissions = :failures" in rendered.update
    assert (rendered.values[":retry_at"], rendered.values[":failures"]) == (number_attr(NOW + 8), number_attr(3))
    pending: Item = {"status": string_attr("pending"), "queue_until": number_attr(NOW + 60)}
    requeued = applied(lifecycle.REQUEUE, Inputs(now=NOW, queue=RETRYING), pending)
    assert (requeued["retry_epoch"], requeued["failed_admissions"]) == (number_attr(NOW + 8), number_attr(3))


def test_an_admission_leaves_the_retry_behind() -> None:
    assert {"retry_epoch", "failed_admissions"} <= set(QUEUE_ATTRIBUTES)
    queued: Item = {"status": string_attr("queued"), "expires_epoch": number_attr(NOW + 60)}
    queued |= {"retry_epoch": number_attr(NOW), "failed_admissions": number_attr(2)}
    admitted = applied(lifecycle.ADMIT, ADMITTING, queued)
    assert "retry_epoch" not in admitted and "failed_admissions" not in admitted


@pytest.mark.parametrize(("failures", "seconds"), [(0, 0), (1, 2), (2, 4), (3, 8), (5, 32), (6, 60), (40, 60)])
def test_a_failed_admission_backs_off_doubling_up_to_a_minute(failures: int, seconds: int) -> None:
    assert retry_backoff(failures) == seconds


def test_a_cancelled_queued_lease_ends_released_for_its_owner_only() -> None:
    assert lifecycle.CANCEL.target is LeaseStatus.RELEASED
    assert {Guard.OWNER, Guard.NOT_EXPIRED} <= set(lifecycle.CANCEL.guards)


def test_a_queued_lease_never_admitted_expires_at_its_queued_until() -> None:
    assert lifecycle.EXPIRE_QUEUED.target is LeaseStatus.EXPIRED and lifecycle.EXPIRE_QUEUED.guards == (Guard.DUE,)
    assert Write.RECORD_REASON in lifecycle.EXPIRE_QUEUED.writes


def test_a_release_of_a_queued_lease_is_told_it_waits_in_the_queue() -> None:
    assert refusal(lifecycle.CLAIM_RELEASE, seen(LeaseStatus.QUEUED), NOW, "alice") is Refusal.QUEUED


def test_a_renewal_of_a_queued_lease_is_a_conflict() -> None:
    assert refusal(lifecycle.RENEW, seen(LeaseStatus.QUEUED), NOW, "alice") is Refusal.CONFLICT


# --- preemption --------------------------------------------------------------------------------------------


def test_a_notice_takes_only_an_active_preemptible_lease_of_strictly_lower_priority() -> None:
    assert lifecycle.NOTICE.source == frozenset({LeaseStatus.ACTIVE})
    assert holds(lifecycle.NOTICE, notice_inputs(80), active_item())
    assert not holds(lifecycle.NOTICE, notice_inputs(40), active_item())  # equal priority
    assert not holds(lifecycle.NOTICE, notice_inputs(80), active_item(preemptible={"BOOL": False}))
    assert not holds(lifecycle.NOTICE, notice_inputs(80), active_item(preemptible=None))  # made before the queue


def test_a_notice_never_takes_a_lease_younger_than_the_minimum_runtime() -> None:
    assert not holds(lifecycle.NOTICE, notice_inputs(80, ran_since=NOW - 601), active_item())
    assert holds(lifecycle.NOTICE, notice_inputs(80, ran_since=NOW - 600), active_item())


def test_a_lease_with_a_notice_is_not_noticed_again() -> None:
    noticed = applied(lifecycle.NOTICE, notice_inputs(80), active_item())
    assert noticed["preempt_epoch"] == number_attr(NOW + 120) and noticed["due_at"] == number_attr(NOW + 120)
    assert not holds(lifecycle.NOTICE, notice_inputs(90), noticed)


def test_a_lease_that_ends_before_the_notice_would_is_not_noticed() -> None:
    assert not holds(lifecycle.NOTICE, notice_inputs(80), active_item(expires_epoch=number_attr(NOW + 120)))


def test_the_notice_renders_every_guard_it_declares() -> None:
    rendered = conditions.condition(lifecycle.NOTICE, notice_inputs(80))
    for part in (
        "preemptible = :true",
        "priority < :priority",
        "created_epoch <= :ran_since",
        "attribute_not_exists(preempt_epoch)",
        "expires_epoch > :preempt_at",
    ):
        assert part in rendered.condition


def test_a_preemption_is_claimed_only_once_its_notice_ran_out_and_ends_preempted() -> None:
    transition = lifecycle.CLAIM_PREEMPTED
    assert transition.outcome is LeaseStatus.PREEMPTED and transition.guards == (Guard.NOTICE_DUE,)
    noticed = applied(lifecycle.NOTICE, notice_inputs(80), active_item())
    claim = Inputs(now=NOW + 119, claim_id="c")
    assert not holds(transition, claim, noticed)
    assert holds(transition, claim._replace(now=NOW + 120), noticed)
    assert not holds(transition, claim._replace(now=NOW + 120), active_item())  # no notice, no preemption


def test_a_renewal_cannot_pass_the_notice() -> None:
    rendered = conditions.condition(lifecycle.RENEW, Inputs(now=NOW, start=NOW, owner="alice", ttl_seconds=600))
    assert "(attribute_not_exists(preempt_epoch) OR preempt_epoch >= :expires)" in rendered.condition
    noticed = applied(lifecycle.NOTICE, notice_inputs(80), active_item())
    assert not holds(lifecycle.RENEW, Inputs(now=NOW, start=NOW, owner="alice", ttl_seconds=121), noticed)
    assert holds(lifecycle.RENEW, Inputs(now=NOW, start=NOW, owner="alice", ttl_seconds=120), noticed)


@pytest.mark.parametrize(
    ("new_expiry", "why"),
    [(NOW + 121, Refusal.PREEMPTING), (NOW + 120, Refusal.CHANGED), (None, Refusal.CHANGED)],
)
def test_a_renewal_past_the_notice_is_refused_for_that(new_expiry: int | None, why: Refusal) -> None:
    found = seen(LeaseStatus.ACTIVE, expires=NOW + 3600, preempt=NOW + 120)
    assert refusal(lifecycle.RENEW, found, NOW, "alice", new_expiry) is why
