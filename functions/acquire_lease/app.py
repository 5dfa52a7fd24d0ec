"""POST /v1/lease — acquire a worker (idempotently when the caller sends an Idempotency-Key)."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from scheduler import leases
from scheduler.api.http import HttpRequest, Response, http_endpoint, json_response
from scheduler.errors import SchedulerError
from scheduler.models import LeaseRequest
from scheduler.observability import emit
from scheduler.runtime import idempotent_acquire, lease_limits, lease_store, provider_registry, request_deadline

logger = Logger()
metrics = Metrics()
store = lease_store()
providers = provider_registry()
providers.warm()  # the acquire path always calls a provider: pay its SDK import at init, not per request
limits = lease_limits()
acquire_once = idempotent_acquire(store, providers, limits)


@logger.inject_lambda_context(clear_state=True, log_event=False)
@metrics.log_metrics
@http_endpoint
def lambda_handler(request: HttpRequest, context: Any) -> Response:
    """Parse the LeaseRequest, acquire (provider calls end before API Gateway's 30 s), answer 201."""
    deadline = request_deadline(context)
    lease_request = request.json_body(LeaseRequest)
    lease_id = leases.new_lease_id()
    logger.append_keys(
        lease_id=lease_id,
        **{key: value for key in ("owner_id", "correlation_id") if (value := getattr(lease_request, key))},
    )
    key = request.header("Idempotency-Key")
    try:
        if key is not None:
            body = acquire_once(key, lease_request, lease_id, context, deadline)
        else:
            lease = leases.acquire(lease_request, store, providers, limits, lease_id=lease_id, deadline=deadline)
            body = {"lease": lease.wire(), "provider": lease.provider}
    except SchedulerError as error:
        if error.details and "lease_id" in error.details:  # a lease row was recorded, then failed
            emit("LeaseFailed", MetricUnit.Count, 1, provider="none", kind=lease_request.kind.value)
        raise
    emit("LeaseAcquired", MetricUnit.Count, 1, provider=str(body["provider"]), kind=lease_request.kind.value)
    logger.info("lease acquired", extra={"lease_id": body["lease"]["lease_id"], "provider": body["provider"]})
    return json_response(201, body)
