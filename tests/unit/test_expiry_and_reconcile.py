"""The sweep, the TTL-deletion path and the reconciler: each worker released exactly once, nothing forgotten."""

from __future__ import annotations

import contextlib
import threading
from datetime import timedelta
from typing import Any

import pytest

from devstack.dynamodb import DynamoDBClient
from scheduler.errors import LeaseNotFound, ProviderFailed
from scheduler.leases import reconcile
from scheduler.leases.release import release
from scheduler.leases.sweep import sweep
from scheduler.leases.ttl_stream import release_ttl_deleted
from scheduler.lifecycle import LeaseStatus
from scheduler.providers.memory import MemoryProvider
from scheduler.store import LeaseStore
from scheduler.store.items import new_item

from .builders import NOW, Leases, context, memory_provider, registry_of
from .stored import ttl_delete

LATER = NOW + timedelta(hours=2)


def _active_with_worker(arranged: Leases, provider: MemoryProvider, **fields: object) -> str:
    lease = arranged.active(**fields)  # type: ignore[arg-type]
    provider.add_worker(lease.lease_id, str(lease.provider_token), NOW)
    return lease.lease_id


def test_sweep_releases_an_expired_lease_and_records_it_expired(store: LeaseStore, leases: Leases) -> None:
    provider = memory_provider()
    lease_id = _active_with_worker(leases, provider, ttl_seconds=60)

    report = sweep(context(store, registry_of(provider), clock=lambda: LATER))

    assert [lease.lease_id for lease in report.ended] == [lease_id]
    assert provider.workers == {}
    assert store.get(lease_id).status == LeaseStatus.EXPIRED


def test_sweep_leaves_a_lease_that_has_not_expired(store: LeaseStore, leases: Leases) -> None:
    provider = memory_provider()
    lease_id = _active_with_worker(leases, provider, ttl_seconds=86_400)

    sweep(context(store, registry_of(provider), clock=lambda: LATER))

    assert provider.release_calls == []
    assert store.get(lease_id).status == LeaseStatus.ACTIVE


def test_sweep_reports_lag_between_expiry_and_release(store: LeaseStore, leases: Leases) -> None:
    provider = memory_provider()
    _active_with_worker(leases, provider, ttl_seconds=3600)

    report = sweep(context(store, registry_of(provider), clock=lambda: NOW + timedelta(seconds=3630)))

    assert report.lag_seconds == [30.0]


def test_two_concurrent_sweeps_release_each_worker_once(store: LeaseStore, leases: Leases) -> None:
    provider = memory_provider()
    ids = [_active_with_worker(leases, provider, ttl_seconds=60) for _ in range(10)]
    registry = registry_of(provider)

    threads = [threading.Thread(target=sweep, args=(context(store, registry, clock=lambda: LATER),)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(provider.release_calls) == sorted(ids)


def test_sweep_racing_a_release_releases_once(store: LeaseStore, leases: Leases) -> None:
    provider = memory_provider()
    registry = registry_of(provider)
    ids = [_active_with_worker(leases, provider, ttl_seconds=60, owner_id=None) for _ in range(10)]
    just_before_expiry = NOW + timedelta(seconds=59)  # the DELETE still sees a live lease
    just_after_expiry = NOW + timedelta(seconds=61)  # the sweep sees it expired; a DELETE claim is fresh

    def release_all() -> None:
        for lease_id in ids:
            with contextlib.suppress(LeaseNotFound):
                release(context(store, registry, clock=lambda: just_before_expiry), lease_id, None)

    racer = threading.Thread(target=release_all)
    racer.start()
    sweep(context(store, registry, clock=lambda: just_after_expiry))
    racer.join()

    assert sorted(provider.release_calls) == sorted(ids)


def test_failed_release_is_retried_by_a_later_sweep(store: LeaseStore, leases: Leases) -> None:
    provider = memory_provider()
    registry = registry_of(provider)
    lease_id = _active_with_worker(leases, provider, ttl_seconds=60)
    provider.fail_releases = 1

    first = sweep(context(store, registry, clock=lambda: LATER))
    assert first.failed_releases == [lease_id]
    assert store.get(lease_id).status == LeaseStatus.RELEASING

    sweep(context(store, registry, clock=lambda: LATER + timedelta(minutes=10)))

    assert store.get(lease_id).status == LeaseStatus.EXPIRED
    assert provider.workers == {}


def test_failed_caller_release_is_finished_by_the_sweep_as_released(store: LeaseStore, leases: Leases) -> None:
    provider = memory_provider()
    registry = registry_of(provider)
    lease_id = _active_with_worker(leases, provider, ttl_seconds=86_400, owner_id=None)
    provider.fail_releases = 1
    with pytest.raises(ProviderFailed, match="retried"):
        release(context(store, registry, clock=lambda: NOW), lease_id, None)

    sweep(context(store, registry, clock=lambda: NOW + timedelta(minutes=10)))

    assert store.get(lease_id).status == LeaseStatus.RELEASED
    assert provider.workers == {}


@pytest.mark.slow
@pytest.mark.dynamodb_only("counts the items DynamoDB's Query returned")
def test_sweep_cost_does_not_grow_with_table_size(dynamodb: DynamoDBClient, store: LeaseStore) -> None:
    """Items read by a sweep with 5 expired leases: the same among 100 and among 5,000 live ones."""
    from .builders import new_lease

    def fill(count: int, ttl_seconds: int) -> None:
        items = [new_item(new_lease(ttl_seconds=ttl_seconds), "0") for _ in range(count)]
        for start in range(0, len(items), 25):
            batch = [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
            dynamodb.batch_write_item(RequestItems={store.table_name: batch})

    queries: list[int] = []  # items each Query returned, from botocore's after-call event (not the store)

    def counted(parsed: dict[str, Any], **_: Any) -> None:
        queries.append(int(parsed.get("Count", 0)))

    def sweep_reads() -> tuple[int, int]:
        queries.clear()
        store.client.meta.events.register("after-call.dynamodb.Query", counted)
        try:
            list(store.due_leases(LATER))
        finally:
            store.client.meta.events.unregister("after-call.dynamodb.Query", counted)
        return sum(queries), len(queries)

    fill(5, ttl_seconds=60)
    fill(95, ttl_seconds=86_400)
    small = sweep_reads()
    fill(4_900, ttl_seconds=86_400)
    large = sweep_reads()

    assert small == large == (5, 1)


def test_ttl_deleted_live_lease_is_released_and_reads_back_expired(store: LeaseStore, leases: Leases) -> None:
    provider = memory_provider()
    lease_id = _active_with_worker(leases, provider, ttl_seconds=60)
    old_image = ttl_delete(store, lease_id)

    ended = release_ttl_deleted(context(store, registry_of(provider), clock=lambda: LATER), old_image)

    assert ended is not None and ended.status == LeaseStatus.EXPIRED
    assert provider.workers == {}
    assert store.get(lease_id).status == LeaseStatus.EXPIRED


def test_reconcile_removes_an_orphan_past_grace_only(store: LeaseStore) -> None:
    provider = memory_provider()
    provider.add_worker("no-such-lease-old", "w-old", NOW - timedelta(minutes=20))
    provider.add_worker("no-such-lease-new", "w-new", LATER - timedelta(minutes=1))

    report = reconcile.reconcile(
        context(
            store, registry_of(provider), clock=lambda: LATER, orphan_grace_seconds=600, pending_deadline_seconds=120
        )
    )

    assert report.orphans_removed == ["w-old"]
    assert set(provider.workers) == {"w-new"}


def test_reconcile_fails_a_ghost_lease(store: LeaseStore, leases: Leases) -> None:
    provider = memory_provider()
    lease = leases.active(ttl_seconds=86_400)  # its worker was never in the provider's list

    report = reconcile.reconcile(
        context(
            store, registry_of(provider), clock=lambda: LATER, orphan_grace_seconds=600, pending_deadline_seconds=120
        )
    )

    assert report.ghosts_failed == [lease.lease_id]
    assert store.get(lease.lease_id).status == LeaseStatus.FAILED


def test_reconcile_cleans_up_a_stuck_pending_lease_and_its_worker(store: LeaseStore, leases: Leases) -> None:
    provider = memory_provider()
    lease = leases.pending(ttl_seconds=86_400)
    provider.add_worker(lease.lease_id, "w-half-made", NOW)

    report = reconcile.reconcile(
        context(
            store, registry_of(provider), clock=lambda: LATER, orphan_grace_seconds=600, pending_deadline_seconds=120
        )
    )

    assert report.stuck_pending_failed == [lease.lease_id]
    assert provider.workers == {}
    assert store.get(lease.lease_id).status == LeaseStatus.FAILED


def test_reconcile_keeps_a_healthy_lease_and_its_worker(store: LeaseStore, leases: Leases) -> None:
    provider = memory_provider()
    lease_id = _active_with_worker(leases, provider, ttl_seconds=86_400)

    report = reconcile.reconcile(
        context(store, registry_of(provider), clock=lambda: LATER, orphan_grace_seconds=0, pending_deadline_seconds=120)
    )

    assert (report.orphans_removed, report.ghosts_failed) == ([], [])
    assert store.get(lease_id).status == LeaseStatus.ACTIVE
