"""DELETE /v1/lease/{lease_id} — release a lease and remove its worker (a queued lease: cancel it)."""

from typing import Any

from aws_lambda_powertools import Logger

from scheduler.api.http import HttpRequest, Response, http_endpoint, json_response
from scheduler.leases.release import release
from scheduler.observability.metrics import count, lease_ended
from scheduler.runtime import Runtime, request_deadline

logger = Logger()
runtime = Runtime.from_environment().warm("store", "providers")  # drivers load on first release


@logger.inject_lambda_context(clear_state=True, log_event=False)
@http_endpoint
def lambda_handler(request: HttpRequest, context: Any) -> Response:
    """Check the caller's access, release, answer 204."""
    lease_id = request.lease_id()
    owner = request.header("X-Lease-Owner")
    logger.append_keys(lease_id=lease_id, owner_id=owner)
    lease = release(runtime.context(request_deadline(context), request.caller), lease_id, owner)
    if lease.queued_at is not None and lease.admitted_at is None:
        count(runtime.metrics, "QueueCancelled", kind=lease.kind.value)  # no worker was ever made for it
    else:
        lease_ended(runtime.metrics, lease)
    logger.info("lease released", extra={"provider": lease.provider, "correlation_id": lease.correlation_id})
    return json_response(204)
