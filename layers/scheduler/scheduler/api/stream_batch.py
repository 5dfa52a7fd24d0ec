"""A DynamoDB stream batch handled record by record, answered as a partial batch response
(`ReportBatchItemFailures`): only the records that raised are retried (`handle_batch`), or, where order
matters, everything from the first that raised on (`handle_in_order`).

Written out rather than powertools' BatchProcessor, whose import (asyncio and every event data class)
was a fifth of the stream function's cold start; the behaviour is the same: every record is tried,
each failure is logged and reported by its sequence number, and a batch whose every record failed
raises, so that Lambda bisects it (`BisectBatchOnFunctionError`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypedDict


class ItemFailure(TypedDict):
    itemIdentifier: str


class PartialBatchResponse(TypedDict):
    batchItemFailures: list[ItemFailure]


class Logs(Protocol):
    def exception(self, msg: str, *, extra: dict[str, str]) -> None: ...


class EveryRecordFailed(Exception):
    """No record of the batch could be handled: the invocation fails, and Lambda retries or bisects it."""


def sequence_number(record: object) -> str:
    """The record's position in its shard, by which a partial batch response names it."""
    dynamodb = record.get("dynamodb") if isinstance(record, Mapping) else None
    return str(dynamodb.get("SequenceNumber", "")) if isinstance(dynamodb, Mapping) else ""


def handle_batch(
    event: Mapping[str, Any], handle: Callable[[Mapping[str, Any]], None], logger: Logs
) -> PartialBatchResponse:
    """`handle` each of the event's records; the ones that raised, by sequence number."""
    records: Sequence[Mapping[str, Any]] = event.get("Records") or []
    failures: list[ItemFailure] = []
    for record in records:
        try:
            handle(record)
        except Exception:  # any failure of one record is that record's: it alone is retried
            sequence = sequence_number(record)
            logger.exception("stream record failed; it will be retried", extra={"sequence_number": sequence})
            failures.append({"itemIdentifier": sequence})
    if records and len(failures) == len(records):
        raise EveryRecordFailed(f"all {len(records)} records of the batch failed")
    return {"batchItemFailures": failures}


def handle_in_order(
    event: Mapping[str, Any], handle: Callable[[Mapping[str, Any]], None], logger: Logs
) -> PartialBatchResponse:
    """`handle` the records one after the other up to the first that raises, and report that one: Lambda hands it
    over again with every record after it, none of which was handled, so each item's records are handled in
    their order, each once it is its turn (the lifecycle events number an item's changes in that order)."""
    records: Sequence[Mapping[str, Any]] = event.get("Records") or []
    for position, record in enumerate(records):
        try:
            handle(record)
        except Exception:  # the record and those after it are handed over again, in order
            sequence = sequence_number(record)
            logger.exception(
                "stream record failed; it and those after it will be retried", extra={"sequence_number": sequence}
            )
            if position == 0:
                raise EveryRecordFailed(f"the first of {len(records)} records failed") from None
            return {"batchItemFailures": [{"itemIdentifier": sequence}]}
    return {"batchItemFailures": []}
