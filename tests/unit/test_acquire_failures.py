"""A write that fails after the worker was provisioned releases the worker at once (not at the next reconcile)."""

from __future__ import annotations

import pytest

from scheduler.errors import ProviderFailed
from scheduler.lifecycle import LeaseStatus
from scheduler.limits import LeaseLimits
from scheduler.models import Lease, WorkerKind
from scheduler.providers.memory import MemoryProvider
from scheduler.request_models import LeaseRequest
from scheduler.store import LeaseStore

from .builders import acquire, context, memory_provider, registry_of

REQUEST = LeaseRequest(kind=WorkerKind.RENDERER, ttl_seconds=600)


def priced(price: float) -> MemoryProvider:
    """Reports `price` as the worker's cost per hour (a provider's JSON may carry NaN or Infinity)."""
    return memory_provider(cost_per_hour=price)


def only_lease(store: LeaseStore, provider: MemoryProvider) -> Lease:
    (lease_id,) = set(provider.release_calls)
    return store.get(lease_id)


@pytest.mark.parametrize("price", [float("nan"), float("inf"), 1e300])
def test_a_price_dynamodb_cannot_store_fails_the_acquire_and_removes_the_worker_at_once(
    store: LeaseStore, price: float
) -> None:
    provider = priced(price)
    with pytest.raises(ProviderFailed, match="cannot record"):
        acquire(context(store, registry_of(provider)), REQUEST)
    assert provider.workers == {}
    assert only_lease(store, provider).status == LeaseStatus.FAILED


def test_any_error_of_the_activating_write_removes_the_worker_at_once(store: LeaseStore) -> None:
    provider = memory_provider()

    def broken_activate(*_: object, **__: object) -> Lease:
        raise RuntimeError("the write failed in a way nobody foresaw")

    store.activate = broken_activate  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        acquire(context(store, registry_of(provider)), REQUEST)
    assert provider.workers == {}
    assert only_lease(store, provider).status == LeaseStatus.FAILED


@pytest.mark.moto_only("caps use TransactWriteItems, which dynalite lacks")
def test_a_failed_activating_write_gives_the_slot_back(limited_store: LeaseStore) -> None:
    provider = priced(float("nan"))
    with pytest.raises(ProviderFailed):
        acquire(
            context(limited_store, registry_of(provider), limits=LeaseLimits(provider_caps={"local-docker": 1})),
            REQUEST,
        )
    assert (provider.workers, limited_store.counter_values()) == ({}, {"provider#local-docker": 0})
