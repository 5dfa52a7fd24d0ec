"""The scheduled sweep and reconciler, the TTL stream handler: what each ends, and what each counts."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from scheduler.providers.base import Provider
from scheduler.providers.memory import MemoryProvider
from scheduler.store import LeaseStore
from tests.support.metrics import RecordedMetrics

from ..builders import NOW, Leases, memory_provider
from ..stored import ttl_delete
from .conftest import Function, event, runtime_of

LATER = NOW + timedelta(hours=2)


def later(store: LeaseStore, provider: Provider, metrics: RecordedMetrics, **settings: Any) -> Any:
    return runtime_of(store, provider, metrics=metrics, clock=lambda: LATER, **settings)


def test_the_sweep_ends_an_expired_lease_and_counts_it_expired_with_its_lag(
    function: Callable[[str], Function], store: LeaseStore, leases: Leases, metrics: RecordedMetrics
) -> None:
    provider = memory_provider()
    lease = leases.active(ttl_seconds=600)
    provider.add_worker(lease.lease_id, str(lease.provider_token))

    report = function("sweep_expired", later(store, provider, metrics))(event("sweep_expired"))

    assert report == {
        "ended": 1,
        "failed_releases": 0,
        "stopped_workers_failed": 0,
        "workers_ready": 0,
        "boot_failures": 0,
        "expiry_warnings": 0,
    }
    assert store.get(lease.lease_id).status == "expired"
    assert [name for name in metrics.names() if name != "ReleaseLatency"] == [
        "LeaseExpired",
        "LeaseCost",
        "SweepLag",
        "ReleaseRetryPending",
        "QueueDepth",
    ]
    (lag,) = metrics.of("SweepLag")
    assert lag["value"] == (LATER - lease.expires_at).total_seconds()


def test_the_sweep_ends_a_lease_whose_worker_stopped_and_counts_a_ghost(
    function: Callable[[str], Function], store: LeaseStore, leases: Leases, metrics: RecordedMetrics
) -> None:
    provider = memory_provider()
    lease = leases.active(ttl_seconds=86_400)
    provider.add_worker(lease.lease_id, str(lease.provider_token))
    provider.stop(str(lease.provider_token))

    report = function("sweep_expired", later(store, provider, metrics))(event("sweep_expired"))

    assert report["stopped_workers_failed"] == 1
    assert [name for name in metrics.names() if name not in ("ReleaseLatency", "LeaseCost")] == [
        "LeaseFailed",
        "GhostLease",
        "ReleaseRetryPending",
        "QueueDepth",
    ]


def test_a_sweep_whose_release_fails_reports_it_for_the_next_sweep(
    function: Callable[[str], Function], store: LeaseStore, leases: Leases, metrics: RecordedMetrics
) -> None:
    provider = memory_provider(fail_releases=1)
    lease = leases.active(ttl_seconds=600)

    report = function("sweep_expired", later(store, provider, metrics))(event("sweep_expired"))

    assert (report["ended"], report["failed_releases"]) == (0, 1)
    assert store.get(lease.lease_id).status == "releasing"
    assert metrics.of("ReleaseRetryPending") == [{"value": 1}]


def test_the_reconciler_removes_an_orphan_and_counts_it(
    function: Callable[[str], Function], store: LeaseStore, metrics: RecordedMetrics
) -> None:
    provider = memory_provider()
    provider.add_worker("f1f5a3a8-0000-4000-8000-000000000000", "w-orphan", NOW)

    report = function("reconcile_workers", later(store, provider, metrics))(event("reconcile_workers"))

    assert report["orphans_removed"] == 1 and provider.workers == {}
    assert metrics.of("OrphanRemoved") == [{"provider": "local-docker", "value": 1}]


def test_the_reconciler_fails_a_ghost_and_counts_it(
    function: Callable[[str], Function], store: LeaseStore, leases: Leases, metrics: RecordedMetrics
) -> None:
    lease = leases.active(ttl_seconds=86_400)  # its worker is listed nowhere

    report = function("reconcile_workers", later(store, memory_provider(), metrics))(event("reconcile_workers"))

    assert report["ghosts_failed"] == 1
    assert store.get(lease.lease_id).status == "failed"
    assert {"LeaseFailed", "GhostLease"} <= set(metrics.names())


def test_the_reconciler_tallies_each_pass_through_the_runtimes_metrics(
    function: Callable[[str], Function], store: LeaseStore, leases: Leases, metrics: RecordedMetrics
) -> None:
    leases.active(ttl_seconds=86_400)  # its worker is listed nowhere: a ghost
    leases.pending(ttl_seconds=86_400)  # its acquire never finished

    function("reconcile_workers", later(store, memory_provider(), metrics))(event("reconcile_workers"))

    assert [metrics.of(name) for name in ("GhostLeases", "StuckPendingFailed", "CounterRepaired")] == [
        [{"value": 1}],
        [{"value": 1}],
        [{"value": 0}],
    ]


def test_the_reconciler_counts_the_live_leases_of_each_provider(
    function: Callable[[str], Function], store: LeaseStore, leases: Leases, metrics: RecordedMetrics
) -> None:
    provider = memory_provider()
    for _ in range(2):
        lease = leases.active(ttl_seconds=86_400)
        provider.add_worker(lease.lease_id, str(lease.provider_token))

    function("reconcile_workers", later(store, provider, metrics))(event("reconcile_workers"))

    assert metrics.of("ActiveLeases") == [{"provider": "local-docker", "value": 2}]


def ttl_record(store: LeaseStore, lease_id: str, **changes: Any) -> dict[str, Any]:
    """The sample stream event, for a lease TTL deleted from `store`'s table."""
    sample = event("ttl_stream", lease_id)
    record = sample["Records"][0]
    record["dynamodb"]["OldImage"] = ttl_delete(store, lease_id)
    record.update(changes)
    return sample


def test_a_ttl_deletion_of_a_live_lease_releases_its_worker_and_counts_it_expired(
    function: Callable[[str], Function],
    store: LeaseStore,
    leases: Leases,
    provider: MemoryProvider,
    metrics: RecordedMetrics,
) -> None:
    lease = leases.active()
    provider.add_worker(lease.lease_id, str(lease.provider_token))

    answer = function("ttl_stream")(ttl_record(store, lease.lease_id))

    assert answer == {"batchItemFailures": []}
    assert (provider.workers, store.get(lease.lease_id).status) == ({}, "expired")
    assert "LeaseExpired" in metrics.names()


def test_a_deletion_by_anyone_but_the_ttl_process_releases_nothing(
    function: Callable[[str], Function], store: LeaseStore, leases: Leases, provider: MemoryProvider
) -> None:
    lease = leases.active()
    provider.add_worker(lease.lease_id, str(lease.provider_token))

    function("ttl_stream")(ttl_record(store, lease.lease_id, userIdentity=None))

    assert str(lease.provider_token) in provider.workers


class _RecordedHandoff:
    def __init__(self) -> None:
        self.hops: list[tuple[str, int]] = []

    def hand_on(self, function_name: str, hop: int) -> bool:
        self.hops.append((function_name, hop))
        return True


def test_a_sweep_with_more_due_than_its_batch_hands_the_rest_on_at_once(
    function: Callable[[str], Function], store: LeaseStore, leases: Leases, metrics: RecordedMetrics
) -> None:
    provider = memory_provider()
    for _ in range(3):
        lease = leases.active(ttl_seconds=600)
        provider.add_worker(lease.lease_id, str(lease.provider_token))
    runtime = later(store, provider, metrics, sweep_batch_size=2)
    handoff = _RecordedHandoff()
    runtime.handoff = handoff  # type: ignore[misc]

    report = function("sweep_expired", runtime)(event("sweep_expired"))

    assert (report["ended"], report["handed_on"]) == (2, 1)
    assert handoff.hops == [("Function", 1)]
    assert metrics.of("SweepHandoff") == [{"value": 1}]


def test_a_handed_on_sweep_carries_on_and_hands_on_with_the_next_hop(
    function: Callable[[str], Function], store: LeaseStore, leases: Leases, metrics: RecordedMetrics
) -> None:
    provider = memory_provider()
    for _ in range(2):
        lease = leases.active(ttl_seconds=600)
        provider.add_worker(lease.lease_id, str(lease.provider_token))
    runtime = later(store, provider, metrics, sweep_batch_size=1)
    handoff = _RecordedHandoff()
    runtime.handoff = handoff  # type: ignore[misc]

    report = function("sweep_expired", runtime)({"source": "openalice.scheduler.handoff", "handoff_hop": 4})

    assert report["ended"] == 1 and handoff.hops == [("Function", 5)]


def test_a_sweep_that_finishes_hands_nothing_on(
    function: Callable[[str], Function], store: LeaseStore, leases: Leases, metrics: RecordedMetrics
) -> None:
    provider = memory_provider()
    lease = leases.active(ttl_seconds=600)
    provider.add_worker(lease.lease_id, str(lease.provider_token))
    runtime = later(store, provider, metrics)
    handoff = _RecordedHandoff()
    runtime.handoff = handoff  # type: ignore[misc]

    report = function("sweep_expired", runtime)(event("sweep_expired"))

    assert "handed_on" not in report and handoff.hops == []


@pytest.mark.moto_only("the counters are read with the lease store's counters table beside it")
def test_the_sweep_reports_live_leases_per_docker_host_of_a_fleet(
    function: Callable[[str], Function], limited_store: LeaseStore, metrics: RecordedMetrics
) -> None:
    from scheduler.providers.local_docker.fleet import DockerFleet
    from scheduler.providers.local_docker.hosts import DockerHostSpec
    from scheduler.store.host_slots import StoreHostSlots

    fleet = DockerFleet(
        [
            (DockerHostSpec("a", "tcp://127.0.0.1:1", max_leases=2), memory_provider()),
            (DockerHostSpec("b", "tcp://127.0.0.1:2"), memory_provider()),
        ],
        StoreHostSlots(limited_store),
    )
    runtime = later(limited_store, fleet, metrics)

    function("sweep_expired", runtime)(event("sweep_expired"))

    assert metrics.of("HostLeases") == [{"host": "a", "value": 0}, {"host": "b", "value": 0}]


def test_the_sweep_warns_a_lease_about_to_expire_and_counts_it(
    function: Callable[[str], Function], store: LeaseStore, leases: Leases, metrics: RecordedMetrics
) -> None:
    until_later = int((LATER - NOW).total_seconds())
    warned = leases.active(ttl_seconds=until_later + 200)  # within the 300 s warning
    leases.active(ttl_seconds=until_later + 5000)

    report = function("sweep_expired", later(store, memory_provider(), metrics))(event("sweep_expired"))

    assert report["expiry_warnings"] == 1
    assert metrics.of("ExpiryWarning") == [{"provider": warned.provider, "kind": "renderer", "value": 1}]
