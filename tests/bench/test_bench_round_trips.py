"""DynamoDB round trips per operation, pinned: a request added to any lease operation fails here.

The real handlers run in-process (bench/handlers.py) against the embedded DynamoDB with an
in-memory provider; every request is counted with botocore's `before-call` event, so the counts
are exact. bench/round_trips.py prints the same figures.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bench.handlers import DynamoDB, Handlers
from bench.round_trips import measure, measure_with_limits

# by operation:table role — exactly these requests, no others (default configuration: no caps, no quota).
EXPECTED: dict[str, dict[str, int]] = {
    "health": {},
    "authorizer": {},
    "acquire": {"PutItem:LEASES_TABLE": 1, "UpdateItem:LEASES_TABLE": 1},  # pending, then activate
    # the same two, plus powertools' one idempotency record: written INPROGRESS, then COMPLETED.
    "acquire with Idempotency-Key": {
        "PutItem:IDEMPOTENCY_TABLE": 1,
        "PutItem:LEASES_TABLE": 1,
        "UpdateItem:IDEMPOTENCY_TABLE": 1,
        "UpdateItem:LEASES_TABLE": 1,
    },
    # a replay finds the record (its conditional put fails), then reads the lease it names as it is now.
    "acquire replayed (same key)": {"PutItem:IDEMPOTENCY_TABLE": 1, "GetItem:LEASES_TABLE": 1},
    "get": {"GetItem:LEASES_TABLE": 1},
    "renew": {"UpdateItem:LEASES_TABLE": 1},
    "release": {"UpdateItem:LEASES_TABLE": 2},  # the claim, then the finish
}
ROUND_TRIPS = {
    "health": 0,
    "authorizer": 0,
    "acquire": 2,
    "acquire with Idempotency-Key": 4,
    "acquire replayed (same key)": 2,
    "get": 1,
    "renew": 1,
    "release": 2,
}
# With a provider cap (and an owner quota) the counters join the pending write and the finish in one
# transaction each: more items, not more round trips. An acquire on a capped provider also reads the queue index
# once (one Query, of the queued leases of at least its priority only): a cap's freed slot is the queue's first.
WITH_LIMITS = {
    "TransactWriteItems:COUNTERS_TABLE": 1,
    "TransactWriteItems:LEASES_TABLE": 1,
    "UpdateItem:LEASES_TABLE": 1,
}
QUEUE_READ = {"Query:LEASES_TABLE": 1}
ITEM_WRITES = {"LOCAL_DOCKER_MAX_LEASES=100": 3, "LOCAL_DOCKER_MAX_LEASES=100, MAX_LEASES_PER_OWNER=10": 4}


@pytest.fixture(scope="module")
def counted() -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    database = DynamoDB()
    try:
        with Handlers(database) as handlers:
            results = measure(handlers, list_pages=3)
        limited = measure_with_limits(database)
        yield results, limited
    finally:
        database.stop()


@pytest.mark.parametrize("operation", sorted(EXPECTED))
def test_each_operation_makes_exactly_its_round_trips(
    counted: tuple[dict[str, Any], dict[str, Any]], operation: str
) -> None:
    tally = counted[0][operation]
    assert tally["by_operation_and_table"] == EXPECTED[operation]
    assert tally["round_trips"] == ROUND_TRIPS[operation]


def test_acquire_and_release_write_twice_and_read_nothing(counted: tuple[dict[str, Any], dict[str, Any]]) -> None:
    results, _ = counted
    for operation in ("acquire", "release"):
        assert results[operation]["lease_store_write_round_trips"] == 2
        assert results[operation]["read_round_trips"] == 0
    assert results["acquire with Idempotency-Key"]["lease_store_write_round_trips"] == 2
    assert results["acquire with Idempotency-Key"]["idempotency_round_trips"] == 2


def test_list_makes_one_query_per_page(counted: tuple[dict[str, Any], dict[str, Any]]) -> None:
    listed = counted[0]["list (per page)"]
    assert listed["pages"] == 3
    assert listed["leases_listed"] == 5
    assert listed["by_operation_and_table"] == {"Query:LEASES_TABLE": 3}


@pytest.mark.parametrize("configuration", sorted(ITEM_WRITES))
def test_caps_and_quotas_add_transaction_items_and_an_acquire_one_queue_read(
    counted: tuple[dict[str, Any], dict[str, Any]], configuration: str
) -> None:
    limited = counted[1][configuration]
    for operation, reads in (("acquire", QUEUE_READ), ("release", {})):
        assert limited[operation]["round_trips"] == 2 + len(reads)
        assert limited[operation]["by_operation_and_table"] == {**WITH_LIMITS, **reads}
        assert limited[operation]["item_writes"] == ITEM_WRITES[configuration]


def test_a_sweep_of_one_expired_lease_reads_each_index_range_once(
    counted: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    sweep = counted[0]["sweep (1 expired lease)"]
    assert sweep["handler_result"]["ended"] == 1
    # due leases from the sparse index, the claim and the finish; the starting leases (the live index, filtered);
    # the leases about to expire, to warn (the live index's next range); the queue, served as a backstop (its
    # sparse index: one Query per shard, nothing more when empty)
    assert sweep["by_operation_and_table"] == {"Query:LEASES_TABLE": 4, "UpdateItem:LEASES_TABLE": 2}
