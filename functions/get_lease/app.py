"""GET /v1/lease/{lease_id} — one lease, live or ended within the retention period.

Reading an active local-docker lease also asks the Docker host whether its worker still runs (at
most every WORKER_READ_CHECK_SECONDS per lease); a stopped worker ends the lease `failed` here.
The driver (and the Docker SDK) loads only when such a lease is first read.
"""

from typing import Any

from aws_lambda_powertools import Logger, Metrics

from scheduler.api.http import HttpRequest, Response, http_endpoint, json_response
from scheduler.leases.reads import get
from scheduler.observability.metrics import count, lease_ended
from scheduler.runtime import Runtime, request_deadline

logger = Logger()
metrics = Metrics()
runtime = Runtime.from_environment().warm("store", "read_check")


@logger.inject_lambda_context(clear_state=True, log_event=False)
@metrics.log_metrics
@http_endpoint
def lambda_handler(request: HttpRequest, context: Any) -> Response:
    """Answer 200 with the lease or 404."""
    lease_id = request.lease_id()
    logger.append_keys(lease_id=lease_id)
    read = get(lease_id, runtime.store, runtime.read_check, request_deadline(context))
    if read.ended_now:
        lease_ended(runtime.metrics, read.lease)
        count(runtime.metrics, "GhostLease", provider=read.lease.provider, kind=read.lease.kind.value)
    return json_response(200, {"lease": read.lease.wire()})
