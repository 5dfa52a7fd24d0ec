"""DynamoDB stream consumer: each change of a lease → its lifecycle events, numbered in the lease's history,
published on the stack's EventBridge bus and queued for the owner's webhooks (`scheduler/events/publish.py`).

The second reader of the leases table's stream (the TTL handler is the first). Records are handled in order and
the first that fails is reported with everything after it (`handle_in_order`), so a lease's events keep their
order; a record handed over again keeps its events' numbers and ids.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import MetricUnit

from scheduler.api.stream_batch import PartialBatchResponse, handle_in_order
from scheduler.events.publish import Pipeline
from scheduler.observability.metrics import count
from scheduler.runtime import Runtime

logger = Logger()
runtime = Runtime.from_environment().warm("history", "webhooks", "bus", "deliveries")


@logger.inject_lambda_context(clear_state=True, log_event=False)
def lambda_handler(event: dict[str, Any], context: Any) -> PartialBatchResponse:
    """Handle the batch's records in order; report the first that failed."""
    pipeline = Pipeline(runtime.history, runtime.bus, runtime.webhooks, runtime.deliveries, runtime.clock)

    def one(record: Mapping[str, Any]) -> None:
        published = pipeline.handle(record)
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
            logger.info("history deleted with its lease", extra={"events": published.purged})

    return handle_in_order(event, one, logger)
