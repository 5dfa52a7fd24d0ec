"""GET /v1/leases — one page of live leases."""

from typing import Any

from scheduler.api.http import HttpRequest, Response, http_endpoint, json_response
from scheduler.leases.reads import list_live
from scheduler.models import ListFilter
from scheduler.observability.log import Logger
from scheduler.runtime import Runtime

logger = Logger()
runtime = Runtime.from_environment().warm("store")


@logger.inject_lambda_context(clear_state=True, log_event=False)
@http_endpoint
def lambda_handler(request: HttpRequest, context: Any) -> Response:
    """Filter by owner (a service: its own only), kind or provider; page with limit and next_token."""
    query = ListFilter.parse(request.queryStringParameters)
    page, next_token = list_live(runtime.context(None, request.caller), query)
    return json_response(200, {"leases": [lease.wire() for lease in page], "next_token": next_token})
