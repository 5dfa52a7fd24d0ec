"""The emulated event source mapping: partial batch failures retried, poison records sent to the failure destination."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from devstack.lambdas import FunctionError
from devstack.streams import StreamMapping
from devstack.template import StreamMappingSpec


def _record(sequence: int) -> dict[str, Any]:
    return {"eventName": "INSERT", "dynamodb": {"SequenceNumber": str(sequence), "Keys": {}}}


class _Streams:
    """One shard holding the given records, as DynamoDB Streams serves them."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        self._records = records

    def describe_stream(self, StreamArn: str) -> dict[str, Any]:  # noqa: N803 - boto3's parameter names
        return {"StreamDescription": {"Shards": [{"ShardId": "shard-0"}]}}

    def get_shard_iterator(self, **_: Any) -> dict[str, str]:
        return {"ShardIterator": "it-0"}

    def get_records(self, ShardIterator: str, Limit: int) -> dict[str, Any]:  # noqa: N803
        records, self._records = self._records, []
        return {"Records": records, "NextShardIterator": "it-1"}


class _Lambda:
    """A stream function that fails the records whose sequence numbers are poisoned."""

    def __init__(self, poisoned: set[str], crash: bool = False) -> None:
        self.poisoned = poisoned
        self.crash = crash
        self.batches: list[list[str]] = []

    def invoke(self, function: str, event: dict[str, Any], request_id: str | None = None) -> Any:
        sequences = [record["dynamodb"]["SequenceNumber"] for record in event["Records"]]
        self.batches.append(sequences)
        bad = [sequence for sequence in sequences if sequence in self.poisoned]
        if self.crash and bad:
            raise FunctionError("error", {"errorType": "RuntimeError", "errorMessage": "boom"})
        return {"batchItemFailures": [{"itemIdentifier": sequence} for sequence in bad]}


def _mapping(records: list[dict[str, Any]], function: _Lambda, failure_dir: Path) -> StreamMapping:
    spec = StreamMappingSpec(
        function="TtlStreamFunction",
        table="LeasesTable",
        batch_size=10,
        max_retries=2,
        bisect_on_error=True,
        report_item_failures=True,
        filter_patterns=(),
        starting_position="TRIM_HORIZON",
    )
    return StreamMapping(_Streams(records), "arn:stream", spec, function, None, failure_dir)  # type: ignore[arg-type]


def test_a_clean_batch_is_delivered_once(tmp_path: Path) -> None:
    function = _Lambda(poisoned=set())
    _mapping([_record(i) for i in range(3)], function, tmp_path).poll_once()
    assert function.batches == [["0", "1", "2"]]


def test_a_reported_failure_is_retried_from_that_record_on(tmp_path: Path) -> None:
    function = _Lambda(poisoned={"1"})
    _mapping([_record(i) for i in range(3)], function, tmp_path).poll_once()
    assert function.batches[:2] == [["0", "1", "2"], ["1", "2"]]


def test_a_poison_record_lands_in_the_failure_destination_after_the_retries(tmp_path: Path) -> None:
    function = _Lambda(poisoned={"1"})
    mapping = _mapping([_record(i) for i in range(3)], function, tmp_path)

    mapping.poll_once()

    (failure,) = tmp_path.glob("*.json")
    document = json.loads(failure.read_text())
    assert document["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert [record["dynamodb"]["SequenceNumber"] for record in document["records"]] == ["1", "2"]
    assert len(function.batches) == 1 + 2  # the first delivery and two retries


def test_a_crashing_batch_is_bisected_to_isolate_the_poison_record(tmp_path: Path) -> None:
    function = _Lambda(poisoned={"3"}, crash=True)
    mapping = _mapping([_record(i) for i in range(4)], function, tmp_path)

    mapping.poll_once()

    (failure,) = tmp_path.glob("*.json")
    assert [r["dynamodb"]["SequenceNumber"] for r in json.loads(failure.read_text())["records"]] == ["3"]
    assert ["0", "1"] in function.batches and ["2"] in function.batches
