"""GET /v1/lease/{lease_id} — one lease, live or ended within the retention period.

Reading an active local-docker lease also asks the Docker host whether its worker still runs (at
most every WORKER_READ_CHECK_SECONDS per lease); a stopped worker ends the lease `failed` here.
The driver (and the Docker SDK) loads only when such a lease is first read.
"""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from scheduler import leases
from scheduler.api.http import HttpRequest, Response, http_endpoint, json_response
from scheduler.models import Lease
from scheduler.observability import emit, lease_ended
from scheduler.runtime import lease_store, request_deadline, worker_read_check

logger = Logger()
metrics = Metrics()
store = lease_store()


def _ended_on_read(lease: Lease) -> None:
    lease_ended(lease)
    emit("GhostLease", MetricUnit.Count, 1, provider=lease.provider, kind=lease.kind.value)


check = worker_read_check(store, on_end=_ended_on_read)


@logger.inject_lambda_context(clear_state=True, log_event=False)
@metrics.log_metrics
@http_endpoint
def lambda_handler(request: HttpRequest, context: Any) -> Response:
    """Answer 200 with the lease or 404."""
    lease_id = request.lease_id()
    logger.append_keys(lease_id=lease_id)
    return json_response(200, {"lease": leases.get(lease_id, store, check, request_deadline(context)).wire()})
