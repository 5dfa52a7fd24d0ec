"""Counter repair never undoes a concurrent acquire or release.

The live index it counts holds from is eventually consistent (a GSI always is): a lease written a
moment ago may be missing from it, a lease just ended may still show. These tests give the repair
such a stale view of the index and check the counters it leaves. Caps use TransactWriteItems, which
dynalite lacks, so they run on moto only.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from scheduler.leases import reconcile
from scheduler.leases.reconcile import COUNTER_SETTLE_SECONDS, repair_counters
from scheduler.leases.release import release
from scheduler.limits import LeaseLimits
from scheduler.models import WorkerKind
from scheduler.request_models import LeaseRequest
from scheduler.store import LeaseStore

from .builders import NOW, acquire, context, memory_provider, registry_of
from .stored import drift_counter

pytestmark = pytest.mark.moto_only("caps use TransactWriteItems, which dynalite lacks")

CAP = LeaseLimits(provider_caps={"local-docker": 10})
COUNTER = "provider#local-docker"
SETTLED = NOW + timedelta(seconds=COUNTER_SETTLE_SECONDS)


def acquire_one(store: LeaseStore) -> Any:
    return acquire(
        context(store, registry_of(memory_provider()), limits=CAP),
        LeaseRequest(kind=WorkerKind.RENDERER, ttl_seconds=600),
    )


def counter(store: LeaseStore) -> int:
    return store.counter_values().get(COUNTER, 0)


def drift(store: LeaseStore, value: int) -> None:
    """Set the counter behind the store's back, as a lost write would leave it."""
    drift_counter(store, COUNTER, value)


def with_index_view(store: LeaseStore, view: Callable[[], list[tuple[str, ...]]]) -> LeaseStore:
    """The store, its live index answering `view` (what a lagging GSI returns)."""
    store.live_holds = view  # type: ignore[method-assign]
    return store


def test_a_drift_is_repaired_once_a_second_pass_confirms_it(limited_store: LeaseStore) -> None:
    acquire_one(limited_store)
    drift(limited_store, 7)

    first = repair_counters(context(limited_store, clock=lambda: NOW))
    second = repair_counters(context(limited_store, clock=lambda: SETTLED))

    assert (first, second, counter(limited_store)) == ({}, {COUNTER: (7, 1)}, 1)


def test_a_second_pass_before_the_index_can_have_settled_does_not_repair(limited_store: LeaseStore) -> None:
    acquire_one(limited_store)
    drift(limited_store, 7)
    repair_counters(context(limited_store, clock=lambda: NOW))

    assert repair_counters(context(limited_store, clock=lambda: NOW + timedelta(seconds=1))) == {}
    assert counter(limited_store) == 7


def test_a_lease_the_index_has_not_caught_up_with_keeps_its_slot(limited_store: LeaseStore) -> None:
    real_view = limited_store.live_holds
    before = real_view()
    acquire_one(limited_store)  # written a moment ago: not in the (lagging) index yet

    repair_counters(context(with_index_view(limited_store, lambda: before), clock=lambda: NOW))
    repair_counters(
        context(with_index_view(limited_store, real_view), clock=lambda: SETTLED)
    )  # the index has caught up

    assert counter(limited_store) == 1


def test_a_release_the_index_still_shows_does_not_cost_a_slot(limited_store: LeaseStore) -> None:
    registry = registry_of(memory_provider())
    lease = acquire(
        context(limited_store, registry, limits=CAP), LeaseRequest(kind=WorkerKind.RENDERER, ttl_seconds=600)
    )
    stale = limited_store.live_holds()  # still shows the lease after its release
    release(context(limited_store, registry), lease.lease_id, None)

    repair_counters(context(with_index_view(limited_store, lambda: stale), clock=lambda: NOW))

    assert counter(limited_store) == 0


def test_an_acquire_between_two_passes_postpones_the_repair(limited_store: LeaseStore) -> None:
    acquire_one(limited_store)
    drift(limited_store, 7)
    repair_counters(context(limited_store, clock=lambda: NOW))
    acquire_one(limited_store)  # 8 stored, 2 held: the counter moved, so the first pass's suspicion is void

    assert repair_counters(context(limited_store, clock=lambda: SETTLED)) == {}
    assert repair_counters(
        context(limited_store, clock=lambda: SETTLED + timedelta(seconds=COUNTER_SETTLE_SECONDS))
    ) == {COUNTER: (8, 2)}


@pytest.mark.dynamodb_only("inspects the Scan request")
def test_counters_are_read_strongly_consistently(limited_store: LeaseStore) -> None:
    seen: list[dict[str, Any]] = []
    scan = limited_store.client.scan

    def recording_scan(**request: Any) -> Any:
        seen.append(request)
        return scan(**request)

    limited_store.client.scan = recording_scan  # type: ignore[method-assign]
    try:
        limited_store.counter_states()
    finally:
        del limited_store.client.scan
    assert [request.get("ConsistentRead") for request in seen] == [True]


def test_the_reconciler_repairs_over_two_of_its_passes(limited_store: LeaseStore) -> None:
    registry = registry_of(memory_provider())
    acquire_one(limited_store)
    drift(limited_store, 7)

    def run(at: datetime) -> dict[str, tuple[int, int]]:
        return reconcile.reconcile(
            context(
                limited_store,
                registry,
                limits=CAP,
                clock=lambda: at,
                orphan_grace_seconds=600,
                pending_deadline_seconds=120,
            )
        ).counters_repaired

    assert (run(NOW), run(SETTLED)) == ({}, {COUNTER: (7, 1)})
