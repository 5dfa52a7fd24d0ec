"""POST /v1/callers/{name}/rotate — a new token for a caller (operators only, token mode); the previous ones keep
working `grace_seconds` more (0: they stop now)."""

from typing import Any

from scheduler.api.http import HttpRequest, Response, http_endpoint, json_response
from scheduler.callers.access import require_operator
from scheduler.callers.registry import RotateRequest, caller_name, rotate_token
from scheduler.observability.log import Logger
from scheduler.runtime import Runtime

logger = Logger()
runtime = Runtime.from_environment().warm("callers")


@logger.inject_lambda_context(clear_state=True, log_event=False)
@http_endpoint
def lambda_handler(request: HttpRequest, context: Any) -> Response:
    """Check the operator, parse the grace, rotate, answer 201 with the new token (shown this once)."""
    require_operator(request.caller)
    name = caller_name(request.path_parameter("name"))
    body = RotateRequest.parse(request.json_body())
    token = rotate_token(name, body.grace_seconds, runtime.callers, runtime.settings.auth_mode, runtime.clock)
    logger.info("caller token rotated", extra={"caller_name": name, "grace_seconds": body.grace_seconds})
    return json_response(201, {"token": token})
