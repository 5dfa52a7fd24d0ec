"""GET /v1/lease/{lease_id} — one lease, live or ended within the retention period."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics

from scheduler import leases
from scheduler.api.http import HttpRequest, Response, http_endpoint, json_response
from scheduler.runtime import lease_store

logger = Logger()
metrics = Metrics()
store = lease_store()


@logger.inject_lambda_context(clear_state=True, log_event=False)
@metrics.log_metrics
@http_endpoint
def lambda_handler(request: HttpRequest, context: Any) -> Response:
    """Answer 200 with the lease or 404."""
    lease_id = request.lease_id()
    logger.append_keys(lease_id=lease_id)
    return json_response(200, {"lease": leases.get(lease_id, store).wire()})
