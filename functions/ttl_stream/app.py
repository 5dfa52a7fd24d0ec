"""DynamoDB stream consumer: release the workers of live leases that TTL deleted, and serve the queue after a
lease gave its slots back or joined the queue (one admission pass a batch, `leases/admission.py`).

The event source mapping's FilterCriteria passes only those records; the same tests are repeated here so a
misconfigured mapping can never turn a user deletion into a release.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from scheduler.api.stream_batch import PartialBatchResponse, handle_batch
from scheduler.callers.model import TTL_STREAM
from scheduler.leases.ttl_stream import is_ttl_deletion_of_live_lease, may_free_capacity, release_ttl_deleted
from scheduler.observability.metrics import count, lease_ended
from scheduler.runtime import Runtime, background_deadline

if TYPE_CHECKING:
    from scheduler.leases.context import Context

logger = Logger()
runtime = Runtime.from_environment().warm("store", "providers", "limits")


def release_record(record: Mapping[str, Any], ctx: Context) -> None:
    """Release one TTL-deleted lease's worker; raising marks the record failed for a retry."""
    if not is_ttl_deletion_of_live_lease(record):
        return
    lease = release_ttl_deleted(ctx, record["dynamodb"]["OldImage"])
    if lease is not None:
        lease_ended(runtime.metrics, lease)
        logger.info("TTL-deleted lease released", extra={"lease_id": lease.lease_id, "provider": lease.provider})


def serve(ctx: Context) -> None:
    """One admission pass; a failure is logged and counted, never a record's (the sweep serves the queue too)."""
    from scheduler.leases.admission import serve_queue
    from scheduler.observability.queue_metrics import admission_metrics

    try:
        admission_metrics(runtime.metrics, serve_queue(ctx))
    except Exception:
        logger.exception("admission pass failed; the sweep serves the queue")
        count(runtime.metrics, "AdmissionPassFailed")


@logger.inject_lambda_context(clear_state=True, log_event=False)
def lambda_handler(event: dict[str, Any], context: Any) -> PartialBatchResponse:
    """Process the batch, reporting failed records so only they are retried; then serve the queue once if any
    record may have freed capacity."""
    ctx = runtime.context(background_deadline(context), TTL_STREAM)
    answer = handle_batch(event, lambda record: release_record(record, ctx), logger)
    if any(isinstance(record, Mapping) and may_free_capacity(record) for record in event.get("Records") or []):
        serve(ctx)
    return answer
