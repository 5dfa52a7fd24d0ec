"""A DynamoDB stream batch handled record by record, answered as a partial batch response
(`ReportBatchItemFailures`): only the records that raised are retried (`handle_batch`), or, where order
matters, everything from the first that raised on (`handle_in_order`; `handle_by_key` takes the records of
different items at once, each item's in order, as Lambda's ParallelizationFactor does within a shard).

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


def handle_by_key(
    event: Mapping[str, Any],
    handle: Callable[[Mapping[str, Any]], None],
    key: Callable[[Mapping[str, Any]], str],
    logger: Logs,
    workers: int = 8,
) -> PartialBatchResponse:
    """`handle` each item's records in their order (an item's next record only once its last one was handled),
    the items' at once on up to `workers` threads, and report the earliest record that raised: Lambda hands it over
    again with every record after it. Records of other items after it may have been handled already: they are
    handed over again too, so `handle` must know a record it handled (the lifecycle events' history does)."""
    records: Sequence[Mapping[str, Any]] = event.get("Records") or []
    chains: dict[str, list[tuple[int, Mapping[str, Any]]]] = {}
    for position, record in enumerate(records):
        chains.setdefault(key(record), []).append((position, record))

    def run(chain: list[tuple[int, Mapping[str, Any]]]) -> int | None:
        for position, record in chain:
            try:
                handle(record)
            except Exception:  # this item's later records wait for this one's retry
                sequence = sequence_number(record)
                logger.exception(
                    "stream record failed; it and those after it will be retried", extra={"sequence_number": sequence}
                )
                return position
        return None

    if len(chains) <= 1 or workers <= 1:
        failed = [found for chain in chains.values() if (found := run(chain)) is not None]
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(workers, len(chains)), thread_name_prefix="records") as pool:
            failed = [found for found in pool.map(run, chains.values()) if found is not None]
    if not failed:
        return {"batchItemFailures": []}
    first = min(failed)
    if first == 0:
        raise EveryRecordFailed(f"the first of {len(records)} records failed")
    return {"batchItemFailures": [{"itemIdentifier": sequence_number(records[first])}]}
