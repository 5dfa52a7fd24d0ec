"""What happens to a store's items outside its own methods, on DynamoDB and on the memory store alike.

DynamoDB's TTL process deleting a lease, a lost write leaving a counter wrong, an item as stored: on
DynamoDB through the client, on `MemoryLeaseStore` through the seams it keeps for tests.
"""

from __future__ import annotations

from typing import Any

from scheduler.store import LIVE_INDEX, STARTING_INDEX, LeaseStore
from scheduler.store.items import Item
from scheduler.store.memory import MemoryLeaseStore
from scheduler.store.port import LeaseStorePort


def stored_item(store: LeaseStorePort, lease_id: str) -> Item:
    """The lease's item as stored (DynamoDB's layout on both)."""
    if isinstance(store, MemoryLeaseStore):
        return store.stored_item(lease_id)
    item: Item = _dynamodb(store).client.get_item(
        TableName=_dynamodb(store).table_name, Key={"lease_id": {"S": lease_id}}, ConsistentRead=True
    )["Item"]
    return item


def ttl_delete(store: LeaseStorePort, lease_id: str) -> Item:
    """Delete the lease as TTL would, returning the stream's OldImage."""
    if isinstance(store, MemoryLeaseStore):
        return store.ttl_delete(lease_id)
    dynamodb = _dynamodb(store)
    old: Item = dynamodb.client.delete_item(
        TableName=dynamodb.table_name, Key={"lease_id": {"S": lease_id}}, ReturnValues="ALL_OLD"
    )["Attributes"]
    return old


def drift_counter(store: LeaseStorePort, counter: str, leases: int) -> None:
    """Set a counter behind the store's back, as a lost write would leave it (its version unchanged)."""
    if isinstance(store, MemoryLeaseStore):
        store.drift_counter(counter, leases)
        return
    dynamodb = _dynamodb(store)
    dynamodb.client.update_item(
        TableName=dynamodb.counters_table,
        Key={"counter": {"S": counter}},
        UpdateExpression="SET leases = :value",
        ExpressionAttributeValues={":value": {"N": str(leases)}},
    )


def _dynamodb(store: Any) -> LeaseStore:
    assert isinstance(store, LeaseStore), f"not a lease store: {store!r}"
    return store


def stored_items(store: LeaseStorePort, index: str | None = None) -> list[Item]:
    """Every lease item as stored, or those of one sparse index (`store.STARTING_INDEX`, shard 0)."""
    if isinstance(store, MemoryLeaseStore):
        items = store.stored_items()
        key = {STARTING_INDEX: "starting_shard", LIVE_INDEX: "live_shard"}.get(index or "")
        return [item for item in items if key is None or item.get(key) == {"S": "0"}]
    dynamodb = _dynamodb(store)
    if index is None:
        found: list[Item] = dynamodb.client.scan(TableName=dynamodb.table_name, ConsistentRead=True)["Items"]
        return found
    shard = "starting_shard" if index == STARTING_INDEX else "live_shard"
    page = dynamodb.client.query(
        TableName=dynamodb.table_name,
        IndexName=index,
        KeyConditionExpression=f"{shard} = :shard",
        ExpressionAttributeValues={":shard": {"S": "0"}},
    )
    indexed: list[Item] = page["Items"]
    return indexed


def remove_attribute(store: LeaseStorePort, lease_id: str, attribute: str) -> None:
    """Remove an attribute of a lease's item, as code written before it existed would have left it out."""
    if isinstance(store, MemoryLeaseStore):
        item = store.stored_item(lease_id)
        item.pop(attribute, None)
        store.put_stored_item(item)
        return
    dynamodb = _dynamodb(store)
    dynamodb.client.update_item(
        TableName=dynamodb.table_name, Key={"lease_id": {"S": lease_id}}, UpdateExpression=f"REMOVE {attribute}"
    )


def unexpected_error(store: LeaseStorePort) -> Exception:
    """An error the use cases do not expect of the store: DynamoDB's own on LeaseStore."""
    if isinstance(store, LeaseStore):
        return store.client.exceptions.TransactionConflictException(  # type: ignore[no-any-return]
            {"Error": {"Code": "TransactionConflictException"}}, "UpdateItem"
        )
    return RuntimeError("injected: the store failed as it never should")
