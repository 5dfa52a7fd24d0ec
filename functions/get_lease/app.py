"""GET /v1/lease/{lease_id}[?wait_ready=N] — one lease, live or ended within the retention period.

A lease whose worker is starting is refreshed from its provider (at most every couple of seconds per
lease, however many callers poll) and, with `wait_ready=N` (0–25), waited on until the worker is ready
or N seconds pass; a worker that failed to boot ends the lease `failed` here.
Reading an active local-docker lease also asks the Docker host whether its worker still runs (at
most every WORKER_READ_CHECK_SECONDS per lease); a stopped worker ends the lease `failed` here.
The drivers (and the Docker SDK) load only when such a lease is first read.
"""

from typing import Any

from scheduler.api.http import HttpRequest, Response, http_endpoint, json_response
from scheduler.leases.reads import get_when_ready
from scheduler.models import ReadQuery
from scheduler.observability.log import Logger
from scheduler.observability.metrics import boot_failed, count, lease_ended, worker_ready
from scheduler.runtime import Runtime, request_deadline

logger = Logger()
runtime = Runtime.from_environment().warm("store", "providers", "read_check")


@logger.inject_lambda_context(clear_state=True, log_event=False)
@http_endpoint
def lambda_handler(request: HttpRequest, context: Any) -> Response:
    """Answer 200 with the lease (once ready, or after wait_ready seconds) or 404."""
    lease_id = request.lease_id()
    logger.append_keys(lease_id=lease_id)
    query = ReadQuery.parse(request.queryStringParameters)
    ctx = runtime.context(request_deadline(context), request.caller)
    # The readiness policy is built (and its code loaded) only when a starting lease is read.
    owner = request.header("X-Lease-Owner")
    read = get_when_ready(ctx, lease_id, query.wait_ready, lambda: runtime.readiness, runtime.read_check, header=owner)
    if read.ended_now:
        lease_ended(runtime.metrics, read.lease)
        count(runtime.metrics, "GhostLease", provider=read.lease.provider, kind=read.lease.kind.value)
    if read.became_ready:
        worker_ready(runtime.metrics, read.lease)
    if read.boot_failure is not None:
        boot_failed(runtime.metrics, read.lease, read.boot_failure)
    return json_response(200, {"lease": read.lease.wire()})
