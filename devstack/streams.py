"""The DynamoDB stream → Lambda event source mapping, emulated as AWS runs it.

Reads the table's stream, applies the mapping's FilterCriteria (from the template), delivers
batches of up to BatchSize, honours `batchItemFailures` (ReportBatchItemFailures), bisects a
failing batch, retries up to MaximumRetryAttempts, then hands the records to the on-failure
destination — here a JSON file under the state directory — so none is silently lost.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from devstack.filter_patterns import matches_any
from devstack.lambdas import FunctionError, LocalLambda
from devstack.template import StreamMappingSpec
from devstack.ttl import TtlEmulator

log = logging.getLogger("devstack.streams")


class StreamMapping:
    """Polls one stream and feeds one function."""

    def __init__(
        self,
        streams_client: Any,
        stream_arn: str,
        spec: StreamMappingSpec,
        lambdas: LocalLambda,
        ttl: TtlEmulator | None,
        failure_dir: Path,
        poll_seconds: float = 0.25,
    ) -> None:
        self._client = streams_client
        self._arn = stream_arn
        self._spec = spec
        self._lambdas = lambdas
        self._ttl = ttl
        self._failure_dir = failure_dir
        self._poll = poll_seconds
        self._iterators: dict[str, str | None] = {}
        self.delivered = 0
        self.sent_to_failure_destination = 0

    def poll_once(self) -> int:
        """Read every shard once and deliver what passes the filter; returns records delivered."""
        shards = self._client.describe_stream(StreamArn=self._arn)["StreamDescription"].get("Shards", [])
        delivered = 0
        for shard in shards:
            shard_id = shard["ShardId"]
            if shard_id not in self._iterators:
                self._iterators[shard_id] = self._client.get_shard_iterator(
                    StreamArn=self._arn, ShardId=shard_id, ShardIteratorType=self._spec.starting_position
                )["ShardIterator"]
            iterator = self._iterators[shard_id]
            if iterator is None:
                continue
            page = self._client.get_records(ShardIterator=iterator, Limit=1000)
            self._iterators[shard_id] = page.get("NextShardIterator")
            records = [self._as_lambda_record(record) for record in page.get("Records", [])]
            wanted = [record for record in records if matches_any(self._spec.filter_patterns, record)]
            for start in range(0, len(wanted), self._spec.batch_size):
                batch = wanted[start : start + self._spec.batch_size]
                self._deliver(batch, attempt=0)
                delivered += len(batch)
        self.delivered += delivered
        return delivered

    def run(self, stop: threading.Event) -> None:
        """Poll until `stop` is set."""
        while not stop.is_set():
            try:
                self.poll_once()
            except Exception:
                log.exception("stream poll failed")
            stop.wait(self._poll)

    def _as_lambda_record(self, record: dict[str, Any]) -> dict[str, Any]:
        record = {**record, "eventSourceARN": self._arn}
        stamp = record.get("dynamodb", {}).get("ApproximateCreationDateTime")
        if isinstance(stamp, datetime):  # boto3 parses it; Lambda hands it over as epoch seconds
            record["dynamodb"] = {**record["dynamodb"], "ApproximateCreationDateTime": stamp.timestamp()}
        if self._ttl is not None:
            record = self._ttl.mark_if_ttl_deletion(record)
        return record

    def _deliver(self, batch: list[dict[str, Any]], attempt: int) -> None:
        try:
            result = self._lambdas.invoke(self._spec.function, {"Records": batch})
        except FunctionError as error:
            if self._spec.bisect_on_error and len(batch) > 1:
                middle = len(batch) // 2
                self._deliver(batch[:middle], attempt)
                self._deliver(batch[middle:], attempt)
                return
            self._retry_or_give_up(batch, attempt, str(error))
            return
        failures = (result or {}).get("batchItemFailures") or [] if self._spec.report_item_failures else []
        if not failures:
            return
        # As Lambda does: resume from the lowest failed sequence number, records after it included.
        failed = {str(item.get("itemIdentifier")) for item in failures}
        first = next((index for index, record in enumerate(batch) if record["dynamodb"]["SequenceNumber"] in failed), 0)
        self._retry_or_give_up(batch[first:], attempt, f"{len(failed)} record(s) reported failed")

    def _retry_or_give_up(self, batch: list[dict[str, Any]], attempt: int, reason: str) -> None:
        limit = self._spec.max_retries
        if limit < 0 or attempt < limit:
            time.sleep(min(0.2 * 2**attempt, 5.0))
            self._deliver(batch, attempt + 1)
            return
        self._failure_dir.mkdir(parents=True, exist_ok=True)
        first, last = batch[0]["dynamodb"]["SequenceNumber"], batch[-1]["dynamodb"]["SequenceNumber"]
        path = self._failure_dir / f"{self._spec.function}-{first}-{last}.json"
        document = {
            "requestContext": {"condition": "RetryAttemptsExhausted", "approximateInvokeCount": attempt + 1},
            "reason": reason,
            "DDBStreamBatchInfo": {
                "streamArn": self._arn,
                "startSequenceNumber": first,
                "endSequenceNumber": last,
                "batchSize": len(batch),
            },
            "records": batch,
        }
        path.write_text(json.dumps(document, indent=2))
        self.sent_to_failure_destination += len(batch)
        log.error("stream records sent to the on-failure destination: %s (%s)", path, reason)
