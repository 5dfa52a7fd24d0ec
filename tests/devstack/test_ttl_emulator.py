"""`make run`'s TTL process: it deletes what is past its TTL, and every reader of the stream sees the deletion as TTL's.

The leases table's stream has two readers (the TTL handler and the lifecycle events); AWS hands each the same
REMOVE record with the TTL service's identity, whichever reads first.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from devstack.dynamodb import EmbeddedDynamoDB
from devstack.ttl import TTL_PRINCIPAL, TtlEmulator
from tests.support.tables import make_table

LEASE_ID = "00000000-0000-4000-8000-000000000001"


@pytest.fixture
def leases(server: EmbeddedDynamoDB) -> tuple[Any, str]:
    client = server.client()
    return client, make_table(client, "moto", "ttl", "LeasesTable")


def _put(client: Any, table: str, lease_id: str, ttl: float) -> None:
    client.put_item(TableName=table, Item={"lease_id": {"S": lease_id}, "ttl": {"N": str(int(ttl))}})


def _remove_record(lease_id: str) -> dict[str, Any]:
    return {"eventName": "REMOVE", "dynamodb": {"Keys": {"lease_id": {"S": lease_id}}}}


def test_an_item_past_its_ttl_is_deleted_and_one_still_within_it_is_kept(leases: tuple[Any, str]) -> None:
    client, table = leases
    _put(client, table, LEASE_ID, time.time() - 5)
    _put(client, table, "kept", time.time() + 600)

    assert TtlEmulator(client, table, "lease_id", "ttl").run_once() == 1

    remaining = [item["lease_id"]["S"] for item in client.scan(TableName=table)["Items"]]
    assert remaining == ["kept"]


def test_every_reader_of_the_stream_sees_a_ttl_deletion_as_the_ttl_services(leases: tuple[Any, str]) -> None:
    client, table = leases
    _put(client, table, LEASE_ID, time.time() - 5)
    emulator = TtlEmulator(client, table, "lease_id", "ttl")
    emulator.run_once()

    lifecycle_events_reader = emulator.mark_if_ttl_deletion(_remove_record(LEASE_ID))
    ttl_handler_reader = emulator.mark_if_ttl_deletion(_remove_record(LEASE_ID))

    assert lifecycle_events_reader["userIdentity"] == TTL_PRINCIPAL
    assert ttl_handler_reader["userIdentity"] == TTL_PRINCIPAL


def test_a_deletion_the_ttl_process_did_not_make_carries_no_ttl_identity(leases: tuple[Any, str]) -> None:
    client, table = leases
    _put(client, table, LEASE_ID, time.time() + 600)
    emulator = TtlEmulator(client, table, "lease_id", "ttl")
    emulator.run_once()
    client.delete_item(TableName=table, Key={"lease_id": {"S": LEASE_ID}})

    assert "userIdentity" not in emulator.mark_if_ttl_deletion(_remove_record(LEASE_ID))
