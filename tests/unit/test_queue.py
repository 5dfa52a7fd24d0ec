"""The queue through the use cases, on the memory store with a clock the test moves: an acquire that cannot be
served now waits (202), is admitted when a slot frees in priority and fair-share order, expires unadmitted or is
cancelled without a worker, and preempts a lower-priority lease after its notice, which hands it the slot."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Any

import pytest

from scheduler.errors import Forbidden, NoCapacity, Preempting, QuotaExceeded
from scheduler.leases.acquire import acquire as acquire_outcome
from scheduler.leases.admission import serve_queue
from scheduler.leases.context import Context
from scheduler.leases.outcomes import Acquired, NotAcquired, Queued
from scheduler.leases.queue_view import ordered
from scheduler.leases.reads import get_when_ready
from scheduler.leases.release import release
from scheduler.leases.renew import renew
from scheduler.leases.sweep import sweep
from scheduler.limits import LeaseLimits
from scheduler.models import WorkerKind
from scheduler.owner_policies import OwnerPolicies
from scheduler.providers.memory import MemoryProvider
from scheduler.request_models import LeaseRequest
from scheduler.store.memory import MemoryLeaseStore

from .builders import NOW, context, memory_provider, registry_of
from .conftest import memory_store


class Clock:
    """Now, moved by the test."""

    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class Scheduler:
    """One memory store, one in-memory provider capped at `cap` (None: no cap), the use cases on them."""

    def __init__(self, cap: int | None = 2, per_owner: int | None = None, **settings: Any) -> None:
        self.store: MemoryLeaseStore = memory_store(counters=True)
        self.provider: MemoryProvider = memory_provider()
        self.clock = Clock()
        settings.setdefault("min_runtime_seconds", 300)
        settings.setdefault("preemption_notice_seconds", 120)
        limits = LeaseLimits(provider_caps={} if cap is None else {"local-docker": cap}, per_owner=per_owner)
        self.ctx: Context = context(self.store, registry_of(self.provider), limits=limits, clock=self.clock, **settings)

    def acquire(self, **fields: Any) -> Any:
        fields.setdefault("kind", WorkerKind.RENDERER)
        fields.setdefault("owner_id", "alice")
        return acquire_outcome(self.ctx, LeaseRequest(**fields))

    def active(self, **fields: Any) -> Any:
        outcome = self.acquire(**fields)
        assert isinstance(outcome, Acquired), outcome
        return outcome.lease

    def queued(self, **fields: Any) -> Any:
        fields.setdefault("queue_seconds", 600)
        outcome = self.acquire(**fields)
        assert isinstance(outcome, Queued), outcome
        return outcome.lease

    def status(self, lease: Any) -> str:
        return str(self.store.get(lease.lease_id).status)

    def release(self, lease: Any) -> Any:
        return release(self.ctx, lease.lease_id, lease.owner_id)

    def workers(self) -> int:
        return len(self.provider.workers)


# --- queued acquires ---------------------------------------------------------------------------------------


def test_an_acquire_that_cannot_be_served_now_and_may_wait_is_queued_with_its_place_and_reason() -> None:
    scheduler = Scheduler(cap=1)
    scheduler.active()
    lease = scheduler.queued()
    assert (lease.status, lease.queue_position, lease.provider_token) == ("queued", 1, None)
    assert lease.queued_until == NOW + timedelta(seconds=600) and lease.expires_at == lease.queued_until
    assert "every provider is at its lease cap" in lease.queue_reason
    assert scheduler.workers() == 1


def test_without_queue_seconds_a_full_cap_is_still_no_capacity() -> None:
    scheduler = Scheduler(cap=1)
    scheduler.active()
    outcome = scheduler.acquire()
    assert isinstance(outcome, NotAcquired) and isinstance(outcome.error, NoCapacity)


def test_an_owner_at_its_quota_waits_for_its_own_leases() -> None:
    scheduler = Scheduler(cap=5, per_owner=1)
    scheduler.active()
    lease = scheduler.queued()
    assert "MAX_LEASES_PER_OWNER" in lease.queue_reason
    item = scheduler.store.queue.queued_lease(lease.lease_id)
    assert item is not None and not item.capacity
    outcome = scheduler.acquire(queue_seconds=0)
    assert isinstance(outcome, NotAcquired) and isinstance(outcome.error, QuotaExceeded)


def test_a_priority_above_the_owners_max_priority_is_forbidden_naming_the_limit() -> None:
    scheduler = Scheduler(owner_policies=OwnerPolicies.parse('{"alice": {"max_priority": 60}}'))
    with pytest.raises(Forbidden, match="max_priority 60"):
        scheduler.acquire(priority=61)
    assert isinstance(scheduler.acquire(priority=60), Acquired)


def test_every_provider_answering_no_capacity_queues_the_lease_without_a_slot() -> None:
    scheduler = Scheduler(cap=3)
    scheduler.provider.full = True
    lease = scheduler.queued()
    assert "no provider had room" in lease.queue_reason
    assert scheduler.store.counters(["provider#local-docker"]) == {"provider#local-docker": 0}


def test_a_new_acquire_yields_to_queued_leases_of_at_least_its_priority() -> None:
    scheduler = Scheduler(cap=1)
    scheduler.provider.full = True
    waiting = scheduler.queued(priority=50)
    scheduler.provider.full = False  # room now, before any admission pass
    outcome = scheduler.acquire(priority=50)
    assert isinstance(outcome, NotAcquired) and "left to the queued leases" in outcome.error.message
    assert outcome.error.details == {
        "providers": {"local-docker": "1 queued lease(s) of priority 50 or higher wait for it"}
    }
    assert isinstance(scheduler.acquire(priority=51), Acquired)
    assert scheduler.status(waiting) == "queued"


# --- admission ---------------------------------------------------------------------------------------------


def test_without_a_cap_a_queued_lease_the_provider_could_not_serve_blocks_no_new_acquire() -> None:
    scheduler = Scheduler(cap=None)
    scheduler.provider.full = True
    scheduler.queued(priority=50)
    scheduler.provider.full = False  # room for a lease the queued one is not (a GPU the host lacks, say)
    assert isinstance(scheduler.acquire(priority=50), Acquired)


def test_a_released_slot_admits_the_queued_lease_which_runs_from_its_admission() -> None:
    scheduler = Scheduler(cap=1)
    holder = scheduler.active()
    waiting = scheduler.queued()
    scheduler.clock.advance(30)
    scheduler.release(holder)

    report = serve_queue(scheduler.ctx)

    lease = scheduler.store.get(waiting.lease_id)
    assert [admitted.lease_id for admitted in report.admitted] == [waiting.lease_id]
    assert (lease.status, lease.admitted_at, lease.created_at, lease.queued_at) == (
        "active",
        NOW + timedelta(seconds=30),
        NOW + timedelta(seconds=30),
        NOW,
    )
    assert lease.expires_at == NOW + timedelta(seconds=30 + lease.ttl_seconds)
    assert scheduler.workers() == 1


def test_the_queue_is_admitted_by_priority_whatever_the_arrival_order() -> None:
    scheduler = Scheduler(cap=1)
    holder = scheduler.active()
    low, high, mid = (scheduler.queued(priority=p, owner_id=f"o{p}") for p in (30, 80, 50))
    assert [lease.lease_id for lease in ordered(scheduler.ctx)] == [high.lease_id, mid.lease_id, low.lease_id]
    admitted = []
    current = holder
    for _ in range(3):
        scheduler.release(current)
        (current,) = serve_queue(scheduler.ctx).admitted
        admitted.append(current.lease_id)
    assert admitted == [high.lease_id, mid.lease_id, low.lease_id]


def test_a_queued_lease_that_cannot_fit_does_not_block_those_behind_it() -> None:
    scheduler = Scheduler(cap=2, per_owner=1)
    mine = scheduler.active(owner_id="alice")
    scheduler.active(owner_id="carol")
    blocked = scheduler.queued(owner_id="alice", priority=90)  # its owner's quota
    behind = scheduler.queued(owner_id="bob", priority=10)  # the cap
    scheduler.release(
        scheduler.store.get(
            next(lease.lease_id for lease in scheduler.store.live_leases() if lease.owner_id == "carol")
        )
    )
    assert [lease.lease_id for lease in serve_queue(scheduler.ctx).admitted] == [behind.lease_id]
    assert scheduler.status(blocked) == "queued" and scheduler.status(mine) == "active"


def test_equal_priorities_are_admitted_by_weighted_share() -> None:
    scheduler = Scheduler(cap=2, owner_policies=OwnerPolicies.parse('{"heavy": {"weight": 3}}'))
    first = scheduler.active(owner_id="heavy")
    scheduler.active(owner_id="light")
    light = scheduler.queued(owner_id="light")
    scheduler.clock.advance(1)
    heavy = scheduler.queued(owner_id="heavy")  # younger, but heavy holds 1/3, light 1/1
    scheduler.release(first)
    assert [lease.lease_id for lease in serve_queue(scheduler.ctx).admitted] == [heavy.lease_id]
    assert scheduler.status(light) == "queued"


def test_an_admission_that_finds_no_provider_with_room_goes_back_to_the_queue() -> None:
    scheduler = Scheduler(cap=1)
    holder = scheduler.active()
    waiting = scheduler.queued()
    scheduler.release(holder)
    scheduler.provider.full = True

    report = serve_queue(scheduler.ctx)

    lease = scheduler.store.get(waiting.lease_id)
    assert report.requeued == [waiting.lease_id] and lease.status == "queued"
    assert lease.queued_until == waiting.queued_until and lease.queued_at == NOW
    assert scheduler.store.counters(["provider#local-docker"]) == {"provider#local-docker": 0}


def test_a_lease_whose_admission_keeps_failing_is_tried_again_only_after_a_growing_backoff() -> None:
    scheduler = Scheduler(cap=None)  # a provider without a cap: only asking it tells that it cannot serve
    scheduler.provider.full = True
    waiting = scheduler.queued()
    tried: list[int] = []
    provision = scheduler.provider.provision

    def counted(*args: Any, **kwargs: Any) -> Any:
        tried.append(round((scheduler.clock.now - NOW).total_seconds()))
        return provision(*args, **kwargs)

    scheduler.provider.provision = counted  # type: ignore[method-assign]
    for _ in range(60):  # a pass each second, as make run's sweep
        serve_queue(scheduler.ctx)
        scheduler.clock.advance(1)

    assert tried == [0, 2, 6, 14, 30]
    lease = scheduler.store.get(waiting.lease_id)
    assert (lease.status, lease.created_at, lease.admitted_at) == ("queued", waiting.created_at, None)
    assert lease.queue_reason is not None and lease.queue_reason.startswith("attempt 5 failed, no provider had room")


def test_admitters_running_at_once_never_pass_the_cap_nor_admit_a_lease_twice() -> None:
    scheduler = Scheduler(cap=3)
    holders = [scheduler.active(owner_id=f"h{n}") for n in range(3)]
    waiting = [scheduler.queued(owner_id=f"w{n}") for n in range(6)]
    for holder in holders:
        scheduler.release(holder)
    start = threading.Barrier(8)

    def admit() -> list[str]:
        start.wait()
        return [lease.lease_id for lease in serve_queue(scheduler.ctx).admitted]

    results: list[list[str]] = []
    threads = [threading.Thread(target=lambda: results.append(admit())) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    admitted = [lease_id for found in results for lease_id in found]
    assert len(admitted) == len(set(admitted)) == 3
    assert scheduler.workers() == 3 and len(scheduler.provider.provisioned) == 6  # holders and the admitted
    assert sum(scheduler.status(lease) == "queued" for lease in waiting) == 3


# --- the queue's ends --------------------------------------------------------------------------------------


def test_a_queued_lease_not_admitted_by_its_queued_until_expires_without_a_worker() -> None:
    scheduler = Scheduler(cap=1)
    scheduler.active(ttl_seconds=3600)
    waiting = scheduler.queued(queue_seconds=60)
    scheduler.clock.advance(60)

    report = sweep(scheduler.ctx)

    lease = scheduler.store.get(waiting.lease_id)
    assert [ended.lease_id for ended in report.queue_expired] == [waiting.lease_id]
    assert (lease.status, lease.provider_token, lease.released_at) == ("expired", None, NOW + timedelta(seconds=60))
    assert (lease.failure_reason or "").startswith("not admitted within queue_seconds (queued until")
    assert waiting.lease_id not in [lease_id for lease_id, _ in scheduler.provider.provisioned]


def test_a_release_of_a_queued_lease_cancels_it_and_no_worker_is_ever_made() -> None:
    scheduler = Scheduler(cap=1)
    holder = scheduler.active()
    waiting = scheduler.queued()
    cancelled = scheduler.release(waiting)
    scheduler.release(holder)
    serve_queue(scheduler.ctx)
    assert (cancelled.status, cancelled.provider_token) == ("released", None)
    assert waiting.lease_id not in [lease_id for lease_id, _ in scheduler.provider.provisioned]


def test_a_read_waits_through_the_queue_until_the_lease_is_active() -> None:
    scheduler = Scheduler(cap=1)
    holder = scheduler.active()
    waiting = scheduler.queued()
    slept: list[float] = []

    def sleep(seconds: float) -> None:  # meanwhile, the slot frees and the queue is served
        slept.append(seconds)
        if len(slept) == 2:
            scheduler.release(holder)
            serve_queue(scheduler.ctx)

    ticks = iter(range(100))
    read = get_when_ready(
        scheduler.ctx,
        waiting.lease_id,
        10,
        lambda: None,
        sleep=sleep,
        monotonic=lambda: float(next(ticks)),  # type: ignore[arg-type,return-value]
    )
    assert read.lease.status == "active" and len(slept) == 2


# --- preemption --------------------------------------------------------------------------------------------


def test_a_preemption_notices_the_victim_refuses_its_renewal_ends_it_after_the_notice_and_hands_its_slot() -> None:
    scheduler = Scheduler(cap=1)
    victim = scheduler.active(owner_id="batch", priority=10, preemptible=True, ttl_seconds=7200)
    scheduler.clock.advance(300)  # MIN_RUNTIME_SECONDS
    urgent = scheduler.queued(owner_id="live", priority=80)

    noticed = serve_queue(scheduler.ctx).noticed

    assert [lease.lease_id for lease in noticed] == [victim.lease_id]
    preempt_at = scheduler.store.get(victim.lease_id).preempt_at
    assert preempt_at == scheduler.clock.now + timedelta(seconds=120)
    with pytest.raises(Preempting):
        renew(scheduler.ctx, victim.lease_id, "batch", 600)
    scheduler.clock.advance(119)
    assert sweep(scheduler.ctx).preempted == [] and scheduler.status(victim) == "active"
    scheduler.clock.advance(1)

    report = sweep(scheduler.ctx)

    ended, admitted = scheduler.store.get(victim.lease_id), scheduler.store.get(urgent.lease_id)
    assert (ended.status, ended.released_at) == ("preempted", preempt_at)
    assert ended.failure_reason is not None and "preempted by a lease of priority 80" in ended.failure_reason
    assert (admitted.status, admitted.admitted_at) == ("active", preempt_at)
    assert [outcome.lease.lease_id for outcome in report.preemptors] == [urgent.lease_id]
    assert scheduler.workers() == 1
    assert scheduler.store.counters(["provider#local-docker"]) == {"provider#local-docker": 1}


def test_a_notice_given_within_a_second_still_lasts_the_whole_notice() -> None:
    scheduler = Scheduler(cap=1)
    victim = scheduler.active(owner_id="batch", priority=10, preemptible=True, ttl_seconds=7200)
    scheduler.clock.advance(300.7)  # preempt_at is kept in whole seconds: rounded up, never down
    scheduler.queued(owner_id="live", priority=80)

    serve_queue(scheduler.ctx)

    preempt_at = scheduler.store.get(victim.lease_id).preempt_at
    assert preempt_at is not None and preempt_at - scheduler.clock.now >= timedelta(seconds=120)


def test_a_non_preemptible_lease_is_left_alone() -> None:
    scheduler = Scheduler(cap=1)
    kept = scheduler.active(owner_id="batch", priority=0, preemptible=False)
    scheduler.clock.advance(3600)
    scheduler.queued(owner_id="live", priority=100)
    assert serve_queue(scheduler.ctx).noticed == []
    assert scheduler.store.get(kept.lease_id).preempt_at is None


def test_a_lease_younger_than_the_minimum_runtime_is_not_preempted_until_it_is_old_enough() -> None:
    scheduler = Scheduler(cap=1)
    victim = scheduler.active(owner_id="batch", priority=10, preemptible=True, ttl_seconds=7200)
    scheduler.clock.advance(299)
    scheduler.queued(owner_id="live", priority=80)
    assert serve_queue(scheduler.ctx).noticed == []
    scheduler.clock.advance(1)
    assert [lease.lease_id for lease in serve_queue(scheduler.ctx).noticed] == [victim.lease_id]


def test_a_victims_slot_goes_back_to_the_queue_when_its_preemptor_no_longer_waits() -> None:
    scheduler = Scheduler(cap=1)
    victim = scheduler.active(owner_id="batch", priority=10, preemptible=True, ttl_seconds=7200)
    scheduler.clock.advance(300)
    urgent = scheduler.queued(owner_id="live", priority=80)
    serve_queue(scheduler.ctx)
    scheduler.release(urgent)  # cancelled meanwhile
    scheduler.clock.advance(120)

    report = sweep(scheduler.ctx)

    assert [lease.lease_id for lease in report.preempted] == [victim.lease_id] and report.preemptors == []
    assert scheduler.store.counters(["provider#local-docker"]) == {"provider#local-docker": 0}
