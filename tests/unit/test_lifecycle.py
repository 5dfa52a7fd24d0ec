"""The lease state machine as declared, and the expressions rendered from it: rules checked without a database."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from scheduler import lifecycle
from scheduler.lifecycle import (
    ENDED,
    HOLDING,
    LIVE,
    TRANSITIONS,
    Guard,
    LeaseStatus,
    Refusal,
    Seen,
    Transition,
    Write,
    owner_may_act,
    refusal,
)
from scheduler.store import conditions
from scheduler.store.conditions import Inputs, WorkerRecord
from scheduler.store.memory import rules
from scheduler.store.queue_records import NoticeRecord, QueueEntry

NOW = 1_796_011_200
STORE = Path(conditions.__file__).parent


def seen(
    status: LeaseStatus, *, expires: int = NOW + 600, owner: str | None = "alice", worker_ends: int | None = None
) -> Seen:
    return Seen(status, expires, owner, worker_ends)


# --- the declaration -------------------------------------------------------------------------------


def test_ended_statuses_are_final() -> None:
    for transition in TRANSITIONS:
        assert not (transition.source or frozenset()) & ENDED, transition.name


def test_every_live_status_has_a_way_to_end() -> None:
    ending = {status for t in TRANSITIONS if t.target in ENDED or t.target is None for status in t.source or ()}
    claimed = {status for t in TRANSITIONS if t.target is LeaseStatus.RELEASING for status in t.source or ()}
    assert ending | claimed >= LIVE


def test_every_end_of_a_lease_that_may_have_a_worker_but_a_failed_acquire_goes_through_a_release_claim() -> None:
    direct = [t.name for t in TRANSITIONS if t.target in ENDED and (t.source or frozenset()) & HOLDING]
    assert direct == ["fail_pending"]


def test_a_queued_lease_ends_without_a_claim_for_it_never_had_a_worker() -> None:
    direct = {t.name for t in TRANSITIONS if t.target in ENDED and t.source == frozenset({LeaseStatus.QUEUED})}
    assert direct == {"cancel", "expire_queued"}
    for transition in (lifecycle.CANCEL, lifecycle.EXPIRE_QUEUED):
        assert Write.GIVE_BACK_COUNTERS not in transition.writes and Write.LEAVE_INDEX in transition.writes


def test_a_claim_names_the_outcome_it_will_record() -> None:
    for transition in TRANSITIONS:
        if Write.TAKE_CLAIM in transition.writes:
            assert transition.outcome in ENDED, transition.name


def test_only_the_sweeps_claim_keeps_a_stale_claims_outcome() -> None:
    assert [t.name for t in TRANSITIONS if t.keeps_outcome] == ["claim_due"]


def test_every_end_records_who_ended_the_lease() -> None:
    ends = [t.name for t in TRANSITIONS if Write.END in t.writes]
    assert ends and ends == [t.name for t in TRANSITIONS if Write.ENDED_BY in t.writes]


def test_only_a_new_lease_records_who_made_it() -> None:
    assert [t.name for t in TRANSITIONS if Write.CREATED_BY in t.writes] == ["record", "enqueue"]
    assert all(t.source is None for t in TRANSITIONS if Write.CREATED_BY in t.writes)


def test_a_renewal_records_who_renewed_and_marking_ready_who_found_the_worker_ready() -> None:
    assert [t.name for t in TRANSITIONS if Write.RENEWED_BY in t.writes] == ["renew"]
    assert [t.name for t in TRANSITIONS if Write.READY_BY in t.writes] == ["mark_ready"]


def test_ending_a_lease_gives_its_slots_back_and_leaves_the_sweep_index() -> None:
    for transition in (lifecycle.FAIL_PENDING, lifecycle.FINISH):
        assert {Write.END, Write.LEAVE_INDEX, Write.GIVE_BACK_COUNTERS} <= set(transition.writes)


def test_every_live_status_is_listed_one_way_or_the_other() -> None:
    assert lifecycle.LISTED_UNTIL_EXPIRY | lifecycle.LISTED_UNTIL_ENDED == LIVE
    assert not lifecycle.LISTED_UNTIL_EXPIRY & lifecycle.LISTED_UNTIL_ENDED


def test_a_lease_being_released_is_listed_until_it_ends() -> None:
    assert {LeaseStatus.RELEASING} == lifecycle.LISTED_UNTIL_ENDED


# --- why a write lost --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("transition", "found", "owner", "why"),
    [
        (lifecycle.CLAIM_RELEASE, None, "alice", Refusal.NOT_FOUND),
        (lifecycle.CLAIM_RELEASE, seen(LeaseStatus.PENDING), "alice", Refusal.NOT_ACTIVE),
        (lifecycle.CLAIM_RELEASE, seen(LeaseStatus.RELEASING), "alice", Refusal.NOT_ACTIVE),
        (lifecycle.CLAIM_RELEASE, seen(LeaseStatus.RELEASED), "alice", Refusal.NOT_ACTIVE),
        (lifecycle.CLAIM_RELEASE, seen(LeaseStatus.ACTIVE, expires=NOW), "alice", Refusal.EXPIRED),
        (lifecycle.CLAIM_RELEASE, seen(LeaseStatus.ACTIVE), "bob", Refusal.NOT_OWNER),
        (lifecycle.CLAIM_RELEASE, seen(LeaseStatus.ACTIVE), None, Refusal.NOT_OWNER),
        (lifecycle.RENEW, None, "alice", Refusal.NOT_FOUND),
        (lifecycle.RENEW, seen(LeaseStatus.PENDING), "alice", Refusal.CONFLICT),
        (lifecycle.RENEW, seen(LeaseStatus.RELEASING), "alice", Refusal.CONFLICT),
        (lifecycle.RENEW, seen(LeaseStatus.EXPIRED), "alice", Refusal.NOT_ACTIVE),
        (lifecycle.RENEW, seen(LeaseStatus.ACTIVE, expires=NOW - 1), "alice", Refusal.EXPIRED),
        (lifecycle.RENEW, seen(LeaseStatus.RELEASING, expires=NOW - 1), "alice", Refusal.EXPIRED),
        (lifecycle.RENEW, seen(LeaseStatus.PENDING, expires=NOW - 1), "alice", Refusal.EXPIRED),
        (lifecycle.CLAIM_RELEASE, seen(LeaseStatus.RELEASING, expires=NOW), "alice", Refusal.EXPIRED),
        (lifecycle.RENEW, seen(LeaseStatus.ACTIVE), "bob", Refusal.NOT_OWNER),
        (lifecycle.RENEW, seen(LeaseStatus.ACTIVE), "alice", Refusal.CHANGED),
    ],
)
def test_a_lost_write_is_classified_by_the_one_rule(
    transition: Transition, found: Seen | None, owner: str | None, why: Refusal
) -> None:
    assert refusal(transition, found, NOW, owner) is why


@pytest.mark.parametrize(
    ("found", "owner", "new_expiry", "why"),
    [
        (seen(LeaseStatus.ACTIVE, worker_ends=NOW + 900), "alice", NOW + 901, Refusal.PAST_WORKER_END),
        (seen(LeaseStatus.ACTIVE, worker_ends=NOW + 900), "alice", NOW + 900, Refusal.CHANGED),
        (seen(LeaseStatus.ACTIVE, worker_ends=NOW + 900), "alice", None, Refusal.CHANGED),
        (seen(LeaseStatus.ACTIVE), "alice", NOW + 86_400, Refusal.CHANGED),
        (seen(LeaseStatus.ACTIVE, worker_ends=NOW + 900), "bob", NOW + 901, Refusal.NOT_OWNER),
        (seen(LeaseStatus.RELEASING, worker_ends=NOW + 900), "alice", NOW + 901, Refusal.CONFLICT),
        (seen(LeaseStatus.ACTIVE, expires=NOW, worker_ends=NOW + 900), "alice", NOW + 901, Refusal.EXPIRED),
    ],
)
def test_a_renewal_past_the_end_the_provider_gave_the_worker_is_refused_for_that(
    found: Seen, owner: str, new_expiry: int | None, why: Refusal
) -> None:
    assert refusal(lifecycle.RENEW, found, NOW, owner, new_expiry) is why


@pytest.mark.parametrize(
    ("lease_owner", "caller", "may"),
    [
        (None, None, True),
        (None, "bob", True),
        ("alice", "alice", True),
        ("alice", "bob", False),
        ("alice", None, False),
    ],
)
def test_an_owned_lease_needs_its_owner_and_an_unowned_one_anyone(
    lease_owner: str | None, caller: str | None, may: bool
) -> None:
    assert owner_may_act(lease_owner, caller) is may


# --- the expressions rendered from it ------------------------------------------------------------------

FULL = Inputs(
    now=NOW,
    start=NOW + 1,
    owner="alice",
    token="w-1",
    claim_id="c-1",
    worker=WorkerRecord("local-docker", "w-1", "http://127.0.0.1:8080", 0.5, ends_epoch=NOW + 900),
    ttl_seconds=600,
    held=("owner#alice",),
    reason="the worker stopped",
    claim_due=NOW + 120,
    claim_ttl=NOW + 3600,
    retain_until=NOW + 86_400,
    outcome=LeaseStatus.RELEASED,
    seen_expiry=NOW + 600,
    reweighed=("cost#alice@500000", "owner#alice"),
    by="anim",
    queue=QueueEntry("0", 50 * 10**10 + NOW, NOW + 600, NOW + 700, "every provider is at its lease cap", ("p",), True),
    shard="0",
    provider="local-docker",
    admission_id="a-1",
    notice=NoticeRecord(NOW + 120, "b8c1d2e3-0000-4000-8000-000000000001", 80),
    priority=80,
    ran_since=NOW - 300,
)


@pytest.mark.parametrize("transition", [t for t in TRANSITIONS if t.source is not None], ids=lambda t: t.name)
def test_every_placeholder_is_bound_and_every_binding_used(transition: Transition) -> None:
    rendered = conditions.render(transition, FULL)
    text = f"{rendered.condition} {rendered.update}"
    assert set(re.findall(r":\w+", text)) == set(rendered.values)
    assert set(re.findall(r"#\w+", text)) == set(rendered.names)


@pytest.mark.parametrize("transition", [t for t in TRANSITIONS if t.source is not None], ids=lambda t: t.name)
def test_a_transition_starts_only_from_its_declared_statuses(transition: Transition) -> None:
    rendered = conditions.render(transition, FULL)
    bound = {value["S"] for key, value in rendered.values.items() if key.startswith(":status_")}
    assert bound == {status.value for status in transition.source or ()}


def test_a_failed_claim_narrowed_to_one_status_checks_only_that_one() -> None:
    rendered = conditions.condition(lifecycle.CLAIM_FAILED, Inputs(expected=LeaseStatus.PENDING))
    assert rendered.condition == "#status = :status_pending"


def test_a_transition_cannot_be_narrowed_to_a_status_it_does_not_start_from() -> None:
    with pytest.raises(ValueError, match="does not start from"):
        conditions.condition(lifecycle.RENEW, Inputs(expected=LeaseStatus.PENDING))


def test_the_caller_without_an_owner_passes_only_on_an_unowned_lease() -> None:
    rendered = conditions.condition(lifecycle.CLAIM_RELEASE, Inputs(now=NOW, owner=None))
    assert "attribute_not_exists(owner_id)" in rendered.condition and ":owner" not in rendered.values


def test_a_claim_without_a_token_does_not_check_one() -> None:
    rendered = conditions.condition(lifecycle.CLAIM_FAILED, Inputs(expected=LeaseStatus.PENDING, token=None))
    assert "provider_token" not in rendered.condition


def test_the_sweeps_claim_keeps_an_earlier_outcome() -> None:
    update = conditions.render(lifecycle.CLAIM_DUE, FULL).update
    assert "release_outcome = if_not_exists(release_outcome, :outcome)" in update


def test_a_claim_records_its_claimant_and_the_sweeps_keeps_an_earlier_one() -> None:
    assert "claimed_by = :by" in conditions.render(lifecycle.CLAIM_RELEASE, FULL).update
    assert "claimed_by = if_not_exists(claimed_by, :by)" in conditions.render(lifecycle.CLAIM_DUE, FULL).update


def test_an_end_records_who_ended_it_and_leaves_no_claimant_behind() -> None:
    update = conditions.render(lifecycle.FINISH, FULL).update
    assert "ended_by = :by" in update and "claimed_by" in update.split("REMOVE", 1)[1]


def test_a_change_without_an_actor_records_none() -> None:
    for transition in (lifecycle.CLAIM_RELEASE, lifecycle.FINISH):
        assert ":by" not in conditions.render(transition, FULL._replace(by=None)).values


def test_a_renewal_records_its_caller_in_its_own_write() -> None:
    rendered = conditions.render(lifecycle.RENEW, FULL)
    assert "renewed_by = :by" in rendered.update.split("REMOVE", 1)[0] and rendered.values[":by"] == {"S": "anim"}


def test_a_renewal_naming_nobody_removes_an_earlier_renewals_caller() -> None:
    rendered = conditions.render(lifecycle.RENEW, FULL._replace(by=None))
    assert "renewed_by" in rendered.update.split("REMOVE", 1)[1] and ":by" not in rendered.values


def test_marking_ready_records_who_found_the_worker_ready_in_its_own_write() -> None:
    rendered = conditions.render(lifecycle.MARK_READY, Inputs(now=NOW, token="w-1", by="sweep"))
    assert "ready_by = :by" in rendered.update and rendered.values[":by"] == {"S": "sweep"}


def test_in_memory_a_renewal_records_its_caller_and_one_naming_nobody_removes_it() -> None:
    item = {"status": {"S": "active"}, "ttl_seconds": {"N": "600"}, "renewed_by": {"S": "earlier"}}
    renewed = rules.applied(lifecycle.RENEW, Inputs(now=NOW, start=NOW, by="anim"), item)
    assert renewed["renewed_by"] == {"S": "anim"}
    assert "renewed_by" not in rules.applied(lifecycle.RENEW, Inputs(now=NOW, start=NOW), renewed)


def test_in_memory_marking_ready_records_who_found_the_worker_ready() -> None:
    item = {"status": {"S": "active"}, "worker_state": {"S": "starting"}}
    marked = rules.applied(lifecycle.MARK_READY, Inputs(now=NOW, token="w-1", by="sweep"), item)
    assert (marked["worker_state"], marked["ready_by"]) == ({"S": "ready"}, {"S": "sweep"})


def test_a_renewal_without_a_ttl_keeps_the_leases_own() -> None:
    update = conditions.render(lifecycle.RENEW, Inputs(now=NOW, start=NOW + 1, owner="alice")).update
    assert "expires_epoch = :start + ttl_seconds" in update and "ttl_seconds =" not in update


def test_a_renewal_holds_its_new_expiry_against_the_workers_own_end() -> None:
    rendered = conditions.condition(lifecycle.RENEW, Inputs(now=NOW, start=NOW + 1, owner="alice", ttl_seconds=600))
    assert "(attribute_not_exists(worker_ends_epoch) OR worker_ends_epoch >= :expires)" in rendered.condition
    assert rendered.values[":expires"] == {"N": str(NOW + 601)}


def test_a_renewal_without_a_ttl_passes_only_on_a_lease_whose_worker_has_no_end_of_its_own() -> None:
    rendered = conditions.condition(lifecycle.RENEW, Inputs(now=NOW, start=NOW + 1, owner="alice"))
    assert "attribute_not_exists(worker_ends_epoch)" in rendered.condition and "worker_ends_epoch >=" not in (
        rendered.condition
    )


def test_activation_records_the_workers_own_end_only_when_its_provider_gave_one() -> None:
    ending = conditions.render(lifecycle.ACTIVATE, Inputs(worker=WorkerRecord("modal", "sb-1", ends_epoch=NOW + 900)))
    running = conditions.render(lifecycle.ACTIVATE, Inputs(worker=WorkerRecord("runpod", "pod-1")))
    assert "worker_ends_epoch = :worker_ends" in ending.update and ending.values[":worker_ends"] == {
        "N": str(NOW + 900)
    }
    assert "worker_ends_epoch" not in running.update


def test_a_long_failure_reason_is_stored_bounded() -> None:
    rendered = conditions.render(lifecycle.CLAIM_FAILED, Inputs(reason="x" * 5000, claim_id="c", expected=None))
    assert len(rendered.values[":reason"]["S"]) == conditions.MAX_FAILURE_REASON_CHARS


def test_no_store_module_but_the_renderer_writes_a_status_into_an_expression() -> None:
    statuses = {status.value for status in LeaseStatus}
    for path in STORE.glob("*.py"):
        if path.name == "conditions.py":
            continue
        literals = {
            node.value
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
        }
        assert not {text for text in literals if any(f":{s}" in text or f"'{s}'" in text for s in statuses)}, path
        assert not literals & statuses, path


@pytest.mark.parametrize("guard", list(Guard))
def test_every_guard_renders(guard: Guard) -> None:
    transition = Transition("probe", frozenset({LeaseStatus.ACTIVE}), LeaseStatus.ACTIVE, guards=(guard,))
    assert conditions.condition(transition, FULL).condition.count(" AND ") == 1


# --- readiness ---------------------------------------------------------------------------------------


def test_only_a_starting_worker_can_be_marked_ready_or_failed_as_a_boot_failure() -> None:
    for transition in (lifecycle.MARK_READY, lifecycle.CLAIM_BOOT_FAILED, lifecycle.CHECK_READINESS):
        assert transition.source == frozenset({LeaseStatus.ACTIVE}) and Guard.STARTING in transition.guards


def test_a_boot_failure_is_claimed_on_the_leases_own_worker_and_recorded_failed() -> None:
    assert Guard.TOKEN in lifecycle.CLAIM_BOOT_FAILED.guards
    assert lifecycle.CLAIM_BOOT_FAILED.outcome is LeaseStatus.FAILED
    assert Write.RECORD_REASON in lifecycle.CLAIM_BOOT_FAILED.writes


def test_ready_at_is_written_once_because_marking_ready_needs_a_starting_worker() -> None:
    rendered = conditions.render(lifecycle.MARK_READY, Inputs(now=NOW, token="w-1"))
    assert "worker_state = :starting" in rendered.condition
    assert rendered.values[":ready"] == {"S": "ready"} and rendered.values[":now"] == {"N": str(NOW)}


def test_a_readiness_check_is_claimed_only_when_nobody_checked_within_the_interval() -> None:
    rendered = conditions.condition(lifecycle.CHECK_READINESS, Inputs(now=NOW, checked_before=NOW - 2))
    assert "ready_checked_epoch <= :checked_before" in rendered.condition
    assert rendered.values[":checked_before"] == {"N": str(NOW - 2)}


def test_activation_records_a_worker_ready_at_once_with_its_ready_time() -> None:
    ready = conditions.render(lifecycle.ACTIVATE, Inputs(now=NOW, worker=WorkerRecord("p", "t", ready=True)))
    booting = conditions.render(lifecycle.ACTIVATE, Inputs(now=NOW, worker=WorkerRecord("p", "t")))
    assert ready.values[":worker_state"] == {"S": "ready"} and "ready_epoch = :now" in ready.update
    assert booting.values[":worker_state"] == {"S": "starting"} and "ready_epoch" not in booting.update


def test_a_renewal_that_reserves_spend_holds_only_while_the_expiry_read_is_still_current() -> None:
    rendered = conditions.render(lifecycle.RENEW, Inputs(now=NOW, start=NOW, owner="alice", seen_expiry=NOW + 60))
    assert "expires_epoch = :seen_expiry" in rendered.condition
    assert "expires_epoch" not in conditions.render(lifecycle.RENEW, Inputs(now=NOW, start=NOW)).condition.replace(
        "expires_epoch > :now", ""
    )


def test_activation_rewrites_held_counters_only_when_budgets_are_reweighed() -> None:
    worker = WorkerRecord("runpod", "pod-1", None, 0.69)
    plain = conditions.render(lifecycle.ACTIVATE, Inputs(worker=worker))
    reweighed = conditions.render(lifecycle.ACTIVATE, Inputs(worker=worker, reweighed=("cost#alice@690000",)))
    assert "held_counters" not in plain.update
    assert "held_counters = :reweighed" in reweighed.update
    assert reweighed.values[":reweighed"] == {"SS": ["cost#alice@690000"]}
