"""DELETE /v1/lease/{lease_id} — release a lease and remove its worker."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics

from scheduler import leases
from scheduler.api.http import HttpRequest, Response, http_endpoint, json_response
from scheduler.observability import lease_ended
from scheduler.runtime import lease_store, provider_registry, request_deadline

logger = Logger()
metrics = Metrics()
store = lease_store()
providers = provider_registry()  # drivers load on first release, keeping this function's init light


@logger.inject_lambda_context(clear_state=True, log_event=False)
@metrics.log_metrics
@http_endpoint
def lambda_handler(request: HttpRequest, context: Any) -> Response:
    """Check the owner, release, answer 204."""
    lease_id = request.lease_id()
    logger.append_keys(lease_id=lease_id, owner_id=request.header("X-Lease-Owner"))
    owner = request.header("X-Lease-Owner")
    lease = leases.release(lease_id, owner, store, providers, deadline=request_deadline(context))
    lease_ended(lease)
    logger.info("lease released", extra={"provider": lease.provider, "correlation_id": lease.correlation_id})
    return json_response(204)
