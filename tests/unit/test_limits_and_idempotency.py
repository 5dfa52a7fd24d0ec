"""Provider caps, owner quotas and idempotent acquire: the books stay exact under failure and concurrency.

Caps and quotas are kept with TransactWriteItems, which dynalite lacks: those tests run on moto only.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta

import pytest

from devstack.dynamodb import DynamoDBClient
from scheduler import expiry, leases
from scheduler.errors import LeaseConflict, NoCapacity, ProviderFailed, QuotaExceeded
from scheduler.idempotency import IdempotentAcquire
from scheduler.limits import LeaseLimits
from scheduler.models import LeaseRequest, LeaseStatus, WorkerKind
from scheduler.store import LeaseStore
from tests.support.tables import make_table

from .builders import NOW
from .fake_provider import CountingProvider, registry_of

REQUEST = LeaseRequest(kind=WorkerKind.RENDERER, ttl_seconds=600)
NEEDS_TRANSACTIONS = pytest.mark.moto_only("caps and quotas use TransactWriteItems, which dynalite lacks")


@pytest.fixture
def idempotency_table(dynamodb: DynamoDBClient, backend: str) -> Iterator[str]:
    name = make_table(dynamodb, backend, "idempotency", "IdempotencyTable")
    yield name
    dynamodb.delete_table(TableName=name)


def caps(**per_provider: int) -> LeaseLimits:
    return LeaseLimits(provider_caps={name.replace("_", "-"): cap for name, cap in per_provider.items()})


def acquire(store: LeaseStore, registry: object, limits: LeaseLimits, **request: object) -> object:
    return leases.acquire(REQUEST.model_copy(update=request), store, registry, limits)  # type: ignore[arg-type]


def counter(store: LeaseStore, name: str) -> int:
    return store.counter_values().get(name, 0)


# --- provider caps ------------------------------------------------------------------------------


@NEEDS_TRANSACTIONS
def test_acquire_beyond_the_provider_cap_gets_no_capacity_and_no_worker(limited_store: LeaseStore) -> None:
    provider = CountingProvider()
    registry = registry_of(provider)
    for _ in range(2):
        acquire(limited_store, registry, caps(local_docker=2))

    with pytest.raises(NoCapacity, match="cap"):
        acquire(limited_store, registry, caps(local_docker=2))

    assert len(provider.workers) == 2


@NEEDS_TRANSACTIONS
def test_release_gives_the_slot_back(limited_store: LeaseStore) -> None:
    registry = registry_of(CountingProvider())
    first = acquire(limited_store, registry, caps(local_docker=1))
    leases.release(first.lease_id, None, limited_store, registry)  # type: ignore[attr-defined]

    acquire(limited_store, registry, caps(local_docker=1))

    assert counter(limited_store, "provider#local-docker") == 1


@NEEDS_TRANSACTIONS
def test_expiry_gives_the_slot_back(limited_store: LeaseStore) -> None:
    registry = registry_of(CountingProvider())
    acquire(limited_store, registry, caps(local_docker=1), ttl_seconds=1)

    expiry.sweep(limited_store, registry, clock=lambda: NOW.now(NOW.tzinfo) + timedelta(seconds=5))

    assert counter(limited_store, "provider#local-docker") == 0


@NEEDS_TRANSACTIONS
def test_failed_provision_gives_the_slot_back(limited_store: LeaseStore) -> None:
    registry = registry_of(CountingProvider(fail=True))
    with pytest.raises(ProviderFailed):
        acquire(limited_store, registry, caps(local_docker=1))
    assert counter(limited_store, "provider#local-docker") == 0


@NEEDS_TRANSACTIONS
def test_full_cap_on_the_first_provider_places_the_lease_on_the_next(limited_store: LeaseStore) -> None:
    registry = registry_of(CountingProvider("local-docker"), CountingProvider("runpod"))
    acquire(limited_store, registry, caps(local_docker=1))

    lease = acquire(limited_store, registry, caps(local_docker=1))

    assert lease.provider == "runpod"  # type: ignore[attr-defined]


@NEEDS_TRANSACTIONS
def test_failover_after_no_capacity_moves_the_slot(limited_store: LeaseStore) -> None:
    registry = registry_of(CountingProvider("local-docker", full=True), CountingProvider("runpod"))

    lease = acquire(limited_store, registry, caps(local_docker=5, runpod=5))

    assert lease.provider == "runpod"  # type: ignore[attr-defined]
    assert counter(limited_store, "provider#local-docker") == 0
    assert counter(limited_store, "provider#runpod") == 1


@NEEDS_TRANSACTIONS
def test_concurrent_acquires_never_exceed_the_cap(limited_store: LeaseStore) -> None:
    provider = CountingProvider()
    registry = registry_of(provider)
    outcomes: list[str] = []

    def one() -> None:
        try:
            acquire(limited_store, registry, caps(local_docker=5))
            outcomes.append("lease")
        except NoCapacity:
            outcomes.append("no_capacity")

    threads = [threading.Thread(target=one) for _ in range(30)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(outcomes).count("lease") == 5
    assert len(provider.workers) == 5
    assert counter(limited_store, "provider#local-docker") == 5


# --- owner quotas -------------------------------------------------------------------------------


@NEEDS_TRANSACTIONS
def test_acquire_beyond_the_owner_quota_is_refused_naming_the_limit(limited_store: LeaseStore) -> None:
    registry = registry_of(CountingProvider())
    quota = LeaseLimits(per_owner=2)
    for _ in range(2):
        acquire(limited_store, registry, quota, owner_id="alice")

    with pytest.raises(QuotaExceeded, match="MAX_LEASES_PER_OWNER=2"):
        acquire(limited_store, registry, quota, owner_id="alice")


@NEEDS_TRANSACTIONS
def test_owner_quota_is_per_owner(limited_store: LeaseStore) -> None:
    registry = registry_of(CountingProvider())
    quota = LeaseLimits(per_owner=1)
    acquire(limited_store, registry, quota, owner_id="alice")
    acquire(limited_store, registry, quota, owner_id="bob")
    assert counter(limited_store, "owner#alice") == counter(limited_store, "owner#bob") == 1


# --- counter repair: see test_counter_repair.py ----------------------------------------------


# --- idempotent acquire -------------------------------------------------------------------------


def idempotent(store: LeaseStore, registry: object, table: str, dynamodb: DynamoDBClient) -> IdempotentAcquire:
    return IdempotentAcquire(
        lambda request, lease_id, deadline: leases.acquire(  # type: ignore[arg-type]
            request, store, registry, lease_id=lease_id, deadline=deadline
        ),
        table,
        dynamodb,
        expires_after_seconds=3600,
    )


def test_repeat_with_same_key_and_body_returns_the_same_lease_and_one_worker(
    store: LeaseStore, dynamodb: DynamoDBClient, idempotency_table: str
) -> None:
    provider = CountingProvider()
    acquire_once = idempotent(store, registry_of(provider), idempotency_table, dynamodb)

    first = acquire_once("key-1", REQUEST, leases.new_lease_id())
    second = acquire_once("key-1", REQUEST, leases.new_lease_id())

    assert first == second
    assert len(provider.workers) == 1


def test_same_key_with_a_different_body_is_a_conflict(
    store: LeaseStore, dynamodb: DynamoDBClient, idempotency_table: str
) -> None:
    acquire_once = idempotent(store, registry_of(CountingProvider()), idempotency_table, dynamodb)
    acquire_once("key-2", REQUEST, leases.new_lease_id())
    with pytest.raises(LeaseConflict, match="different request body"):
        acquire_once("key-2", REQUEST.model_copy(update={"ttl_seconds": 60}), leases.new_lease_id())


def test_ten_concurrent_requests_with_one_key_make_one_worker(
    store: LeaseStore, dynamodb: DynamoDBClient, idempotency_table: str
) -> None:
    provider = CountingProvider()
    acquire_once = idempotent(store, registry_of(provider), idempotency_table, dynamodb)
    answers: list[str] = []

    def one() -> None:
        answers.append(acquire_once("key-3", REQUEST, leases.new_lease_id())["lease"]["lease_id"])

    threads = [threading.Thread(target=one) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(provider.workers) == 1
    assert len(answers) == 10 and len(set(answers)) == 1


def test_a_failed_acquire_is_not_remembered(
    store: LeaseStore, dynamodb: DynamoDBClient, idempotency_table: str
) -> None:
    provider = CountingProvider(fail=True)
    acquire_once = idempotent(store, registry_of(provider), idempotency_table, dynamodb)
    with pytest.raises(ProviderFailed):
        acquire_once("key-4", REQUEST, leases.new_lease_id())
    provider.fail = False

    answer = acquire_once("key-4", REQUEST, leases.new_lease_id())

    assert answer["lease"]["status"] == LeaseStatus.ACTIVE
