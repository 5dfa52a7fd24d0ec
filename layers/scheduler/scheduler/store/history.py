"""Each lease's history (table LEASE_EVENTS_TABLE, key `lease_id` + `sequence`): its lifecycle events, numbered
1, 2, 3… in transition order, kept as long as the lease is readable.

The numbers are given here, by the events function, which reads the leases table's stream: DynamoDB Streams
hands one item's changes over in order, and the function takes a stream's records one after the other
(stopping at the first that fails, which Lambda then hands over again with everything after it). So one
lease's events are numbered by one writer at a time, in order, and the one hazard is a record handed over
again (a retry after a failure or a timeout): its events must keep the numbers they got.

That is why an event item names the stream record it came from (`record`, its SequenceNumber) and its own id
(`event_id`, derived from that record): numbering a record first reads the lease's newest items (one strongly
consistent Query, newest first) back to the first item of an older record, reuses the number of each event it
finds there, and writes each event it does not find at the next number, with a condition that the number is
free or already this event's. A writer that found a number taken by another event (two writers at once, which
the stream's order rules out) fails, and the record is retried. No transaction: one PutItem per event.

An event item holds the event's document as JSON (`document`); `ttl` is a backstop only: the history is deleted
with the lease (`purge`, when DynamoDB's TTL removes the ended lease at the end of its retention).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from scheduler.events.model import LifecycleEvent
from scheduler.store.client import TableClient
from scheduler.store.items import Item, epoch, number_attr, string_attr

# How long past its writing an event item may outlive a purge that never came (a year past the retention).
BACKSTOP_SECONDS = 365 * 24 * 3600
_NEWEST_PAGE = 20
_BATCH_DELETE = 25  # BatchWriteItem's limit


class Cursor(NamedTuple):
    """What one batch knows of a lease's history after numbering a record of it: the newest record it holds
    (`newest`, its order) and the last number given."""

    newest: int
    last: int


class HistoryConflict(Exception):
    """Another event holds the number this one was to get: the record is retried."""


def record_order(sequence_number: str) -> int:
    """A stream record's place in its stream (SequenceNumbers are decimal and grow with each change of an item)."""
    return int(sequence_number) if sequence_number.isdigit() else 0


class HistoryBook(ABC):
    """The numbering, on whatever keeps the items (`_newest`, `_put`)."""

    def __init__(self, retention_seconds: int) -> None:
        self._retention = retention_seconds

    def record(
        self, events: Sequence[LifecycleEvent], now: datetime, memo: dict[str, Cursor] | None = None
    ) -> list[dict[str, Any]]:
        """Number one stream record's events (all of one lease) in the lease's history; their documents. A record
        handed over again gets the numbers it got before.

        `memo` carries what one batch learnt of each lease: a record later than any the history held when the
        batch first read the lease cannot be in it, so its events are numbered on without reading it again (a
        batch of a lease's many changes costs one Query, not one per change)."""
        if not events:
            return []
        lease_id, record = events[0].lease_id, events[0].record
        order = record_order(record)
        numbered: dict[str, int] = {}
        known = memo.get(lease_id) if memo is not None else None
        if known is not None and order > known.newest:
            newest, last = known
        else:
            newest, last = self._read(lease_id, record, numbered)
        documents = []
        for event in events:
            sequence = numbered.get(event.id, 0)
            if not sequence:
                last += 1
                sequence = last
                document = event.document(sequence)
                if not self._put(self._item(event, document, now), event.id):
                    raise HistoryConflict(f"lease {lease_id}: sequence {sequence} holds another event")
                documents.append(document)
            else:
                documents.append(event.document(sequence))
        if memo is not None:  # this record is the newest now: a later one of the batch is numbered on, unread
            memo[lease_id] = Cursor(max(newest, order), last)
        return documents

    def _read(self, lease_id: str, record: str, numbered: dict[str, int]) -> tuple[int, int]:
        """Read the lease's newest events back to an older record's, noting in `numbered` the numbers of this
        record's events found there; the order of the newest record the history holds, and its last number."""
        order = record_order(record)
        newest, last = 0, 0
        for item in self._newest(lease_id):
            sequence = int(item["sequence"]["N"])
            found = item.get("record", {}).get("S", "")
            if not last:
                newest, last = record_order(found), sequence
            if record_order(found) < order:
                break  # an older record's: nothing of this record is further back
            if found == record:
                numbered[item["event_id"]["S"]] = sequence
        return newest, last

    def _item(self, event: LifecycleEvent, document: dict[str, Any], now: datetime) -> Item:
        return {
            "lease_id": string_attr(event.lease_id),
            "sequence": number_attr(document["data"]["sequence"]),
            "event_id": string_attr(event.id),
            "record": string_attr(event.record),
            "document": string_attr(json.dumps(document, separators=(",", ":"))),
            "ttl": number_attr(epoch(now) + self._retention + BACKSTOP_SECONDS),
        }

    @abstractmethod
    def _newest(self, lease_id: str) -> Iterator[Item]:
        """The lease's event items, newest first (at least `sequence`, `event_id`, `record`)."""

    @abstractmethod
    def _put(self, item: Item, event_id: str) -> bool:
        """Write `item` if its number is free or holds this event already; False when another event holds it."""


class HistoryStore(HistoryBook, TableClient):
    """The history on DynamoDB."""

    def __init__(self, table_name: str, client: Any, *, retention_seconds: int, **options: Any) -> None:
        HistoryBook.__init__(self, retention_seconds)
        TableClient.__init__(self, table_name, client, **options)

    def page(self, lease_id: str, after: int, limit: int) -> tuple[list[dict[str, Any]], int | None]:
        """The lease's events numbered after `after`, in order, at most `limit`; and the number to continue after
        (None: there are no more)."""
        response = self._call(
            "Query",
            TableName=self.table_name,
            KeyConditionExpression="lease_id = :lease AND #sequence > :after",
            ExpressionAttributeNames={"#sequence": "sequence"},
            ExpressionAttributeValues={":lease": string_attr(lease_id), ":after": number_attr(after)},
            ProjectionExpression="document",
            Limit=limit,
            ConsistentRead=True,
        )
        documents = [json.loads(item["document"]["S"]) for item in response.get("Items", [])]
        more = "LastEvaluatedKey" in response and documents
        return documents, documents[-1]["data"]["sequence"] if more else None

    def purge(self, lease_id: str) -> int:
        """Delete the lease's history (its retention is over); how many events went."""
        request = {
            "TableName": self.table_name,
            "KeyConditionExpression": "lease_id = :lease",
            "ExpressionAttributeNames": {"#sequence": "sequence"},
            "ExpressionAttributeValues": {":lease": string_attr(lease_id)},
            "ProjectionExpression": "lease_id, #sequence",
        }
        keys = [item for page in self._pages("Query", request) for item in page.get("Items", [])]
        for start in range(0, len(keys), _BATCH_DELETE):
            pending: list[dict[str, Any]] = [
                {"DeleteRequest": {"Key": key}} for key in keys[start : start + _BATCH_DELETE]
            ]
            attempts = self._retry.attempts()
            while pending:
                answer = self._call("BatchWriteItem", RequestItems={self.table_name: pending})
                pending = answer.get("UnprocessedItems", {}).get(self.table_name, [])
                if pending and not attempts.wait():
                    raise HistoryConflict(f"lease {lease_id}: {len(pending)} events could not be deleted yet")
        return len(keys)

    def _newest(self, lease_id: str) -> Iterator[Item]:
        request = {
            "TableName": self.table_name,
            "KeyConditionExpression": "lease_id = :lease",
            "ExpressionAttributeNames": {"#sequence": "sequence", "#record": "record"},
            "ExpressionAttributeValues": {":lease": string_attr(lease_id)},
            "ProjectionExpression": "#sequence, event_id, #record",
            "ScanIndexForward": False,
            "ConsistentRead": True,
            "Limit": _NEWEST_PAGE,
        }
        for page in self._pages("Query", request):
            yield from page.get("Items", [])

    def _put(self, item: Item, event_id: str) -> bool:
        try:
            self._call(
                "PutItem",
                TableName=self.table_name,
                Item=item,
                ConditionExpression="attribute_not_exists(#sequence) OR event_id = :event",
                ExpressionAttributeNames={"#sequence": "sequence"},
                ExpressionAttributeValues={":event": string_attr(event_id)},
            )
        except self._errors.ConditionalCheckFailedException:
            return False
        return True
