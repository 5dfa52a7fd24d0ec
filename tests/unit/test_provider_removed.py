"""A provider taken out of PROVIDERS: its workers are never reported gone on another provider's word.

A lease whose worker runs on runpod, then the service restarted with only local-docker: nothing configured can
remove that worker or confirm it gone, so a release leaves the lease `releasing` (the sweep retries it and says
so) until runpod is configured again, and its logs are a 502, not a 410. The same holds for a lease that never got
its token (the acquire on runpod died after making the pod): the reconciler leaves it pending, and the sweep keeps
it releasing from its expiry.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.errors import ProviderFailed
from scheduler.leases.logs import worker_logs
from scheduler.leases.reconcile import reconcile
from scheduler.leases.release import release
from scheduler.leases.sweep import sweep
from scheduler.lifecycle import LeaseStatus
from scheduler.models import Lease, WorkerKind
from scheduler.providers.memory import MemoryProvider
from scheduler.request_models import LeaseRequest
from scheduler.store import LeaseStore
from scheduler.worker_logs import LogQuery

from .builders import NOW, acquire, context, memory_provider, new_lease, registry_of

REQUEST = LeaseRequest(kind=WorkerKind.RENDERER, ttl_seconds=600, owner_id="o")


def lease_on_runpod(store: LeaseStore) -> tuple[Lease, MemoryProvider]:
    runpod = memory_provider("runpod")
    return acquire(context(store, registry_of(runpod), clock=lambda: NOW), REQUEST), runpod


def test_releasing_a_lease_on_a_provider_no_longer_configured_leaves_it_releasing(store: LeaseStore) -> None:
    lease, runpod = lease_on_runpod(store)
    other = memory_provider("local-docker")

    with pytest.raises(ProviderFailed, match="PROVIDERS no longer names"):
        release(context(store, registry_of(other), clock=lambda: NOW), lease.lease_id, "o")

    assert store.get(lease.lease_id).status == LeaseStatus.RELEASING
    assert set(runpod.workers) == {lease.provider_token}
    assert other.release_calls == []  # never asked: its 404 would say nothing of runpod's worker


def test_the_sweep_retries_it_and_names_the_provider_it_waits_on(store: LeaseStore) -> None:
    lease, runpod = lease_on_runpod(store)
    later = lease.expires_at

    report = sweep(context(store, registry_of(memory_provider("local-docker")), clock=lambda: later))

    assert report.failed_releases == [lease.lease_id]
    assert report.unconfigured == ["runpod"]
    assert store.get(lease.lease_id).status == LeaseStatus.RELEASING
    assert set(runpod.workers) == {lease.provider_token}


def test_once_the_provider_is_configured_again_the_sweep_releases_it(store: LeaseStore) -> None:
    lease, runpod = lease_on_runpod(store)
    with pytest.raises(ProviderFailed):
        release(context(store, registry_of(memory_provider("local-docker")), clock=lambda: NOW), lease.lease_id, "o")
    claim_due = store.get(lease.lease_id).expires_at

    report = sweep(context(store, registry_of(memory_provider("local-docker"), runpod), clock=lambda: claim_due))

    assert [ended.lease_id for ended in report.ended] == [lease.lease_id]
    assert store.get(lease.lease_id).status == LeaseStatus.RELEASED
    assert set(runpod.workers) == set()


def test_logs_of_a_live_lease_on_a_provider_no_longer_configured_are_a_provider_error(store: LeaseStore) -> None:
    lease, _ = lease_on_runpod(store)

    with pytest.raises(ProviderFailed, match="PROVIDERS no longer names"):
        worker_logs(context(store, registry_of(memory_provider("local-docker"))), lease.lease_id, "o", LogQuery())


def pending_on_runpod(store: LeaseStore) -> tuple[Lease, MemoryProvider]:
    """A lease whose acquire made its pod on runpod, then died before recording the pod (no token)."""
    lease = new_lease(provider="runpod", owner_id="o")
    store.create_pending(lease)
    runpod = memory_provider("runpod")
    runpod.add_worker(lease.lease_id)
    return lease, runpod


def test_the_reconciler_leaves_a_stuck_pending_lease_on_a_provider_no_longer_configured_pending(
    store: LeaseStore,
) -> None:
    lease, runpod = pending_on_runpod(store)
    only_docker = registry_of(memory_provider("local-docker"))

    report = reconcile(
        context(
            store,
            only_docker,
            clock=lambda: NOW + timedelta(hours=1),
            orphan_grace_seconds=0,
            pending_deadline_seconds=60,
        )
    )

    stored = store.get(lease.lease_id)
    assert (stored.status, stored.failure_reason) == (LeaseStatus.PENDING, None)  # never "its worker was removed"
    assert report.stuck_pending_failed == [] and any("PROVIDERS no longer" in error for error in report.errors)
    assert len(runpod.workers) == 1


def test_the_sweep_keeps_an_expired_lease_without_a_token_releasing_until_its_provider_is_back(
    store: LeaseStore,
) -> None:
    lease, runpod = pending_on_runpod(store)
    docker = memory_provider("local-docker")

    report = sweep(context(store, registry_of(docker), clock=lambda: lease.expires_at))

    assert report.unconfigured == ["runpod"] and report.failed_releases == [lease.lease_id]
    assert store.get(lease.lease_id).status == LeaseStatus.RELEASING
    assert docker.release_calls == [lease.lease_id]  # what local-docker holds of it is removed; its 404 is no proof
    assert len(runpod.workers) == 1

    claim_due = lease.expires_at + timedelta(hours=1)
    sweep(context(store, registry_of(docker, runpod), clock=lambda: claim_due))

    assert store.get(lease.lease_id).status == LeaseStatus.EXPIRED and runpod.workers == {}
