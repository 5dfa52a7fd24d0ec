"""Leases whose worker stopped behind the service's back end `failed`, with the reason, by whoever sees it first."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.deadline import Deadline
from scheduler.errors import NoCapacity, ProviderFailed
from scheduler.leases import liveness, reconcile
from scheduler.leases.context import Context
from scheduler.leases.reads import get
from scheduler.leases.sweep import sweep
from scheduler.lifecycle import LeaseStatus
from scheduler.limits import LeaseLimits
from scheduler.models import Lease, WorkerKind
from scheduler.providers.base import ProviderRequestFailed, WorkerOutcomeUnknown
from scheduler.providers.memory import MemoryProvider
from scheduler.request_models import LeaseRequest
from scheduler.store import LeaseStore

from .builders import NOW, Leases, acquire, context, memory_provider, registry_of

KILLED = "the worker container exited with code 137, SIGKILL at 2026-11-30T04:05:00Z"
REQUEST = LeaseRequest(kind=WorkerKind.RENDERER, ttl_seconds=600, owner_id="alice")


def _running(arranged: Leases, provider: MemoryProvider, **fields: object) -> Lease:
    lease = arranged.active(**fields)  # type: ignore[arg-type]
    provider.add_worker(lease.lease_id, str(lease.provider_token))
    return lease


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# --- the sweep's cheap check ------------------------------------------------------------------------


def test_sweep_check_fails_a_lease_whose_worker_stopped_and_records_why(store: LeaseStore, leases: Leases) -> None:
    provider = memory_provider()
    lease = _running(leases, provider)
    provider.stop(str(lease.provider_token), KILLED)

    report = liveness.fail_stopped_workers(context(store, registry_of(provider), clock=lambda: NOW))

    ended = store.get(lease.lease_id)
    assert [item.lease_id for item in report.ended] == [lease.lease_id]
    assert (ended.status, ended.failure_reason) == (LeaseStatus.FAILED, KILLED)
    assert ended.released_at is not None


def test_sweep_check_removes_the_stopped_worker(store: LeaseStore, leases: Leases) -> None:
    provider = memory_provider()
    lease = _running(leases, provider)
    provider.stop(str(lease.provider_token))

    liveness.fail_stopped_workers(context(store, registry_of(provider), clock=lambda: NOW))

    assert provider.workers == {}


@pytest.mark.moto_only("caps and quotas use TransactWriteItems, which dynalite lacks")
def test_sweep_check_gives_the_cap_and_quota_slots_back(limited_store: LeaseStore) -> None:
    provider = memory_provider()
    registry = registry_of(provider)
    limits = LeaseLimits(provider_caps={"local-docker": 1}, per_owner=1)
    lease = acquire(context(limited_store, registry, limits=limits), REQUEST)
    provider.stop(str(lease.provider_token))

    liveness.fail_stopped_workers(context(limited_store, registry))

    assert limited_store.counter_values() == {"provider#local-docker": 0, "owner#alice": 0}
    assert acquire(context(limited_store, registry, limits=limits), REQUEST).status == LeaseStatus.ACTIVE


def test_sweep_check_leaves_running_workers_and_their_leases_alone(store: LeaseStore, leases: Leases) -> None:
    provider = memory_provider()
    stopped, running = _running(leases, provider), _running(leases, provider)
    provider.stop(str(stopped.provider_token))

    liveness.fail_stopped_workers(context(store, registry_of(provider), clock=lambda: NOW))

    assert store.get(running.lease_id).status == LeaseStatus.ACTIVE
    assert str(running.provider_token) in provider.workers


def test_sweep_check_leaves_a_stopped_worker_without_an_active_lease_to_the_reconciler(
    store: LeaseStore, leases: Leases
) -> None:
    provider = memory_provider()
    released = leases.released()
    provider.add_worker(released.lease_id, str(released.provider_token), NOW)
    provider.add_worker("not-a-lease-id", "w-foreign", NOW)
    provider.stop(str(released.provider_token))
    provider.stop("w-foreign")

    report = liveness.fail_stopped_workers(context(store, registry_of(provider), clock=lambda: NOW))

    assert report.ended == []
    assert store.get(released.lease_id).status == LeaseStatus.RELEASED
    assert set(provider.workers) == {str(released.provider_token), "w-foreign"}


def test_sweep_check_ignores_a_stopped_container_that_is_not_the_leases_own_worker(
    store: LeaseStore, leases: Leases
) -> None:
    # Same lease id label, another container (e.g. a stale one): the claim names the lease's token.
    provider = memory_provider()
    lease = _running(leases, provider)
    provider.add_worker(lease.lease_id, "w-stale", NOW)
    provider.stop("w-stale")

    liveness.fail_stopped_workers(context(store, registry_of(provider), clock=lambda: NOW))

    assert store.get(lease.lease_id).status == LeaseStatus.ACTIVE


def test_sweep_check_whose_removal_fails_leaves_a_failed_claim_for_the_sweep(store: LeaseStore, leases: Leases) -> None:
    provider = memory_provider()
    lease = _running(leases, provider)
    provider.stop(str(lease.provider_token), KILLED)
    provider.fail_releases = 1

    liveness.fail_stopped_workers(context(store, registry_of(provider), clock=lambda: NOW))

    claimed = store.get(lease.lease_id)
    assert (claimed.status, claimed.failure_reason) == (LeaseStatus.RELEASING, KILLED)
    later = NOW + timedelta(minutes=5)
    sweep(context(store, registry_of(provider), clock=lambda: later))
    assert (store.get(lease.lease_id).status, store.get(lease.lease_id).failure_reason) == (LeaseStatus.FAILED, KILLED)


def test_sweep_check_on_an_unlistable_provider_is_reported_and_skipped(store: LeaseStore, leases: Leases) -> None:
    class Unlistable(MemoryProvider):
        def stopped_workers(self, deadline: Deadline | None = None) -> list:  # type: ignore[type-arg]
            raise ProviderRequestFailed("timed out after 2.0 s waiting for an answer")

    report = liveness.fail_stopped_workers(context(store, registry_of(Unlistable()), clock=lambda: NOW))

    assert report.errors == ["local-docker: timed out after 2.0 s waiting for an answer"]


# --- the check on read ----------------------------------------------------------------------------


def _read_check(clock: _Clock, **options: object) -> liveness.ReadCheck:
    return liveness.ReadCheck(
        checked=frozenset({"local-docker"}),
        interval_seconds=5,
        monotonic=clock,
        **options,  # type: ignore[arg-type]
    )


def _read(store: LeaseStore, provider: MemoryProvider) -> Context:
    """A read's context: the request's time left, the provider the check asks."""
    return context(store, registry_of(provider), clock=lambda: NOW, deadline=Deadline.within(5))


def test_read_of_a_lease_whose_worker_stopped_ends_it_failed(store: LeaseStore, leases: Leases) -> None:
    provider = memory_provider()
    lease = _running(leases, provider)
    provider.stop(str(lease.provider_token), KILLED)

    read = leases_get(store, provider, _read_check(_Clock()), lease.lease_id)

    assert (read.status, read.failure_reason) == (LeaseStatus.FAILED, KILLED)
    assert provider.workers == {}


def test_read_of_a_running_lease_returns_it_unchanged(store: LeaseStore, leases: Leases) -> None:
    provider = memory_provider()
    lease = _running(leases, provider)

    assert leases_get(store, provider, _read_check(_Clock()), lease.lease_id) == store.get(lease.lease_id)


def test_read_checks_one_lease_at_most_once_per_interval(store: LeaseStore, leases: Leases) -> None:
    provider = memory_provider()
    lease = _running(leases, provider)
    clock = _Clock()
    check = _read_check(clock)

    leases_get(store, provider, check, lease.lease_id)
    provider.stop(str(lease.provider_token))
    clock.now += 4.9
    assert leases_get(store, provider, check, lease.lease_id).status == LeaseStatus.ACTIVE
    clock.now += 0.2
    assert leases_get(store, provider, check, lease.lease_id).status == LeaseStatus.FAILED


def test_read_does_not_check_providers_outside_the_cheap_ones(store: LeaseStore, leases: Leases) -> None:
    provider = memory_provider("runpod")
    lease = leases.active(provider="runpod")
    provider.add_worker(lease.lease_id, str(lease.provider_token))
    provider.stop(str(lease.provider_token))

    assert leases_get(store, provider, _read_check(_Clock()), lease.lease_id).status == LeaseStatus.ACTIVE


def test_read_does_not_check_leases_that_are_not_active(store: LeaseStore, leases: Leases) -> None:
    provider = memory_provider()
    released = leases.released()

    assert leases_get(store, provider, _read_check(_Clock()), released.lease_id).status == LeaseStatus.RELEASED


def test_read_whose_check_fails_answers_the_stored_lease_and_rests_the_provider(
    store: LeaseStore, leases: Leases
) -> None:
    calls: list[str] = []

    class Unreachable(MemoryProvider):
        def stopped_reason(self, lease_id: str, token: str, deadline: Deadline | None = None) -> str | None:
            calls.append(lease_id)
            raise ProviderRequestFailed("connection refused by 127.0.0.1:2376")

    provider = Unreachable()
    first, second = _running(leases, provider), _running(leases, provider)
    clock = _Clock()
    check = _read_check(clock, quiet_seconds=30)

    assert leases_get(store, provider, check, first.lease_id).status == LeaseStatus.ACTIVE
    assert leases_get(store, provider, check, second.lease_id).status == LeaseStatus.ACTIVE  # resting: not asked
    clock.now += 31
    leases_get(store, provider, check, second.lease_id)
    assert calls == [first.lease_id, second.lease_id]


def test_read_check_reports_the_lease_it_ended(store: LeaseStore, leases: Leases) -> None:
    provider = memory_provider()
    lease = _running(leases, provider)
    provider.stop(str(lease.provider_token))

    read = get(_read(store, provider), lease.lease_id, _read_check(_Clock()))

    assert (read.ended_now, read.lease.lease_id) == (True, lease.lease_id)


def test_read_of_a_running_lease_reports_nothing_ended(store: LeaseStore, leases: Leases) -> None:
    provider = memory_provider()
    lease = _running(leases, provider)

    assert not get(_read(store, provider), lease.lease_id, _read_check(_Clock())).ended_now


def leases_get(store: LeaseStore, provider: MemoryProvider, check: liveness.ReadCheck, lease_id: str) -> Lease:
    return get(_read(store, provider), lease_id, check).lease


# --- the reconciler ---------------------------------------------------------------------------------


def test_reconcile_fails_a_lease_whose_listed_worker_stopped_without_waiting_to_settle(
    store: LeaseStore, leases: Leases
) -> None:
    provider = memory_provider()
    lease = _running(leases, provider)
    provider.stop(str(lease.provider_token), KILLED)

    report = reconcile.reconcile(
        context(store, registry_of(provider), clock=lambda: NOW, orphan_grace_seconds=600, pending_deadline_seconds=120)
    )

    assert report.stopped_failed == [lease.lease_id]
    assert (store.get(lease.lease_id).status, store.get(lease.lease_id).failure_reason) == (LeaseStatus.FAILED, KILLED)
    assert provider.workers == {}


def test_reconcile_records_why_a_ghost_failed(store: LeaseStore, leases: Leases) -> None:
    lease = leases.active(ttl_seconds=86_400)

    reconcile.reconcile(
        context(
            store,
            registry_of(memory_provider()),
            clock=lambda: NOW + timedelta(hours=2),
            orphan_grace_seconds=600,
            pending_deadline_seconds=120,
        )
    )

    assert store.get(lease.lease_id).failure_reason == "the worker vanished: local-docker no longer lists it"


def test_reconcile_records_why_a_stuck_pending_lease_failed(store: LeaseStore, leases: Leases) -> None:
    lease = leases.pending(ttl_seconds=86_400)

    reconcile.reconcile(
        context(
            store,
            registry_of(memory_provider()),
            clock=lambda: NOW + timedelta(hours=2),
            orphan_grace_seconds=600,
            pending_deadline_seconds=120,
        )
    )

    assert "did not finish within 120 s (PENDING_DEADLINE_SECONDS)" in str(store.get(lease.lease_id).failure_reason)


def test_a_lease_that_never_failed_has_no_failure_reason(store: LeaseStore, leases: Leases) -> None:
    assert leases.released().failure_reason is None


# --- acquire under a deadline -----------------------------------------------------------------------


def test_acquire_hands_its_deadline_to_the_provider(store: LeaseStore) -> None:
    provider = memory_provider()
    deadline = Deadline.within(20)

    acquire(context(store, registry_of(provider), deadline=deadline), REQUEST)

    assert provider.deadlines == [deadline]


def test_acquire_that_no_provider_served_records_each_providers_reason(store: LeaseStore) -> None:
    provider = memory_provider(full=True)

    with pytest.raises(NoCapacity) as raised:
        acquire(context(store, registry_of(provider)), REQUEST)

    lease_id = str((raised.value.details or {})["lease_id"])
    assert (raised.value.details or {})["providers"] == {"local-docker": "local-docker is full"}
    assert store.get(lease_id).failure_reason == "local-docker: local-docker is full"


def test_acquire_refused_by_a_provider_names_it_in_details(store: LeaseStore) -> None:
    with pytest.raises(ProviderFailed) as raised:
        acquire(context(store, registry_of(memory_provider(refuse=True))), REQUEST)

    assert (raised.value.details or {})["providers"] == {"local-docker": "local-docker refused the worker"}


def test_acquire_whose_worker_may_exist_leaves_the_lease_pending_for_the_reconciler(store: LeaseStore) -> None:
    class LostCreate(MemoryProvider):
        def provision(self, lease: Lease, env: object, deadline: Deadline | None = None) -> object:  # type: ignore[override]
            raise WorkerOutcomeUnknown("timed out after 25.0 s waiting for an answer; left to the reconciler")

    with pytest.raises(NoCapacity) as raised:
        acquire(context(store, registry_of(LostCreate())), REQUEST)

    lease_id = str((raised.value.details or {})["lease_id"])
    assert store.get(lease_id).status == LeaseStatus.PENDING


def test_acquire_past_its_deadline_tries_no_further_provider(store: LeaseStore) -> None:
    first, second = memory_provider("local-docker", full=True), memory_provider("runpod")
    spent = Deadline.within(-1)

    with pytest.raises(NoCapacity) as raised:
        acquire(context(store, registry_of(first, second), deadline=spent), REQUEST)

    assert second.workers == {}
    assert (raised.value.details or {})["providers"]["runpod"] == "not tried: the request's time budget ran out"  # type: ignore[index]
