"""DynamoDB under contention: conflicts and throttling are retried, a batch survives one lease's failure,
unprocessed batch keys are read again, and a resent transaction is a no-op.

DynamoDB refuses instead of queueing: `TransactionConflictException` for a write to an item inside a
running transaction, `TransactionCanceledException` (reason `TransactionConflict`) for a transaction
touching an item another one holds, `ProvisionedThroughputExceededException`/`ThrottlingException`
on a hot partition, `UnprocessedKeys` from BatchGetItem. moto and dynalite never answer so on their
own; `FlakyClient` answers as DynamoDB documents, and the embedded DynamoDB's fault mode does it over
the wire for the 200-acquire run.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest
from botocore.config import Config

from devstack.dynamodb import DynamoDBClient, EmbeddedDynamoDB
from devstack.dynamodb_faults import Faults
from scheduler.errors import NoCapacity, StoreUnavailable
from scheduler.leases import reconcile
from scheduler.leases.release import release
from scheduler.leases.sweep import sweep
from scheduler.lifecycle import LeaseStatus
from scheduler.limits import LeaseLimits
from scheduler.models import WorkerKind
from scheduler.request_models import LeaseRequest
from scheduler.store import LeaseStore
from scheduler.store.counters import Limit
from scheduler.store.retries import Backoff
from tests.support.tables import make_table

from .builders import (
    NOW,
    RELEASE_CLAIM_SECONDS,
    RETENTION_SECONDS,
    Leases,
    acquire,
    context,
    memory_provider,
    new_lease,
    registry_of,
)
from .flaky_client import FlakyClient
from .stored import unexpected_error

NEEDS_TRANSACTIONS = pytest.mark.moto_only("caps use TransactWriteItems, which dynalite lacks")
DYNAMODB_FAULTS = pytest.mark.dynamodb_only("answers as DynamoDB does under contention, through the client")
LATER = NOW + timedelta(hours=2)
CAP = Limit.for_provider("local-docker", 10)


def flaky_store(store: LeaseStore, budget_seconds: float = 10.0) -> tuple[LeaseStore, FlakyClient]:
    client = FlakyClient(store.client)
    flaky = LeaseStore(
        store.table_name,
        client,
        retention_seconds=RETENTION_SECONDS,
        release_claim_seconds=RELEASE_CLAIM_SECONDS,
        counters_table=store.counters_table,
        retry=Backoff(budget_seconds=budget_seconds, base_seconds=0.001, cap_seconds=0.01),
    )
    return flaky, client


def conflict_reasons(count: int, at: int, code: str = "TransactionConflict") -> dict[str, Any]:
    reasons: list[dict[str, str]] = [{"Code": "None"} for _ in range(count)]
    reasons[at] = {"Code": code, "Message": "injected"}
    return {"CancellationReasons": reasons}


# --- single-item writes and reads ----------------------------------------------------------------


@DYNAMODB_FAULTS
def test_a_write_refused_for_an_ongoing_transaction_is_retried(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active()
    flaky, client = flaky_store(store)
    client.refuse("update_item", 3, "TransactionConflictException")

    claim = flaky.claim_release(lease.lease_id, lease.owner_id, NOW)

    assert (claim.outcome, client.calls["update_item"]) == (LeaseStatus.RELEASED, 4)


@DYNAMODB_FAULTS
@pytest.mark.parametrize("code", ["ProvisionedThroughputExceededException", "ThrottlingException"])
def test_throttling_beyond_botocores_own_retries_is_retried(store: LeaseStore, code: str) -> None:
    flaky, client = flaky_store(store)
    client.refuse("put_item", 5, code)
    lease = new_lease()

    flaky.create_pending(lease)

    assert store.get(lease.lease_id).status == LeaseStatus.PENDING


@DYNAMODB_FAULTS
def test_contention_that_outlasts_the_budget_is_store_unavailable(store: LeaseStore) -> None:
    flaky, client = flaky_store(store, budget_seconds=0.05)
    client.refuse("put_item", 10_000, "TransactionConflictException")
    with pytest.raises(StoreUnavailable):
        flaky.create_pending(new_lease())


@DYNAMODB_FAULTS
def test_unprocessed_keys_of_a_batch_read_are_read_again(
    dynamodb: DynamoDBClient, backend: str, store: LeaseStore
) -> None:
    table = make_table(dynamodb, backend, "counters", "LeaseCountersTable")
    for name, value in (("provider#a", 3), ("provider#b", 5)):
        dynamodb.put_item(TableName=table, Item={"counter": {"S": name}, "leases": {"N": str(value)}})
    store.counters_table = table
    flaky, client = flaky_store(store)

    def answer_half(request: dict[str, Any]) -> dict[str, Any]:
        keys = request["RequestItems"][table]["Keys"]
        first = dynamodb.batch_get_item(RequestItems={table: {"Keys": keys[:1], "ConsistentRead": True}})
        first["UnprocessedKeys"] = {table: {"Keys": keys[1:], "ConsistentRead": True}}
        return first

    client.answer("batch_get_item", answer_half)

    assert flaky.counters(["provider#a", "provider#b"]) == {"provider#a": 3, "provider#b": 5}
    assert client.calls["batch_get_item"] == 2


# --- transactions (caps and quotas) --------------------------------------------------------------


@NEEDS_TRANSACTIONS
@DYNAMODB_FAULTS
def test_a_transaction_cancelled_for_a_conflict_is_retried(limited_store: LeaseStore) -> None:
    flaky, client = flaky_store(limited_store)
    client.refuse("transact_write_items", 2, "TransactionCanceledException", **conflict_reasons(2, 1))
    lease = new_lease()

    flaky.create_pending(lease, [CAP])

    assert (limited_store.counter_values(), client.calls["transact_write_items"]) == ({CAP.counter: 1}, 3)


@NEEDS_TRANSACTIONS
@DYNAMODB_FAULTS
def test_a_transaction_cancelled_for_an_invalid_request_is_not_answered_as_capacity(
    limited_store: LeaseStore,
) -> None:
    flaky, client = flaky_store(limited_store)
    client.refuse(
        "transact_write_items", 1, "TransactionCanceledException", **conflict_reasons(2, 1, "ValidationError")
    )
    with pytest.raises(limited_store.client.exceptions.TransactionCanceledException):
        flaky.create_pending(new_lease(), [CAP])


@NEEDS_TRANSACTIONS
@DYNAMODB_FAULTS
def test_a_resent_transaction_with_the_same_token_is_a_no_op(limited_store: LeaseStore) -> None:
    """botocore resends a request whose answer timed out with the same ClientRequestToken; DynamoDB
    then answers success without applying it again (the embedded DynamoDB does the same)."""
    flaky, client = flaky_store(limited_store)

    def landed_then_resent(request: dict[str, Any]) -> dict[str, Any]:
        limited_store.client.transact_write_items(**request)  # landed; its answer was lost
        return dict(limited_store.client.transact_write_items(**request))  # botocore's resend

    client.answer("transact_write_items", landed_then_resent)
    lease = new_lease()
    flaky.create_pending(lease, [CAP])

    assert (limited_store.get(lease.lease_id).status, limited_store.counter_values()) == (
        LeaseStatus.PENDING,
        {CAP.counter: 1},
    )


@NEEDS_TRANSACTIONS
@DYNAMODB_FAULTS
def test_a_resent_release_transaction_gives_the_slot_back_once(limited_store: LeaseStore) -> None:
    registry = registry_of(memory_provider())
    limits = LeaseLimits(provider_caps={"local-docker": 10})
    lease = acquire(context(limited_store, registry, limits=limits), LeaseRequest(kind=WorkerKind.RENDERER))
    flaky, client = flaky_store(limited_store)

    def landed_then_resent(request: dict[str, Any]) -> dict[str, Any]:
        limited_store.client.transact_write_items(**request)
        return dict(limited_store.client.transact_write_items(**request))

    client.answer("transact_write_items", landed_then_resent)
    claim = flaky.claim_release(lease.lease_id, None, NOW)
    flaky.finish_release(claim, NOW)

    assert limited_store.counter_values() == {CAP.counter: 0}


@pytest.fixture(scope="module")
def contended_dynamodb() -> Iterator[EmbeddedDynamoDB]:
    """An embedded DynamoDB answering 10% of writes with conflicts and 5% of requests with throttling."""
    server = EmbeddedDynamoDB.start(faults=Faults(conflict=0.1, throttle=0.05, seed=20261130))
    yield server
    server.stop()


@pytest.mark.slow
@NEEDS_TRANSACTIONS
def test_two_hundred_concurrent_acquires_against_a_cap_of_ten_grant_exactly_ten(
    contended_dynamodb: EmbeddedDynamoDB,
) -> None:
    client = boto3.client(
        "dynamodb",
        endpoint_url=contended_dynamodb.endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
        config=Config(max_pool_connections=64, retries={"mode": "standard", "max_attempts": 3}),
    )
    store = LeaseStore(
        make_table(client, "moto", "leases", "LeasesTable"),
        client,
        counters_table=make_table(client, "moto", "counters", "LeaseCountersTable"),
    )
    provider = memory_provider()
    registry = registry_of(provider)
    limits = LeaseLimits(provider_caps={"local-docker": 10})
    outcomes: Counter[str] = Counter()
    granted: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(200)

    def one() -> None:
        start.wait()
        try:
            lease = acquire(context(store, registry, limits=limits), LeaseRequest(kind=WorkerKind.RENDERER))
            outcome = "granted"
            with lock:
                granted.append(lease.lease_id)
        except NoCapacity:
            outcome = "no_capacity"
        except StoreUnavailable:
            outcome = "too_contended"  # 503 with Retry-After: the caller tries again; nothing was taken
        except Exception as error:
            outcome = f"{type(error).__name__}: {error}"
        with lock:
            outcomes[outcome] += 1

    threads = [threading.Thread(target=one) for _ in range(200)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # Exactly the cap granted; every other acquire refused, as full or (its retry budget spent on the one counter
    # all 200 write, how many depends on this machine's speed) as too contended to try now.
    assert outcomes["granted"] == 10, outcomes
    assert set(outcomes) <= {"granted", "no_capacity", "too_contended"}, outcomes
    assert (len(provider.workers), store.counter_values()) == (10, {"provider#local-docker": 10})
    assert sorted(lease.lease_id for lease in store.live_leases()) == sorted(granted)
    assert sum(contended_dynamodb.front.injected.by_code.values()) > 0  # faults did happen
    for lease_id in granted:
        release(context(store, registry), lease_id, None)
    assert (provider.workers, store.counter_values()) == ({}, {"provider#local-docker": 0})


# --- one lease's failure never stops a batch -----------------------------------------------------


def test_one_leases_failure_does_not_stop_the_sweep(leases: Leases, store: LeaseStore) -> None:
    provider = memory_provider()
    broken, *others = [leases.active(ttl_seconds=60).lease_id for _ in range(3)]
    claim_due = store.claim_due

    def failing_for_one(lease_id: str, now: Any, **kwargs: Any) -> Any:
        if lease_id == broken:
            raise StoreUnavailable("injected")
        return claim_due(lease_id, now, **kwargs)

    store.claim_due = failing_for_one  # type: ignore[method-assign]
    report = sweep(context(store, registry_of(provider), clock=lambda: LATER))

    assert sorted(lease.lease_id for lease in report.ended) == sorted(others)
    assert report.failed_releases == [broken]


def test_one_leases_failure_does_not_stop_the_reconciler(leases: Leases, store: LeaseStore) -> None:
    broken, other = leases.pending().lease_id, leases.pending().lease_id
    claim_failed = store.claim_failed

    def failing_for_one(lease_id: str, now: Any, **kwargs: Any) -> Any:
        if lease_id == broken:
            raise unexpected_error(store)
        return claim_failed(lease_id, now, **kwargs)

    store.claim_failed = failing_for_one  # type: ignore[method-assign]
    report = reconcile.reconcile(
        context(
            store,
            registry_of(memory_provider()),
            clock=lambda: LATER,
            orphan_grace_seconds=600,
            pending_deadline_seconds=60,
        )
    )

    assert report.stuck_pending_failed == [other]
    assert [error.split(":")[0] for error in report.errors] == [f"lease {broken}"]
