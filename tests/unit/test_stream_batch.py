"""A stream batch answered as a partial batch response: only the records that raised are retried (`handle_batch`),
or everything from the first that raised on, in order (`handle_in_order`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from scheduler.api.stream_batch import EveryRecordFailed, handle_batch, handle_by_key, handle_in_order


class RecordedLogs:
    def __init__(self) -> None:
        self.failures: list[dict[str, str]] = []

    def exception(self, msg: str, *, extra: dict[str, str]) -> None:
        self.failures.append(extra)


def batch(*sequences: str) -> dict[str, Any]:
    return {"Records": [{"eventName": "REMOVE", "dynamodb": {"SequenceNumber": sequence}} for sequence in sequences]}


def failing_on(*bad: str) -> Any:
    handled: list[str] = []

    def handle(record: Mapping[str, Any]) -> None:
        sequence = record["dynamodb"]["SequenceNumber"]
        if sequence in bad:
            raise RuntimeError(f"record {sequence} failed")
        handled.append(sequence)

    handle.handled = handled  # type: ignore[attr-defined]
    return handle


def test_a_batch_handled_in_full_reports_no_failure() -> None:
    handle = failing_on()
    assert handle_batch(batch("1", "2"), handle, RecordedLogs()) == {"batchItemFailures": []}
    assert handle.handled == ["1", "2"]


def test_a_failed_record_is_reported_by_its_sequence_number_and_the_rest_still_handled() -> None:
    handle = failing_on("2")
    answer = handle_batch(batch("1", "2", "3"), handle, RecordedLogs())
    assert (answer, handle.handled) == ({"batchItemFailures": [{"itemIdentifier": "2"}]}, ["1", "3"])


def test_each_failure_is_logged_with_its_sequence_number() -> None:
    logs = RecordedLogs()
    handle_batch(batch("1", "2"), failing_on("1"), logs)
    assert logs.failures == [{"sequence_number": "1"}]


def test_a_batch_whose_every_record_failed_fails_the_invocation_so_lambda_bisects_it() -> None:
    with pytest.raises(EveryRecordFailed):
        handle_batch(batch("1", "2"), failing_on("1", "2"), RecordedLogs())


def test_an_empty_batch_reports_no_failure() -> None:
    assert handle_batch({"Records": []}, failing_on(), RecordedLogs()) == {"batchItemFailures": []}


def test_a_record_that_is_no_object_is_a_failure_of_its_own() -> None:
    event = {"Records": ["junk", {"dynamodb": {"SequenceNumber": "7"}}]}
    answer = handle_batch(event, failing_on(), RecordedLogs())
    assert answer == {"batchItemFailures": [{"itemIdentifier": ""}]}


def test_in_order_the_records_after_a_failure_are_left_for_the_retry() -> None:
    handle = failing_on("2")

    answer = handle_in_order(batch("1", "2", "3"), handle, RecordedLogs())

    assert answer == {"batchItemFailures": [{"itemIdentifier": "2"}]} and handle.handled == ["1"]


def test_in_order_a_batch_handled_in_full_reports_no_failure() -> None:
    handle = failing_on()

    assert handle_in_order(batch("1", "2"), handle, RecordedLogs()) == {"batchItemFailures": []}
    assert handle.handled == ["1", "2"]


def test_in_order_a_failing_first_record_fails_the_invocation_so_lambda_bisects_or_retries_it() -> None:
    logs = RecordedLogs()

    with pytest.raises(EveryRecordFailed):
        handle_in_order(batch("1", "2"), failing_on("1"), logs)
    assert logs.failures == [{"sequence_number": "1"}]


def keyed(*records: tuple[str, str]) -> dict[str, Any]:
    return {
        "Records": [
            {"eventName": "MODIFY", "dynamodb": {"SequenceNumber": sequence, "Keys": {"id": {"S": item}}}}
            for item, sequence in records
        ]
    }


def item_of(record: Mapping[str, Any]) -> str:
    return str(record["dynamodb"]["Keys"]["id"]["S"])


def test_by_key_each_item_s_records_are_handled_in_order_and_the_items_at_once() -> None:
    handle = failing_on()

    answer = handle_by_key(keyed(("a", "1"), ("b", "2"), ("a", "3"), ("b", "4")), handle, item_of, RecordedLogs())

    assert answer == {"batchItemFailures": []}
    assert [s for s in handle.handled if s in ("1", "3")] == ["1", "3"] and sorted(handle.handled) == [
        "1",
        "2",
        "3",
        "4",
    ]


def test_by_key_an_item_s_records_after_its_failure_wait_and_the_earliest_failure_is_reported() -> None:
    handle = failing_on("3")

    answer = handle_by_key(
        keyed(("a", "1"), ("b", "2"), ("a", "3"), ("b", "4"), ("a", "5")), handle, item_of, RecordedLogs()
    )

    assert answer == {"batchItemFailures": [{"itemIdentifier": "3"}]}
    assert "5" not in handle.handled and {"1", "2", "4"} <= set(handle.handled)


def test_by_key_a_failing_first_record_fails_the_invocation() -> None:
    with pytest.raises(EveryRecordFailed):
        handle_by_key(keyed(("a", "1"), ("b", "2")), failing_on("1"), item_of, RecordedLogs())
