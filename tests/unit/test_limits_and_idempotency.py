"""Provider caps, owner quotas and idempotent acquire: the books stay exact under failure and concurrency.

Caps and quotas are kept with TransactWriteItems, which dynalite lacks: those tests run on moto only.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from devstack.dynamodb import DynamoDBClient
from scheduler.callers.model import SHARED_SECRET
from scheduler.clock import Clock, utc_now
from scheduler.errors import LeaseConflict, NoCapacity, ProviderFailed, QuotaExceeded
from scheduler.idempotency import IdempotentAcquire
from scheduler.leases.acquire import acquire as acquire_lease
from scheduler.leases.acquire import new_lease_id
from scheduler.leases.outcomes import Acquired, AcquireOutcome, NotAcquired, Replayed, lease_or_raise
from scheduler.leases.release import release
from scheduler.leases.sweep import sweep
from scheduler.lifecycle import LeaseStatus
from scheduler.limits import LeaseLimits
from scheduler.models import Lease, WorkerKind
from scheduler.providers.configured import ConfiguredProviders
from scheduler.request_models import LeaseRequest
from scheduler.store import LeaseStore
from tests.support.tables import make_table

from .builders import NOW, context, memory_provider, registry_of

REQUEST = LeaseRequest(kind=WorkerKind.RENDERER, ttl_seconds=600)
IDEMPOTENCY_RECORDS = pytest.mark.dynamodb_only("idempotency records are powertools' DynamoDB table")
NEEDS_TRANSACTIONS = pytest.mark.moto_only("caps and quotas use TransactWriteItems, which dynalite lacks")


@pytest.fixture
def idempotency_table(dynamodb: DynamoDBClient, backend: str) -> Iterator[str]:
    name = make_table(dynamodb, backend, "idempotency", "IdempotencyTable")
    yield name
    dynamodb.delete_table(TableName=name)


def caps(**per_provider: int) -> LeaseLimits:
    return LeaseLimits(provider_caps={name.replace("_", "-"): cap for name, cap in per_provider.items()})


def acquire(store: LeaseStore, registry: ConfiguredProviders, limits: LeaseLimits, **request: object) -> Lease:
    return lease_or_raise(acquire_lease(context(store, registry, limits=limits), REQUEST._replace(**request)))


def counter(store: LeaseStore, name: str) -> int:
    return store.counter_values().get(name, 0)


# --- provider caps ------------------------------------------------------------------------------


@NEEDS_TRANSACTIONS
def test_acquire_beyond_the_provider_cap_gets_no_capacity_and_no_worker(limited_store: LeaseStore) -> None:
    provider = memory_provider()
    registry = registry_of(provider)
    for _ in range(2):
        acquire(limited_store, registry, caps(local_docker=2))

    with pytest.raises(NoCapacity, match="cap"):
        acquire(limited_store, registry, caps(local_docker=2))

    assert len(provider.workers) == 2


@NEEDS_TRANSACTIONS
def test_a_provider_capped_at_zero_takes_no_lease_even_on_fresh_counters(limited_store: LeaseStore) -> None:
    provider = memory_provider()

    with pytest.raises(NoCapacity, match="cap"):
        acquire(limited_store, registry_of(provider), caps(local_docker=0))

    assert provider.workers == {}


@NEEDS_TRANSACTIONS
def test_an_owner_quota_of_zero_refuses_the_first_lease(limited_store: LeaseStore) -> None:
    with pytest.raises(QuotaExceeded):
        acquire(limited_store, registry_of(memory_provider()), LeaseLimits(per_owner=0))


@NEEDS_TRANSACTIONS
def test_release_gives_the_slot_back(limited_store: LeaseStore) -> None:
    registry = registry_of(memory_provider())
    first = acquire(limited_store, registry, caps(local_docker=1))
    release(context(limited_store, registry), first.lease_id, None)

    acquire(limited_store, registry, caps(local_docker=1))

    assert counter(limited_store, "provider#local-docker") == 1


@NEEDS_TRANSACTIONS
def test_expiry_gives_the_slot_back(limited_store: LeaseStore) -> None:
    registry = registry_of(memory_provider())
    acquire(limited_store, registry, caps(local_docker=1), ttl_seconds=1)

    sweep(context(limited_store, registry, clock=lambda: NOW.now(NOW.tzinfo) + timedelta(seconds=5)))

    assert counter(limited_store, "provider#local-docker") == 0


@NEEDS_TRANSACTIONS
def test_failed_provision_gives_the_slot_back(limited_store: LeaseStore) -> None:
    registry = registry_of(memory_provider(refuse=True))
    with pytest.raises(ProviderFailed):
        acquire(limited_store, registry, caps(local_docker=1))
    assert counter(limited_store, "provider#local-docker") == 0


@NEEDS_TRANSACTIONS
def test_full_cap_on_the_first_provider_places_the_lease_on_the_next(limited_store: LeaseStore) -> None:
    registry = registry_of(memory_provider("local-docker"), memory_provider("runpod"))
    acquire(limited_store, registry, caps(local_docker=1))

    lease = acquire(limited_store, registry, caps(local_docker=1))

    assert lease.provider == "runpod"


@NEEDS_TRANSACTIONS
def test_failover_after_no_capacity_moves_the_slot(limited_store: LeaseStore) -> None:
    registry = registry_of(memory_provider("local-docker", full=True), memory_provider("runpod"))

    lease = acquire(limited_store, registry, caps(local_docker=5, runpod=5))

    assert lease.provider == "runpod"
    assert counter(limited_store, "provider#local-docker") == 0
    assert counter(limited_store, "provider#runpod") == 1


@NEEDS_TRANSACTIONS
def test_concurrent_acquires_never_exceed_the_cap(limited_store: LeaseStore) -> None:
    provider = memory_provider()
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
    registry = registry_of(memory_provider())
    quota = LeaseLimits(per_owner=2)
    for _ in range(2):
        acquire(limited_store, registry, quota, owner_id="alice")

    with pytest.raises(QuotaExceeded, match="MAX_LEASES_PER_OWNER=2"):
        acquire(limited_store, registry, quota, owner_id="alice")


@NEEDS_TRANSACTIONS
def test_owner_quota_is_per_owner(limited_store: LeaseStore) -> None:
    registry = registry_of(memory_provider())
    quota = LeaseLimits(per_owner=1)
    acquire(limited_store, registry, quota, owner_id="alice")
    acquire(limited_store, registry, quota, owner_id="bob")
    assert counter(limited_store, "owner#alice") == counter(limited_store, "owner#bob") == 1


# --- counter repair: see test_counter_repair.py ----------------------------------------------


# --- idempotent acquire -------------------------------------------------------------------------


class Keyed:
    """Acquires through IdempotentAcquire, as the acquire handler does: each call a fresh lease id."""

    def __init__(
        self,
        store: LeaseStore,
        registry: ConfiguredProviders,
        table: str,
        dynamodb: DynamoDBClient,
        clock: Clock = utc_now,
    ) -> None:
        self.store, self.registry = store, registry
        self.idempotency = IdempotentAcquire(table, dynamodb, expires_after_seconds=3600, read=store.get, clock=clock)

    def __call__(self, key: str, request: LeaseRequest = REQUEST) -> AcquireOutcome:
        lease_id = new_lease_id()

        def fresh() -> AcquireOutcome:
            return acquire_lease(context(self.store, self.registry), request, lease_id=lease_id)

        return self.idempotency(key, request, fresh, caller=SHARED_SECRET)


def answer(outcome: AcquireOutcome) -> dict[str, Any]:
    assert isinstance(outcome, Acquired | Replayed), outcome
    return outcome.body()


@IDEMPOTENCY_RECORDS
def test_repeat_with_same_key_and_body_returns_the_same_lease_and_one_worker(
    store: LeaseStore, dynamodb: DynamoDBClient, idempotency_table: str
) -> None:
    provider = memory_provider()
    keyed = Keyed(store, registry_of(provider), idempotency_table, dynamodb)

    first, second = keyed("key-1"), keyed("key-1")

    assert answer(first) == answer(second)
    assert (isinstance(first, Acquired), isinstance(second, Replayed)) == (True, True)
    assert len(provider.workers) == 1


@IDEMPOTENCY_RECORDS
def test_a_replay_names_the_lease_it_answers_with(
    store: LeaseStore, dynamodb: DynamoDBClient, idempotency_table: str
) -> None:
    keyed = Keyed(store, registry_of(memory_provider()), idempotency_table, dynamodb)
    first = keyed("key-5")
    assert isinstance(first, Acquired)

    replayed = keyed("key-5")

    assert isinstance(replayed, Replayed) and replayed.lease_id == first.lease.lease_id


@IDEMPOTENCY_RECORDS
def test_same_key_with_a_different_body_is_a_conflict(
    store: LeaseStore, dynamodb: DynamoDBClient, idempotency_table: str
) -> None:
    keyed = Keyed(store, registry_of(memory_provider()), idempotency_table, dynamodb)
    keyed("key-2")
    with pytest.raises(LeaseConflict, match="different request body"):
        keyed("key-2", REQUEST._replace(ttl_seconds=60))


@IDEMPOTENCY_RECORDS
def test_ten_concurrent_requests_with_one_key_make_one_worker(
    store: LeaseStore, dynamodb: DynamoDBClient, idempotency_table: str
) -> None:
    provider = memory_provider()
    keyed = Keyed(store, registry_of(provider), idempotency_table, dynamodb)
    answers: list[str] = []

    def one() -> None:
        answers.append(answer(keyed("key-3"))["lease"]["lease_id"])

    threads = [threading.Thread(target=one) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(provider.workers) == 1
    assert len(answers) == 10 and len(set(answers)) == 1


@IDEMPOTENCY_RECORDS
def test_a_failed_acquire_is_not_remembered(
    store: LeaseStore, dynamodb: DynamoDBClient, idempotency_table: str
) -> None:
    provider = memory_provider(refuse=True)
    keyed = Keyed(store, registry_of(provider), idempotency_table, dynamodb)
    refused = keyed("key-4")
    assert isinstance(refused, NotAcquired) and isinstance(refused.error, ProviderFailed)
    provider.refuse = False

    again = keyed("key-4")

    assert isinstance(again, Acquired) and again.lease.status == LeaseStatus.ACTIVE


@IDEMPOTENCY_RECORDS
def test_a_replay_after_a_release_is_a_conflict_saying_the_lease_ended(
    store: LeaseStore, dynamodb: DynamoDBClient, idempotency_table: str
) -> None:
    registry = registry_of(memory_provider())
    keyed = Keyed(store, registry, idempotency_table, dynamodb)
    first = keyed("key-released")
    assert isinstance(first, Acquired)
    released = release(context(store, registry), first.lease.lease_id, None)

    with pytest.raises(LeaseConflict) as refused:
        keyed("key-released")

    released_at = released.released_at.strftime("%Y-%m-%dT%H:%M:%SZ") if released.released_at else None
    assert f"has ended: released at {released_at}" in refused.value.message
    assert refused.value.details == {"lease_id": first.lease.lease_id, "status": "released", "released_at": released_at}


@IDEMPOTENCY_RECORDS
def test_a_replay_after_a_renew_answers_the_renewed_expiry(
    store: LeaseStore, dynamodb: DynamoDBClient, idempotency_table: str
) -> None:
    keyed = Keyed(store, registry_of(memory_provider()), idempotency_table, dynamodb)
    first = keyed("key-renewed")
    assert isinstance(first, Acquired)
    renewed = store.renew(first.lease.lease_id, None, 3600, utc_now())

    replayed = keyed("key-renewed")

    assert isinstance(replayed, Replayed)
    assert replayed.body()["lease"]["expires_at"] == renewed.wire()["expires_at"] != first.body()["lease"]["expires_at"]


@IDEMPOTENCY_RECORDS
def test_a_replay_while_the_lease_is_being_released_is_a_conflict(
    store: LeaseStore, dynamodb: DynamoDBClient, idempotency_table: str
) -> None:
    keyed = Keyed(store, registry_of(memory_provider()), idempotency_table, dynamodb)
    first = keyed("key-releasing")
    assert isinstance(first, Acquired)
    store.claim_release(first.lease.lease_id, None, utc_now())  # a DELETE whose worker could not be removed yet

    with pytest.raises(LeaseConflict, match="is being released") as refused:
        keyed("key-releasing")

    assert refused.value.details == {"lease_id": first.lease.lease_id, "status": "releasing"}


@IDEMPOTENCY_RECORDS
def test_a_replay_past_the_leases_expiry_is_a_conflict_saying_when_it_expired(
    store: LeaseStore, dynamodb: DynamoDBClient, idempotency_table: str
) -> None:
    registry = registry_of(memory_provider())
    first = Keyed(store, registry, idempotency_table, dynamodb)("key-expired")
    assert isinstance(first, Acquired)
    after_expiry = first.lease.expires_at + timedelta(seconds=1)  # the sweep has not ended it yet
    later = Keyed(store, registry, idempotency_table, dynamodb, clock=lambda: after_expiry)

    with pytest.raises(LeaseConflict, match=f"expired at {first.body()['lease']['expires_at']}"):
        later("key-expired")


@IDEMPOTENCY_RECORDS
def test_a_replay_of_a_lease_past_its_retention_is_a_conflict(
    store: LeaseStore, dynamodb: DynamoDBClient, idempotency_table: str
) -> None:
    keyed = Keyed(store, registry_of(memory_provider()), idempotency_table, dynamodb)
    first = keyed("key-forgotten")
    assert isinstance(first, Acquired)
    dynamodb.delete_item(TableName=store.table_name, Key={"lease_id": {"S": first.lease.lease_id}})  # what TTL does

    with pytest.raises(LeaseConflict, match="no longer kept") as refused:
        keyed("key-forgotten")

    assert refused.value.details == {"lease_id": first.lease.lease_id}
