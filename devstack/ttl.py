"""DynamoDB TTL, emulated: items past their TTL are deleted by "the service", as AWS's TTL process does.

moto stores the TTL setting but never deletes anything. Here a background pass deletes expired
items (optionally after a lag, since AWS's own deletion lags) with a condition that the TTL is still
past — as AWS does, so a renewal that lands first keeps the item — and remembers which deletions it
made so the stream can mark them with the TTL service's `userIdentity`.

A stream has as many readers as the template maps to it (the leases table's: the TTL handler and the lifecycle
events), and AWS gives each of them the same record, identity included. So marking a record does not use the
deletion up: it is remembered for MARK_RETENTION_SECONDS, as long as a reader can reasonably lag.
"""

from __future__ import annotations

import threading
import time
from typing import Any

TTL_PRINCIPAL = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
MARK_RETENTION_SECONDS = 3600.0


class TtlEmulator:
    """Deletes items whose TTL attribute is more than `lag_seconds` in the past."""

    def __init__(
        self, client: Any, table_name: str, key_name: str, ttl_attribute: str, lag_seconds: float = 0.0
    ) -> None:
        self._client = client
        self._table = table_name
        self._key = key_name
        self._attribute = ttl_attribute
        self._lag = lag_seconds
        self._deleted: dict[str, float] = {}  # key → when this emulator deleted it (monotonic)
        self._lock = threading.Lock()

    def run_once(self, now: float | None = None) -> int:
        """One pass of the TTL process; returns how many items it deleted."""
        cutoff = int((now or time.time()) - self._lag)
        self._forget_old_deletions()
        pages = self._client.get_paginator("scan").paginate(
            TableName=self._table,
            FilterExpression="#ttl < :cutoff",
            ExpressionAttributeNames={"#ttl": self._attribute, "#key": self._key},
            ExpressionAttributeValues={":cutoff": {"N": str(cutoff)}},
            ProjectionExpression="#key",
        )
        deleted = 0
        for page in pages:
            for item in page.get("Items", []):
                key_value = item[self._key]["S"]
                with self._lock:
                    # Recorded before the delete, so the stream reader can never see the record first.
                    self._deleted[key_value] = time.monotonic()
                try:
                    self._client.delete_item(
                        TableName=self._table,
                        Key={self._key: item[self._key]},
                        ConditionExpression="#ttl < :cutoff",
                        ExpressionAttributeNames={"#ttl": self._attribute},
                        ExpressionAttributeValues={":cutoff": {"N": str(cutoff)}},
                    )
                    deleted += 1
                except self._client.exceptions.ConditionalCheckFailedException:
                    with self._lock:
                        self._deleted.pop(key_value, None)
        return deleted

    def mark_if_ttl_deletion(self, record: dict[str, Any]) -> dict[str, Any]:
        """Add the TTL service identity to a REMOVE stream record this emulator caused."""
        if record.get("eventName") != "REMOVE":
            return record
        key_value = record.get("dynamodb", {}).get("Keys", {}).get(self._key, {}).get("S")
        with self._lock:
            if key_value not in self._deleted:
                return record
        return {**record, "userIdentity": dict(TTL_PRINCIPAL)}

    def _forget_old_deletions(self) -> None:
        oldest = time.monotonic() - MARK_RETENTION_SECONDS
        with self._lock:
            for key_value in [key for key, deleted_at in self._deleted.items() if deleted_at < oldest]:
                del self._deleted[key_value]
