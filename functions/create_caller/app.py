"""POST /v1/callers — add a caller to the registry (operators only); its token, in token mode, shown this once."""

from typing import Any

from scheduler.api.http import HttpRequest, Response, http_endpoint, json_response
from scheduler.callers.access import require_operator
from scheduler.callers.registry import CallerRequest, add_caller
from scheduler.observability.log import Logger
from scheduler.runtime import Runtime

logger = Logger()
runtime = Runtime.from_environment().warm("callers")


@logger.inject_lambda_context(clear_state=True, log_event=False)
@http_endpoint
def lambda_handler(request: HttpRequest, context: Any) -> Response:
    """Check the operator, parse the caller, add it, answer 201 (never logging the token)."""
    require_operator(request.caller)
    body = CallerRequest.parse(request.json_body())
    record, token = add_caller(body, request.caller, runtime.callers, runtime.settings.auth_mode, runtime.clock)
    logger.info(
        "caller added", extra={"caller_name": record.name, "role": record.role.value, "by": request.caller.name}
    )
    return json_response(201, {"caller": record.wire(), **({"token": token} if token else {})})
