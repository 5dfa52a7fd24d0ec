"""One run of the scheduled sweep (`leases/sweep.py`, `run_sweep`): which passes a scheduled run and a hand-off make,
when the rest is handed on, and the gauges it reads; no handler, no metrics."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

import pytest

from scheduler.deadline import Deadline
from scheduler.leases.readiness import ReadinessPolicy
from scheduler.leases.sweep import READINESS_PASS_SECONDS, run_sweep
from scheduler.lifecycle import LeaseStatus
from scheduler.limits import LeaseLimits
from scheduler.models import Lease, WorkerKind
from scheduler.providers.base import Readiness
from scheduler.providers.local_docker.fleet import DockerFleet
from scheduler.providers.local_docker.hosts import DockerHostSpec
from scheduler.providers.memory import MemoryProvider
from scheduler.request_models import LeaseRequest
from scheduler.store import LeaseStore
from scheduler.store.host_slots import StoreHostSlots

from .builders import NOW, Leases, acquire, context, memory_provider, registry_of

LATER = NOW + timedelta(hours=2)
POLICY = ReadinessPolicy(timeout_seconds=600)


class HandOns:
    """The hand-offs a run asked for (each answered `started`)."""

    def __init__(self, started: bool = True) -> None:
        self.hops: list[int] = []
        self.started = started

    def __call__(self, hop: int) -> bool:
        self.hops.append(hop)
        return self.started


class Everything:
    """A lease of each kind a scheduled run has work for, on one in-memory provider whose workers boot."""

    def __init__(self, store: LeaseStore, leases: Leases) -> None:
        self.provider = memory_provider(boots=True)
        self.registry = registry_of(self.provider)
        self.booted = acquire(
            context(store, self.registry, clock=lambda: LATER), LeaseRequest(kind=WorkerKind.RENDERER)
        )
        self.provider.boot(str(self.booted.provider_token))
        self.expired = self._running(leases, ttl_seconds=60)
        self.stopped = self._running(leases, ttl_seconds=86_400)
        self.provider.stop(str(self.stopped.provider_token))

    def _running(self, leases: Leases, ttl_seconds: int) -> Lease:
        lease = leases.active(ttl_seconds=ttl_seconds)
        self.provider.add_worker(lease.lease_id, str(lease.provider_token), NOW)
        return lease


def test_a_scheduled_run_records_ready_workers_releases_due_leases_and_ends_stopped_ones(
    store: LeaseStore, leases: Leases
) -> None:
    arranged = Everything(store, leases)

    run = run_sweep(context(store, arranged.registry, clock=lambda: LATER), 0, POLICY, HandOns())

    assert [lease.lease_id for lease in run.booted.ready] == [arranged.booted.lease_id]
    assert [lease.lease_id for lease in run.due.ended] == [arranged.expired.lease_id]
    assert [lease.lease_id for lease in run.stopped.ended] == [arranged.stopped.lease_id]
    assert run.scheduled and not run.handed_on


def test_a_handed_on_run_only_releases_due_leases(store: LeaseStore, leases: Leases) -> None:
    arranged = Everything(store, leases)

    run = run_sweep(context(store, arranged.registry, clock=lambda: LATER), 3, POLICY, HandOns())

    assert [lease.lease_id for lease in run.due.ended] == [arranged.expired.lease_id]
    assert (run.booted.ready, run.stopped.ended, run.by_provider, run.by_place) == ([], [], {}, {})
    assert store.get(arranged.booted.lease_id).is_starting
    assert store.get(arranged.stopped.lease_id).status == LeaseStatus.ACTIVE
    assert arranged.provider.readiness_calls == [] and not run.scheduled


def test_a_run_with_more_due_than_its_batch_hands_the_rest_on_as_the_next_hop(
    store: LeaseStore, leases: Leases
) -> None:
    provider = memory_provider()
    for _ in range(3):
        lease = leases.active(ttl_seconds=60)
        provider.add_worker(lease.lease_id, str(lease.provider_token), NOW)
    hand_on = HandOns()

    run = run_sweep(context(store, registry_of(provider), clock=lambda: LATER, sweep_batch_size=2), 4, POLICY, hand_on)

    assert (len(run.due.ended), run.handed_on, hand_on.hops) == (2, True, [5])


def test_a_hand_off_that_could_not_be_started_is_reported_not_made(store: LeaseStore, leases: Leases) -> None:
    provider = memory_provider()
    for _ in range(2):
        lease = leases.active(ttl_seconds=60)
        provider.add_worker(lease.lease_id, str(lease.provider_token), NOW)
    ctx = context(store, registry_of(provider), clock=lambda: LATER, sweep_batch_size=1)

    run = run_sweep(ctx, 0, POLICY, HandOns(started=False))

    assert run.due.more and not run.handed_on


def test_a_run_that_finishes_hands_nothing_on(store: LeaseStore, leases: Leases) -> None:
    provider = memory_provider()
    lease = leases.active(ttl_seconds=60)
    provider.add_worker(lease.lease_id, str(lease.provider_token), NOW)
    hand_on = HandOns()

    run = run_sweep(context(store, registry_of(provider), clock=lambda: LATER), 0, POLICY, hand_on)

    assert (run.handed_on, hand_on.hops) == (False, [])


class Listening(MemoryProvider):
    """Records the deadline each readiness listing was given."""

    listed_until: list[Deadline | None]

    def readiness_of(self, workers: Mapping[str, str], deadline: Deadline | None = None) -> dict[str, Readiness]:
        self.listed_until.append(deadline)
        return super().readiness_of(workers, deadline)


def test_the_readiness_pass_runs_within_its_own_slice_of_the_run(store: LeaseStore) -> None:
    provider = Listening(boots=True)
    provider.listed_until = []
    registry = registry_of(provider)
    acquire(context(store, registry), LeaseRequest(kind=WorkerKind.RENDERER))
    whole_run = Deadline.within(600)

    run_sweep(context(store, registry, deadline=whole_run), 0, POLICY, HandOns())

    (given,) = provider.listed_until
    assert given is not None and given.at < whole_run.at
    assert given.remaining() <= READINESS_PASS_SECONDS


@pytest.mark.moto_only("the counters are read with the lease store's counters table beside it")
def test_the_gauges_read_each_capped_provider_and_each_host_of_a_fleet(limited_store: LeaseStore) -> None:
    fleet = DockerFleet(
        [(DockerHostSpec("a", "tcp://127.0.0.1:1", max_leases=2), memory_provider())], StoreHostSlots(limited_store)
    )
    registry = registry_of(fleet)
    limits = LeaseLimits(provider_caps={"local-docker": 5})
    acquire(context(limited_store, registry, limits=limits), LeaseRequest(kind=WorkerKind.RENDERER))

    run = run_sweep(context(limited_store, registry, limits=limits), 0, POLICY, HandOns())

    assert (run.by_provider, run.by_place) == ({"local-docker": 1}, {"a": 1})


def test_a_run_without_caps_or_fleet_reads_no_counter(store: LeaseStore) -> None:
    run = run_sweep(context(store, registry_of(memory_provider())), 0, POLICY, HandOns())

    assert (run.by_provider, run.by_place) == ({}, {})  # the store here has no counters table: a read would have failed
