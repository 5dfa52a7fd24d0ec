"""POST /v1/lease — acquire a worker."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from scheduler import leases
from scheduler.api.http import HttpRequest, Response, http_endpoint, json_response
from scheduler.models import LeaseRequest
from scheduler.runtime import lease_store, provider_registry

logger = Logger()
metrics = Metrics()
store = lease_store()
providers = provider_registry()
providers.warm()  # the acquire path always calls a provider: pay its SDK import at init, not per request


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
@http_endpoint
def lambda_handler(request: HttpRequest, context: Any) -> Response:
    """Parse the LeaseRequest, acquire, answer 201 with the lease and its provider."""
    lease_request = request.json_body(LeaseRequest)
    logger.append_keys(
        **{key: value for key in ("owner_id", "correlation_id") if (value := getattr(lease_request, key))}
    )
    lease = leases.acquire(lease_request, store, providers)
    metrics.add_dimension("provider", lease.provider)
    metrics.add_metric(name="LeaseAcquired", unit=MetricUnit.Count, value=1)
    logger.info("lease acquired", extra={"lease_id": lease.lease_id, "provider": lease.provider})
    return json_response(201, {"lease": lease.wire(), "provider": lease.provider})
