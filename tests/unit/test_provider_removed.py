"""A provider taken out of PROVIDERS: its workers are never reported gone on another provider's word.

A lease whose worker runs on runpod, then the service restarted with only local-docker: nothing configured can
remove that worker or confirm it gone, so a release leaves the lease `releasing` (the sweep retries it and says
so) until runpod is configured again, and its logs are a 502, not a 410.
"""

from __future__ import annotations

import pytest

from scheduler.errors import ProviderFailed
from scheduler.leases.logs import worker_logs
from scheduler.leases.release import release
from scheduler.leases.sweep import sweep
from scheduler.lifecycle import LeaseStatus
from scheduler.models import Lease, WorkerKind
from scheduler.providers.memory import MemoryProvider
from scheduler.request_models import LeaseRequest
from scheduler.store import LeaseStore
from scheduler.worker_logs import LogQuery

from .builders import NOW, acquire, memory_provider, registry_of

REQUEST = LeaseRequest(kind=WorkerKind.RENDERER, ttl_seconds=600, owner_id="o")


def lease_on_runpod(store: LeaseStore) -> tuple[Lease, MemoryProvider]:
    runpod = memory_provider("runpod")
    return acquire(REQUEST, store, registry_of(runpod), clock=lambda: NOW), runpod


def test_releasing_a_lease_on_a_provider_no_longer_configured_leaves_it_releasing(store: LeaseStore) -> None:
    lease, runpod = lease_on_runpod(store)
    other = memory_provider("local-docker")

    with pytest.raises(ProviderFailed, match="PROVIDERS no longer names"):
        release(lease.lease_id, "o", store, registry_of(other), clock=lambda: NOW)

    assert store.get(lease.lease_id).status == LeaseStatus.RELEASING
    assert set(runpod.workers) == {lease.provider_token}
    assert other.release_calls == []  # never asked: its 404 would say nothing of runpod's worker


def test_the_sweep_retries_it_and_names_the_provider_it_waits_on(store: LeaseStore) -> None:
    lease, runpod = lease_on_runpod(store)
    later = lease.expires_at

    report = sweep(store, registry_of(memory_provider("local-docker")), clock=lambda: later)

    assert report.failed_releases == [lease.lease_id]
    assert report.unconfigured == ["runpod"]
    assert store.get(lease.lease_id).status == LeaseStatus.RELEASING
    assert set(runpod.workers) == {lease.provider_token}


def test_once_the_provider_is_configured_again_the_sweep_releases_it(store: LeaseStore) -> None:
    lease, runpod = lease_on_runpod(store)
    with pytest.raises(ProviderFailed):
        release(lease.lease_id, "o", store, registry_of(memory_provider("local-docker")), clock=lambda: NOW)
    claim_due = store.get(lease.lease_id).expires_at

    report = sweep(store, registry_of(memory_provider("local-docker"), runpod), clock=lambda: claim_due)

    assert [ended.lease_id for ended in report.ended] == [lease.lease_id]
    assert store.get(lease.lease_id).status == LeaseStatus.RELEASED
    assert set(runpod.workers) == set()


def test_logs_of_a_live_lease_on_a_provider_no_longer_configured_are_a_provider_error(store: LeaseStore) -> None:
    lease, _ = lease_on_runpod(store)

    with pytest.raises(ProviderFailed, match="PROVIDERS no longer names"):
        worker_logs(lease.lease_id, "o", LogQuery(), store, registry_of(memory_provider("local-docker")))
