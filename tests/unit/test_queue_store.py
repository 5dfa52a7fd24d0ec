"""The queue's store contract, on DynamoDB (moto, dynalite: tables of template.yaml) and in memory, explicit `now`s:
queued leases, their admission (once, before queued_until, with their slots), requeue, cancel, expiry, the
preemption notice, its claim and the hand-over of the slot at its end."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from scheduler.errors import LeaseConflict, LeaseNotFound, LeaseQueued, NotLeaseOwner, Preempting
from scheduler.leases.admission import serve_queue
from scheduler.leases.context import Context
from scheduler.lifecycle import LeaseStatus
from scheduler.limits import LeaseLimits
from scheduler.models import Lease, ListFilter
from scheduler.store import LeaseStateChanged
from scheduler.store.counters import Limit
from scheduler.store.items import epoch
from scheduler.store.port import LeaseStorePort
from scheduler.store.queue_model import Handover, QueueWait
from scheduler.store.queue_records import NoticeRecord

from .builders import NOW, Leases, context, memory_provider, new_lease, registry_of, worker_for

WAIT = QueueWait("every provider is at its lease cap", ("local-docker",), True, {"SCENE": "intro"})
SOON = NOW + timedelta(seconds=30)
AFTER = NOW + timedelta(minutes=11)  # past a 10-minute queue


def queued(
    store: LeaseStorePort, *, priority: int = 50, at: int = 0, wait: QueueWait = WAIT, **fields: object
) -> Lease:
    """A lease queued `at` seconds after NOW for 10 minutes."""
    made = NOW + timedelta(seconds=at)
    lease = new_lease(created_at=made, **fields).replace(  # type: ignore[arg-type]
        status=LeaseStatus.QUEUED,
        priority=priority,
        queued_at=made,
        queued_until=made + timedelta(minutes=10),
        expires_at=made + timedelta(minutes=10),
    )
    store.queue.enqueue(lease, wait)
    return lease


def admitted(lease: Lease, at: object = SOON, provider: str = "local-docker") -> Lease:
    """The queued lease as an admission at `at` makes it."""
    return lease.replace(
        status=LeaseStatus.PENDING,
        provider=provider,
        created_at=at,
        expires_at=at + timedelta(seconds=lease.ttl_seconds),  # type: ignore[operator]
        admitted_at=at,
    )


def noticed(store: LeaseStorePort, leases: Leases, *, priority: int = 10, preemptor: str = "p") -> Lease:
    """An active preemptible lease made an hour ago (for two more), given a notice for `preemptor` at NOW."""
    lease = new_lease(created_at=NOW - timedelta(hours=1), ttl_seconds=3 * 3600).replace(
        priority=priority, preemptible=True
    )
    store.create_pending(lease)
    store.activate(lease.lease_id, lease.provider, worker_for(lease))
    found = store.queue.notice(lease.lease_id, NOW, NoticeRecord(epoch(NOW) + 120, preemptor, 80), epoch(NOW) - 300)
    assert found is not None
    return found


# --- queued leases -----------------------------------------------------------------------------------------


def test_a_queued_lease_reads_back_waiting_until_its_queued_until(store: LeaseStorePort) -> None:
    lease = queued(store)
    read = store.get(lease.lease_id)
    assert read == lease.replace(queue_reason=WAIT.reason)
    assert read.expires_at == read.queued_until and read.worker_state == "starting"


def test_a_queued_lease_is_listed_until_its_queued_until_and_due_after_it(store: LeaseStorePort) -> None:
    lease = queued(store)
    assert [found.lease_id for found in store.list_live(ListFilter(), SOON)[0]] == [lease.lease_id]
    assert store.list_live(ListFilter(), AFTER)[0] == []
    assert [found.lease_id for found in store.due_leases(AFTER)] == [lease.lease_id]
    assert list(store.due_leases(SOON)) == []


def test_the_queue_reads_by_priority_then_age(store: LeaseStorePort) -> None:
    late_high = queued(store, priority=80, at=20)
    early_low = queued(store, priority=10, at=0)
    early_high = queued(store, priority=80, at=10)
    found = [item.lease.lease_id for item in store.queue.queued_leases()]
    assert found == [early_high.lease_id, late_high.lease_id, early_low.lease_id]


def test_the_queue_reads_in_order_across_shards(sharded_store: LeaseStorePort) -> None:
    made = [queued(sharded_store, priority=10 * (n % 3), at=n) for n in range(8)]
    expected = sorted(made, key=lambda lease: (-lease.priority, lease.queued_at))
    assert [item.lease.lease_id for item in sharded_store.queue.queued_leases()] == [
        lease.lease_id for lease in expected
    ]


def test_a_queued_lease_keeps_what_its_admission_needs(store: LeaseStorePort) -> None:
    lease = queued(store)
    item = store.queue.queued_lease(lease.lease_id)
    assert item is not None and (item.env, item.providers, item.capacity) == (
        {"SCENE": "intro"},
        ("local-docker",),
        True,
    )
    assert item.queued_epoch == epoch(NOW)


def test_only_leases_waiting_for_capacity_at_or_above_a_priority_are_counted_ahead(store: LeaseStorePort) -> None:
    queued(store, priority=60)
    queued(store, priority=40)
    queued(store, priority=90, wait=WAIT._replace(capacity=False))  # waits for its owner's quota
    assert store.queue.queue_ahead(50) == {"local-docker": 1}
    assert store.queue.queue_ahead(0) == {"local-docker": 2}
    assert store.queue.queue_ahead(61) == {}


def test_a_queued_lease_holds_no_capacity(store: LeaseStorePort, leases: Leases) -> None:
    queued(store)
    active = leases.active()
    assert [lease.lease_id for lease in store.queue.running_leases()] == [active.lease_id]


# --- admission ---------------------------------------------------------------------------------------------


def test_an_admitted_lease_is_pending_made_at_its_admission(store: LeaseStorePort) -> None:
    lease = queued(store)
    assert store.queue.admit(admitted(lease)) is None
    read = store.get(lease.lease_id)
    assert (read.status, read.created_at, read.admitted_at, read.queued_at) == ("pending", SOON, SOON, NOW)
    assert read.expires_at == SOON + timedelta(seconds=lease.ttl_seconds) and read.queue_reason is None
    assert list(store.queue.queued_leases()) == []


def test_a_lease_is_admitted_once(store: LeaseStorePort) -> None:
    lease = queued(store)
    store.queue.admit(admitted(lease))
    with pytest.raises(LeaseStateChanged):
        store.queue.admit(admitted(lease, at=SOON + timedelta(seconds=1)))


def test_another_admission_in_the_same_second_is_not_taken_for_ours(store: LeaseStorePort) -> None:
    lease = queued(store)
    store.queue.admit(admitted(lease))
    with pytest.raises(LeaseStateChanged):  # the same times, another admitter: it must not provision the lease too
        store.queue.admit(admitted(lease))


def test_a_lease_past_its_queued_until_is_not_admitted(store: LeaseStorePort) -> None:
    lease = queued(store)
    with pytest.raises(LeaseStateChanged):
        store.queue.admit(admitted(lease, at=AFTER))
    assert store.get(lease.lease_id).status == "queued"


@pytest.mark.moto_only("an admission with limits is a transaction, which dynalite lacks")
def test_an_admission_takes_the_slots_and_refuses_a_full_cap(limited_store: LeaseStorePort) -> None:
    first, second = queued(limited_store), queued(limited_store, at=1)
    cap = Limit.for_provider("local-docker", 1)
    assert limited_store.queue.admit(admitted(first), [cap]) is None
    assert limited_store.queue.admit(admitted(second), [cap]) == cap
    assert limited_store.get(second.lease_id).status == "queued"
    assert limited_store.counters([cap.counter]) == {cap.counter: 1}
    assert limited_store.held_counters(first.lease_id) == (cap.counter,)


@pytest.mark.moto_only("the slots are given back in a transaction, which dynalite lacks")
def test_a_requeued_lease_gives_its_slots_back_and_keeps_its_place(limited_store: LeaseStorePort) -> None:
    lease = queued(limited_store)
    cap = Limit.for_provider("local-docker", 1)
    limited_store.queue.admit(admitted(lease), [cap])
    assert limited_store.queue.requeue(admitted(lease), SOON, (cap.counter,), WAIT._replace(reason="no room", env=None))
    read = limited_store.get(lease.lease_id)
    assert (read.status, read.queued_at, read.queue_reason, read.expires_at) == (
        "queued",
        NOW,
        "no room",
        lease.queued_until,
    )
    assert limited_store.counters([cap.counter]) == {cap.counter: 0}
    item = limited_store.queue.queued_lease(lease.lease_id)
    assert item is not None and item.env == {"SCENE": "intro"}


def test_a_requeue_after_a_failed_admission_shows_the_lease_as_made_and_when_it_is_tried_again(
    store: LeaseStorePort,
) -> None:
    lease = queued(store)
    store.queue.admit(admitted(lease))
    assert store.queue.requeue(lease, SOON, (), WAIT._replace(reason="no provider had room: gpu", failures=3))
    read = store.get(lease.lease_id)
    assert (read.status, read.created_at, read.admitted_at, read.queued_at) == ("queued", NOW, None, NOW)
    assert read.queue_reason == "attempt 3 failed, no provider had room: gpu; the next one in 8 s at the earliest"
    item = store.queue.queued_lease(lease.lease_id)
    assert item is not None and (item.failures, item.retry_epoch) == (3, epoch(SOON) + 8)


def test_a_lease_is_not_requeued_past_its_queued_until(store: LeaseStorePort) -> None:
    lease = queued(store)
    store.queue.admit(admitted(lease))
    assert not store.queue.requeue(admitted(lease), AFTER, (), WAIT)
    assert store.get(lease.lease_id).status == "pending"


# --- cancel and expiry -------------------------------------------------------------------------------------


def test_a_cancelled_queued_lease_ends_released_never_having_a_worker(store: LeaseStorePort) -> None:
    lease = queued(store)
    ended = store.queue.cancel_queued(lease.lease_id, "alice", SOON, by="anim")
    assert (ended.status, ended.released_at, ended.provider_token, ended.ended_by) == ("released", SOON, None, "anim")
    assert "cancelled while queued" in (ended.failure_reason or "")
    assert list(store.queue.queued_leases()) == [] and store.list_live(ListFilter(), SOON)[0] == []


def test_another_owners_queued_lease_is_not_cancelled(store: LeaseStorePort) -> None:
    lease = queued(store)
    with pytest.raises(NotLeaseOwner):
        store.queue.cancel_queued(lease.lease_id, "bob", SOON)
    assert store.get(lease.lease_id).status == "queued"


def test_a_release_of_a_queued_lease_is_told_it_is_queued(store: LeaseStorePort) -> None:
    lease = queued(store)
    with pytest.raises(LeaseQueued):
        store.claim_release(lease.lease_id, "alice", SOON)


def test_a_renewal_of_a_queued_lease_is_a_conflict(store: LeaseStorePort) -> None:
    lease = queued(store)
    with pytest.raises(LeaseConflict):
        store.renew(lease.lease_id, "alice", 600, SOON)


def test_a_queued_lease_expires_only_past_its_queued_until_saying_why(store: LeaseStorePort) -> None:
    lease = queued(store)
    assert store.queue.expire_queued(lease.lease_id, SOON, "not admitted", by="sweep") is None
    ended = store.queue.expire_queued(lease.lease_id, AFTER, "not admitted", by="sweep")
    assert ended is not None and (ended.status, ended.failure_reason, ended.ended_by) == (
        "expired",
        "not admitted",
        "sweep",
    )
    assert list(store.due_leases(AFTER)) == [] and list(store.queue.queued_leases()) == []


def test_an_active_lease_is_neither_cancelled_nor_expired_as_a_queued_one(
    store: LeaseStorePort, leases: Leases
) -> None:
    lease = leases.active()
    with pytest.raises(LeaseNotFound):
        store.queue.cancel_queued(lease.lease_id, "alice", SOON)
    assert store.queue.expire_queued(lease.lease_id, NOW + timedelta(days=1), "x") is None


# --- preemption --------------------------------------------------------------------------------------------


def test_a_noticed_lease_reads_its_preempt_at_and_is_due_then(store: LeaseStorePort, leases: Leases) -> None:
    lease = noticed(store, leases)
    assert lease.preempt_at == NOW + timedelta(seconds=120)
    assert [due.lease_id for due in store.due_leases(NOW + timedelta(seconds=120))] == [lease.lease_id]
    assert list(store.due_leases(NOW + timedelta(seconds=119))) == []


def test_a_noticed_lease_reads_the_priority_it_is_preempted_for(store: LeaseStorePort, leases: Leases) -> None:
    lease = noticed(store, leases)
    assert lease.preempt_priority == 80 and store.get(lease.lease_id).preempt_priority == 80
    assert store.get(leases.active().lease_id).preempt_priority is None


def test_a_lease_is_noticed_once_and_only_when_it_may_be(store: LeaseStorePort, leases: Leases) -> None:
    lease = noticed(store, leases)
    record = NoticeRecord(epoch(NOW) + 200, "q", 90)
    assert store.queue.notice(lease.lease_id, NOW, record, epoch(NOW) - 300) is None
    kept = leases.active()  # not preemptible
    assert store.queue.notice(kept.lease_id, NOW, record, epoch(NOW) + 300) is None


def running_preemptible(store: LeaseStorePort, *, priority: int = 10, preemptible: bool = True) -> Lease:
    """An active lease made an hour ago (for two more), of `priority`."""
    lease = new_lease(created_at=NOW - timedelta(hours=1), ttl_seconds=3 * 3600).replace(
        priority=priority, preemptible=preemptible
    )
    store.create_pending(lease)
    store.activate(lease.lease_id, lease.provider, worker_for(lease))
    return lease


NOTICE = NoticeRecord(epoch(NOW) + 120, "p", 80)
RAN_LONG_ENOUGH = epoch(NOW) - 300  # MIN_RUNTIME_SECONDS 300: made at or before this


def test_a_lease_younger_than_the_minimum_runtime_is_not_noticed(store: LeaseStorePort) -> None:
    lease = running_preemptible(store)  # made an hour ago
    assert store.queue.notice(lease.lease_id, NOW, NOTICE, epoch(NOW) - 3601) is None
    assert store.queue.notice(lease.lease_id, NOW, NOTICE, epoch(NOW) - 3600) is not None


def test_a_lease_of_the_preemptors_priority_is_not_noticed(store: LeaseStorePort) -> None:
    lease = running_preemptible(store, priority=80)
    assert store.queue.notice(lease.lease_id, NOW, NOTICE, RAN_LONG_ENOUGH) is None
    assert store.queue.notice(lease.lease_id, NOW, NOTICE._replace(priority=81), RAN_LONG_ENOUGH) is not None


def test_a_non_preemptible_lease_is_never_noticed(store: LeaseStorePort) -> None:
    lease = running_preemptible(store, priority=0, preemptible=False)
    assert store.queue.notice(lease.lease_id, NOW, NOTICE._replace(priority=100), epoch(NOW)) is None
    assert store.get(lease.lease_id).preempt_at is None


def test_a_renewal_past_the_notice_is_refused_naming_it(store: LeaseStorePort, leases: Leases) -> None:
    lease = noticed(store, leases)
    with pytest.raises(Preempting) as refused:
        store.renew(lease.lease_id, "alice", 600, NOW)
    assert refused.value.details == {"preempt_at": "2026-11-30T04:02:00Z"}
    with pytest.raises(Preempting):
        store.renew(lease.lease_id, "alice", None, NOW)  # its own ttl would pass it too
    assert store.renew(lease.lease_id, "alice", 120, NOW).expires_at == NOW + timedelta(seconds=120)


def test_a_preemption_is_claimed_once_its_notice_ran_out(store: LeaseStorePort, leases: Leases) -> None:
    lease = noticed(store, leases, preemptor="the-preemptor")
    assert store.claim_preempted(lease.lease_id, NOW + timedelta(seconds=119)) is None
    claim = store.claim_preempted(lease.lease_id, NOW + timedelta(seconds=120), by="sweep")
    assert claim is not None and claim.outcome == "preempted"
    assert (claim.preempted_for, claim.preempt_priority, claim.by) == ("the-preemptor", 80, "sweep")


@pytest.mark.moto_only("the hand-over is a transaction, which dynalite lacks")
def test_a_preempted_leases_slot_goes_to_its_preemptor_in_the_same_step(limited_store: LeaseStorePort) -> None:
    cap, quota = Limit.for_provider("local-docker", 1), Limit.for_owner("bob", 5)
    victim = new_lease(created_at=NOW - timedelta(hours=1), ttl_seconds=3 * 3600).replace(preemptible=True, priority=10)
    limited_store.create_pending(victim, [cap, Limit.for_owner("alice", 5)])
    limited_store.activate(victim.lease_id, victim.provider, worker_for(victim))
    waiting = queued(limited_store, priority=80, owner_id="bob")
    limited_store.queue.notice(
        victim.lease_id, NOW, NoticeRecord(epoch(NOW) + 120, waiting.lease_id, 80), epoch(NOW) - 300
    )
    at = NOW + timedelta(seconds=120)
    claim = limited_store.claim_preempted(victim.lease_id, at, by="sweep")
    assert claim is not None

    ended = limited_store.queue.finish_preempted(
        claim, at, Handover(admitted(waiting, at), cap.counter, (quota,)), "by 80"
    )

    assert ended is not None and (ended.status, ended.failure_reason) == ("preempted", "by 80")
    assert limited_store.get(victim.lease_id).status == "preempted"
    assert limited_store.get(waiting.lease_id).status == "pending"
    assert limited_store.held_counters(waiting.lease_id) == tuple(sorted((cap.counter, quota.counter)))
    assert limited_store.counters([cap.counter, "owner#alice", quota.counter]) == {
        cap.counter: 1,
        "owner#alice": 0,
        quota.counter: 1,
    }


@pytest.mark.moto_only("the hand-over is a transaction, which dynalite lacks")
def test_a_preempted_leases_slot_is_not_handed_to_a_preemptor_that_no_longer_waits(
    limited_store: LeaseStorePort,
) -> None:
    cap = Limit.for_provider("local-docker", 1)
    victim = new_lease(created_at=NOW - timedelta(hours=1), ttl_seconds=3 * 3600).replace(preemptible=True, priority=10)
    limited_store.create_pending(victim, [cap])
    limited_store.activate(victim.lease_id, victim.provider, worker_for(victim))
    waiting = queued(limited_store, priority=80)
    limited_store.queue.notice(
        victim.lease_id, NOW, NoticeRecord(epoch(NOW) + 120, waiting.lease_id, 80), epoch(NOW) - 300
    )
    limited_store.queue.cancel_queued(waiting.lease_id, "alice", NOW)
    at = NOW + timedelta(seconds=120)
    claim = limited_store.claim_preempted(victim.lease_id, at)
    assert claim is not None

    assert limited_store.queue.finish_preempted(claim, at, Handover(admitted(waiting, at), cap.counter)) is None

    assert limited_store.get(victim.lease_id).status == "releasing"  # nothing written: finished as any other
    assert limited_store.finish_release(claim, at).status == "preempted"
    assert limited_store.counters([cap.counter]) == {cap.counter: 0}


def _admit_from_admitters_at_once(ctx: Context, admitters: int) -> list[str]:
    """The leases `admitters` admission passes started together admitted, all of them."""
    start = threading.Barrier(admitters)
    admitted: list[str] = []

    def admitter() -> None:
        start.wait()
        admitted.extend(lease.lease_id for lease in serve_queue(ctx).admitted)

    threads = [threading.Thread(target=admitter) for _ in range(admitters)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return admitted


def test_admitters_running_at_once_admit_each_queued_lease_once(store: LeaseStorePort) -> None:
    # No cap (dynalite has no transactions): the race is the admission's own condition, one conditional write.
    provider = memory_provider()
    ctx = context(store, registry_of(provider), clock=lambda: SOON)
    waiting = [queued(store, at=n, owner_id=f"o{n}") for n in range(6)]
    admitted = _admit_from_admitters_at_once(ctx, 6)

    assert sorted(admitted) == sorted(lease.lease_id for lease in waiting)
    assert sorted(lease_id for lease_id, _ in provider.provisioned) == sorted(admitted)
    assert {str(store.get(lease.lease_id).status) for lease in waiting} == {"active"}


@pytest.mark.moto_only("an admission with limits is a transaction, which dynalite lacks")
def test_admitters_running_at_once_never_pass_a_cap_nor_admit_a_lease_twice(limited_store: LeaseStorePort) -> None:
    provider = memory_provider()
    ctx = context(
        limited_store, registry_of(provider), limits=LeaseLimits(provider_caps={"local-docker": 3}), clock=lambda: SOON
    )
    waiting = [queued(limited_store, at=n, owner_id=f"o{n}") for n in range(6)]
    admitted = _admit_from_admitters_at_once(ctx, 6)

    assert len(admitted) == len(set(admitted)) == 3
    assert len(provider.provisioned) == 3 and len(provider.workers) == 3
    assert limited_store.counters(["provider#local-docker"]) == {"provider#local-docker": 3}
    assert sorted(str(limited_store.get(lease.lease_id).status) for lease in waiting) == ["active"] * 3 + ["queued"] * 3
