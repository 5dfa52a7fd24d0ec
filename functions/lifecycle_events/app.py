"""DynamoDB stream consumer: each change of a lease → its lifecycle events, numbered in the lease's history,
published on the stack's EventBridge bus and queued for the owner's webhooks (`scheduler/events/publish.py`).

The second reader of the leases table's stream (the TTL handler is the first). Each lease's records are numbered
in order (the leases' at once) and the earliest that fails is reported with everything after it
(`handle_by_key`), so a lease's events keep their order; a record handed over again keeps its events' numbers
and ids. What the batch gave is then published at once (ten events per PutEvents, ten deliveries per
SendMessageBatch).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import MetricUnit

from scheduler.api.stream_batch import PartialBatchResponse, handle_by_key
from scheduler.events.publish import Pipeline, lease_of
from scheduler.observability.metrics import count
from scheduler.runtime import Runtime

logger = Logger()
runtime = Runtime.from_environment().warm("history", "webhooks", "bus", "deliveries")
# The leases of a batch whose records are numbered at once (each lease's in order): the history's writes are
# round trips, not work, so threads shorten a batch of many leases' changes.
LEASES_AT_ONCE = 8


@logger.inject_lambda_context(clear_state=True, log_event=False)
def lambda_handler(event: dict[str, Any], context: Any) -> PartialBatchResponse:
    """Take the batch's records in order into the history, up to the first that fails; publish what they gave;
    report the one that failed (Lambda hands it over again with those after it)."""
    pipeline = Pipeline(runtime.history, runtime.bus, runtime.webhooks, runtime.deliveries, runtime.clock)
    answer = handle_by_key(event, pipeline.take, lease_of, logger, workers=LEASES_AT_ONCE)
    published = pipeline.flush()  # a failure here fails the batch: handed over again whole, the numbers kept
    for document in published.documents:
        count(runtime.metrics, "LifecycleEvent", type=document["type"])
        logger.info(
            "lifecycle event",
            extra={
                "lease_id": document["data"]["lease_id"],
                "type": document["type"],
                "sequence": document["data"]["sequence"],
                "actor": document["data"]["actor"],
            },
        )
    if published.deliveries:
        runtime.metrics.emit("WebhookQueued", MetricUnit.Count, published.deliveries)
    if published.purged:
        logger.info("histories deleted with their leases", extra={"events": published.purged})
    return answer
