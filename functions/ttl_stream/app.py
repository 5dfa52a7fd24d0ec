"""DynamoDB stream consumer: release the workers of live leases that TTL deleted.

The event source mapping's FilterCriteria passes only TTL deletions of live leases; the same test
is repeated here so a misconfigured mapping can never turn a user deletion into a release.
"""

from functools import partial
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from scheduler.deadline import Deadline
from scheduler.leases.ttl_stream import is_ttl_deletion_of_live_lease, release_ttl_deleted
from scheduler.observability.metrics import lease_ended
from scheduler.runtime import Runtime, background_deadline

logger = Logger()
metrics = Metrics()
runtime = Runtime.from_environment().warm("store", "providers")
processor = BatchProcessor(event_type=EventType.DynamoDBStreams)


def release_record(record: DynamoDBRecord, deadline: Deadline | None = None) -> None:
    """Release one TTL-deleted lease's worker; raising marks the record failed for a retry."""
    raw = record.raw_event
    if not is_ttl_deletion_of_live_lease(raw):
        return
    old_image = raw["dynamodb"]["OldImage"]
    lease = release_ttl_deleted(old_image, runtime.store, runtime.providers, runtime.clock, deadline)
    if lease is not None:
        lease_ended(runtime.metrics, lease)
        logger.info("TTL-deleted lease released", extra={"lease_id": lease.lease_id, "provider": lease.provider})


@logger.inject_lambda_context(clear_state=True, log_event=False)
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: Any) -> PartialItemFailureResponse:
    """Process the batch, reporting failed records so only they are retried."""
    return process_partial_response(
        event=event,
        record_handler=partial(release_record, deadline=background_deadline(context)),
        processor=processor,
        context=context,
    )
