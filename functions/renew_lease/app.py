"""POST /v1/lease/{lease_id}/renew — extend a lease."""

from typing import Any

from scheduler.api.http import HttpRequest, Response, http_endpoint, json_response
from scheduler.errors import BudgetExceeded
from scheduler.leases.renew import renew
from scheduler.models import RenewRequest
from scheduler.observability.log import Logger
from scheduler.observability.metrics import budget_refused
from scheduler.runtime import Runtime

logger = Logger()
runtime = Runtime.from_environment().warm("store")


@logger.inject_lambda_context(clear_state=True, log_event=False)
@http_endpoint
def lambda_handler(request: HttpRequest, context: Any) -> Response:
    """Set expires_at = now + ttl_seconds (the lease's own ttl when the body has none)."""
    renewal = RenewRequest.parse(request.json_body(required=False))
    lease_id = request.lease_id()
    owner = request.header("X-Lease-Owner")
    logger.append_keys(lease_id=lease_id, owner_id=owner)
    try:
        lease = renew(runtime.context(None, request.caller), lease_id, owner, renewal.ttl_seconds)
    except BudgetExceeded as refused:
        budget_refused(runtime.metrics, refused)
        raise
    return json_response(200, {"lease": lease.wire()})
