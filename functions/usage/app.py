"""GET /v1/usage — what leases cost per owner over a range of UTC days."""

from typing import Any

from scheduler.api.http import HttpRequest, Response, http_endpoint, json_response
from scheduler.leases.usage import usage_report
from scheduler.observability.log import Logger
from scheduler.request_models import UsageQuery
from scheduler.runtime import Runtime

logger = Logger()
runtime = Runtime.from_environment().warm("store")


@logger.inject_lambda_context(clear_state=True, log_event=False)
@http_endpoint
def lambda_handler(request: HttpRequest, context: Any) -> Response:
    """Totals of the leases that ended on the days `since`..`until` (a service: of its owners only), grouped by
    owner, kind or provider."""
    query = UsageQuery.parse(request.queryStringParameters)
    return json_response(200, usage_report(runtime.context(None, request.caller), query))
