"""The embedded DynamoDB behaves like DynamoDB under concurrency: atomic per item without one lock over
all requests, transactions that conflict, ClientRequestToken idempotency, and DynamoDB's fault answers."""

from __future__ import annotations

import sys
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config

from devstack.dynamodb import FAKE_CREDENTIALS, EmbeddedDynamoDB
from devstack.dynamodb_faults import Faults
from devstack.dynamodb_front import TOKEN_WINDOW_SECONDS, ClientTokens
from devstack.dynamodb_locks import ITEMS
from tests.support.tables import make_table


def client_of(server: EmbeddedDynamoDB, *, retries: int = 1) -> Any:
    return boto3.client(
        "dynamodb",
        endpoint_url=server.endpoint_url,
        region_name=FAKE_CREDENTIALS["AWS_DEFAULT_REGION"],
        aws_access_key_id="local",
        aws_secret_access_key="local",
        config=Config(max_pool_connections=64, retries={"mode": "standard", "total_max_attempts": retries}),
    )


@pytest.fixture
def table(server: EmbeddedDynamoDB) -> str:
    return make_table(server.client(), "moto", "front", "LeaseCountersTable")


def put_counter(client: Any, table: str, name: str, value: int = 0) -> None:
    client.put_item(TableName=table, Item={"counter": {"S": name}, "leases": {"N": str(value)}})


def add_one(table: str, name: str) -> dict[str, Any]:
    return {
        "Update": {
            "TableName": table,
            "Key": {"counter": {"S": name}},
            "UpdateExpression": "ADD leases :one",
            "ExpressionAttributeValues": {":one": {"N": "1"}},
        }
    }


# --- atomic per item, without one lock over every request ----------------------------------------


def test_concurrent_conditional_increments_of_one_item_never_both_win(server: EmbeddedDynamoDB, table: str) -> None:
    client = client_of(server)
    put_counter(client, table, "hot")
    wins: list[int] = []

    def claim(seen: int) -> None:
        try:
            client.update_item(
                TableName=table,
                Key={"counter": {"S": "hot"}},
                UpdateExpression="SET leases = :next",
                ConditionExpression="leases = :seen",
                ExpressionAttributeValues={":seen": {"N": str(seen)}, ":next": {"N": str(seen + 1)}},
            )
            wins.append(seen)
        except client.exceptions.ConditionalCheckFailedException:
            pass

    threads = [threading.Thread(target=claim, args=(0,)) for _ in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wins == [0]


def test_a_query_running_while_items_are_written_never_fails(server: EmbeddedDynamoDB) -> None:
    """moto's Query iterates the table and copies items; a write changing them meanwhile would break it."""
    client = client_of(server)
    leases = make_table(client, "moto", "leases", "LeasesTable")
    errors: list[str] = []
    writing = threading.Event()

    def write() -> None:
        writing.set()
        for _ in range(30):
            item = {"lease_id": {"S": str(uuid.uuid4())}, "live_shard": {"S": "0"}, "due_at": {"N": "5"}}
            client.put_item(TableName=leases, Item=item)
            client.update_item(
                TableName=leases,
                Key={"lease_id": item["lease_id"]},
                UpdateExpression="SET a = :v, b = :v, c = :v",
                ExpressionAttributeValues={":v": {"S": "x"}},
            )

    def read() -> None:
        writing.wait()
        for _ in range(15):
            try:
                client.query(
                    TableName=leases,
                    IndexName="live-by-due",
                    KeyConditionExpression="live_shard = :s",
                    ExpressionAttributeValues={":s": {"S": "0"}},
                )
                client.scan(TableName=leases)
            except Exception as error:
                errors.append(repr(error))

    threads = [threading.Thread(target=write) for _ in range(3)] + [threading.Thread(target=read) for _ in range(3)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: the race shows within a few requests
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []


def test_writes_to_different_items_do_not_wait_for_each_other(server: EmbeddedDynamoDB, table: str) -> None:
    """While one item is held (as by a running transaction), a write to another item goes through."""
    client = client_of(server)
    held = (table, '{"counter": {"S": "held"}}')
    with ITEMS.transaction([held]):
        put_counter(client, table, "other", 1)
    assert client.get_item(TableName=table, Key={"counter": {"S": "other"}})["Item"]["leases"] == {"N": "1"}


# --- transactions conflict as DynamoDB's do ------------------------------------------------------


def test_a_write_to_an_item_inside_a_running_transaction_is_a_transaction_conflict(
    server: EmbeddedDynamoDB, table: str
) -> None:
    client = client_of(server)
    with (
        ITEMS.transaction([(table, '{"counter": {"S": "busy"}}')]),
        pytest.raises(client.exceptions.TransactionConflictException),
    ):
        put_counter(client, table, "busy")


def test_a_transaction_touching_an_item_another_holds_is_cancelled_for_a_conflict(
    server: EmbeddedDynamoDB, table: str
) -> None:
    client = client_of(server)
    with (
        ITEMS.transaction([(table, '{"counter": {"S": "b"}}')]),
        pytest.raises(client.exceptions.TransactionCanceledException) as cancelled,
    ):
        client.transact_write_items(TransactItems=[add_one(table, "a"), add_one(table, "b")])
    reasons = [reason["Code"] for reason in cancelled.value.response["CancellationReasons"]]
    assert reasons == ["None", "TransactionConflict"]


def test_a_cancelled_transaction_changes_nothing(server: EmbeddedDynamoDB, table: str) -> None:
    client = client_of(server)
    put_counter(client, table, "full", 5)
    full = add_one(table, "full")
    full["Update"]["ConditionExpression"] = "leases < :max"
    full["Update"]["ExpressionAttributeValues"][":max"] = {"N": "5"}
    with pytest.raises(client.exceptions.TransactionCanceledException):
        client.transact_write_items(TransactItems=[add_one(table, "free"), full])
    assert "Item" not in client.get_item(TableName=table, Key={"counter": {"S": "free"}})


def test_a_failing_transaction_leaves_concurrent_writes_to_other_items_alone(
    server: EmbeddedDynamoDB, table: str
) -> None:
    """moto restores whole tables after a failed transaction; the embedded DynamoDB restores its own items only."""
    client = client_of(server)
    put_counter(client, table, "capped", 1)
    capped = add_one(table, "capped")
    capped["Update"]["ConditionExpression"] = "leases < :max"
    capped["Update"]["ExpressionAttributeValues"][":max"] = {"N": "1"}
    stop = threading.Event()
    written: list[str] = []

    def write_others() -> None:
        while not stop.is_set():
            name = f"other-{uuid.uuid4().hex[:8]}"
            put_counter(client, table, name)
            written.append(name)

    writers = [threading.Thread(target=write_others) for _ in range(3)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: the race shows within a few requests
    try:
        for writer in writers:
            writer.start()
        for _ in range(30):
            with pytest.raises(client.exceptions.TransactionCanceledException):
                client.transact_write_items(TransactItems=[capped])
    finally:
        stop.set()
        for writer in writers:
            writer.join()
        sys.setswitchinterval(interval)
    stored = {item["counter"]["S"] for item in client.scan(TableName=table, ConsistentRead=True)["Items"]}
    assert set(written) <= stored


# --- ClientRequestToken --------------------------------------------------------------------------


def test_the_same_token_again_succeeds_without_applying_twice(server: EmbeddedDynamoDB, table: str) -> None:
    client = client_of(server)
    token = uuid.uuid4().hex
    for _ in range(3):
        client.transact_write_items(TransactItems=[add_one(table, "once")], ClientRequestToken=token)
    assert client.get_item(TableName=table, Key={"counter": {"S": "once"}})["Item"]["leases"] == {"N": "1"}


def test_the_same_token_with_other_items_is_an_idempotent_parameter_mismatch(
    server: EmbeddedDynamoDB, table: str
) -> None:
    client = client_of(server)
    token = uuid.uuid4().hex
    client.transact_write_items(TransactItems=[add_one(table, "x")], ClientRequestToken=token)
    with pytest.raises(client.exceptions.IdempotentParameterMismatchException):
        client.transact_write_items(TransactItems=[add_one(table, "y")], ClientRequestToken=token)


def test_a_token_is_new_again_after_ten_minutes() -> None:
    now = [0.0]
    tokens = ClientTokens(clock=lambda: now[0])
    assert tokens.begin("t", "items") is True
    tokens.finish("t", succeeded=True)
    now[0] = TOKEN_WINDOW_SECONDS - 1
    assert tokens.begin("t", "items") is False
    now[0] = TOKEN_WINDOW_SECONDS + 1
    assert tokens.begin("t", "items") is True


def test_a_token_whose_transaction_was_cancelled_can_run_again() -> None:
    tokens = ClientTokens()
    tokens.begin("t", "items")
    tokens.finish("t", succeeded=False)
    assert tokens.begin("t", "items") is True


# --- DYNAMODB_FAULTS -----------------------------------------------------------------------------


def test_faults_are_parsed_from_the_variable() -> None:
    assert Faults.parse("conflict=0.1, throttle=0.05,seed=7") == Faults(conflict=0.1, throttle=0.05, seed=7)


@pytest.mark.parametrize("text", ["conflict=2", "slow=0.1", "throttle=often"])
def test_a_bad_fault_setting_is_refused_naming_it(text: str) -> None:
    with pytest.raises(ValueError, match="DYNAMODB_FAULTS"):
        Faults.parse(text)


@pytest.fixture(scope="module")
def faulty() -> Iterator[EmbeddedDynamoDB]:
    running = EmbeddedDynamoDB.start(faults=Faults(conflict=0.5, throttle=0.3, seed=1))
    yield running
    running.stop()


def test_faults_answer_with_dynamodbs_own_error_shapes(faulty: EmbeddedDynamoDB) -> None:
    setup = client_of(faulty, retries=10)
    table = make_table(setup, "moto", "faults", "LeaseCountersTable")
    client = client_of(faulty)
    seen: Counter[str] = Counter()
    reasons: set[str] = set()
    for _ in range(200):
        for call in (
            lambda: client.put_item(TableName=table, Item={"counter": {"S": "p"}}),
            lambda: client.transact_write_items(TransactItems=[add_one(table, "t"), add_one(table, "u")]),
            lambda: client.get_item(TableName=table, Key={"counter": {"S": "t"}}),
        ):
            try:
                call()
                seen["ok"] += 1
            except client.exceptions.ClientError as error:
                seen[error.response["Error"]["Code"]] += 1
                reasons |= {reason["Code"] for reason in error.response.get("CancellationReasons", [])}
    assert {
        "TransactionConflictException",
        "TransactionCanceledException",
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "ok",
    } <= set(seen), seen
    assert reasons == {"None", "TransactionConflict"}
    assert sum(faulty.front.injected.by_code.values()) == sum(seen.values()) - seen["ok"]
