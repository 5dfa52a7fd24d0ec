"""SQS consumer: each queued webhook delivery → one signed attempt; a failure queued again with backoff, or
kept in the dead-letter queue once WEBHOOK_RETRY_SECONDS have passed (`scheduler/webhooks/deliver.py`).

A batch's deliveries are attempted at once, each within its own timeout, so a slow endpoint holds up none of
the others; a delivery that could not even be queued again is reported failed, and SQS hands it over later
(after maxReceiveCount times, its redrive policy moves it to the dead-letter queue too).
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import MetricUnit

from scheduler.api.stream_batch import PartialBatchResponse
from scheduler.observability.metrics import count
from scheduler.runtime import Runtime
from scheduler.webhooks.deliver import Courier, Outcome

logger = Logger()
runtime = Runtime.from_environment().warm("webhooks", "deliveries")
MOST_AT_ONCE = 10  # the event source mapping's BatchSize


@logger.inject_lambda_context(clear_state=True, log_event=False)
def lambda_handler(event: dict[str, Any], context: Any) -> PartialBatchResponse:
    """Attempt every delivery of the batch at once; report those that could not be handled."""
    settings = runtime.settings
    courier = Courier(
        runtime.webhooks,
        runtime.deliveries,
        retry_seconds=settings.webhook_retry_seconds,
        allow_loopback=settings.webhook_allow_loopback,
    )
    records = event.get("Records") or []

    def one(record: dict[str, Any]) -> str | None:
        try:
            message = json.loads(record["body"])
            report(message, courier.deliver(message))
        except Exception:  # this delivery alone is handed over again
            logger.exception("delivery failed to be handled", extra={"message_id": record.get("messageId")})
            return str(record.get("messageId"))
        return None

    if len(records) == 1:
        failed = [one(records[0])]
    else:
        with ThreadPoolExecutor(max_workers=min(MOST_AT_ONCE, max(1, len(records)))) as pool:
            failed = list(pool.map(one, records))
    return {"batchItemFailures": [{"itemIdentifier": item} for item in failed if item is not None]}


def report(message: dict[str, Any], outcome: Outcome) -> None:
    """The delivery's log line and metrics (never its secret, never its body)."""
    event = message.get("event", {})
    details = {
        "webhook_id": message.get("webhook_id"),
        "event_id": event.get("id"),
        "type": event.get("type"),
        "lease_id": event.get("data", {}).get("lease_id"),
        "state": outcome.state,
        "attempts": outcome.attempts,
        "status": outcome.status,
        "error": outcome.error,
    }
    if outcome.state == "delivered":
        logger.info("webhook delivered", extra=details)
        count(runtime.metrics, "WebhookDelivered")
        stamp = event.get("timestamp")
        if isinstance(stamp, str):
            took = time.time() - datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
            runtime.metrics.emit("WebhookDeliveryLatency", MetricUnit.Milliseconds, max(0.0, took * 1000))
    elif outcome.state == "retrying":
        logger.warning("webhook delivery failed; it will be retried", extra={**details, "due": outcome.due})
        count(runtime.metrics, "WebhookAttemptFailed")
    elif outcome.state == "dead_lettered":
        logger.error("webhook delivery dead-lettered: its retries ran out", extra=details)
        count(runtime.metrics, "WebhookDeadLettered")
    elif outcome.state == "dropped":
        logger.info("webhook delivery dropped: the webhook is gone or no longer takes the type", extra=details)
