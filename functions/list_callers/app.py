"""GET /v1/callers — every caller of the registry (operators only), without tokens or their hashes."""

from typing import Any

from scheduler.api.http import HttpRequest, Response, http_endpoint, json_response
from scheduler.callers.access import require_operator
from scheduler.inputs import fields_of
from scheduler.observability.log import Logger
from scheduler.runtime import Runtime

logger = Logger()
runtime = Runtime.from_environment().warm("callers")


@logger.inject_lambda_context(clear_state=True, log_event=False)
@http_endpoint
def lambda_handler(request: HttpRequest, context: Any) -> Response:
    """Check the operator, list by name."""
    require_operator(request.caller)
    fields_of(request.queryStringParameters, "query", ()).check("query")  # it takes no parameter
    return json_response(200, {"callers": [record.wire() for record in runtime.callers.list()]})
