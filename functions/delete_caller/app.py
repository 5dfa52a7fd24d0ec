"""DELETE /v1/callers/{name} — remove a caller (operators only): every token of it stops working within
AUTH_CACHE_SECONDS (API Gateway's authorizer cache; in iam mode each function's principal lookup)."""

from typing import Any

from scheduler.api.http import HttpRequest, Response, http_endpoint, json_response
from scheduler.callers.access import require_operator
from scheduler.callers.registry import caller_name
from scheduler.observability.log import Logger
from scheduler.runtime import Runtime

logger = Logger()
runtime = Runtime.from_environment().warm("callers")


@logger.inject_lambda_context(clear_state=True, log_event=False)
@http_endpoint
def lambda_handler(request: HttpRequest, context: Any) -> Response:
    """Check the operator, revoke every token and the principal, remove the caller, answer 204."""
    require_operator(request.caller)
    removed = runtime.callers.revoke(caller_name(request.path_parameter("name")))
    logger.info("caller removed", extra={"caller_name": removed.name, "role": removed.role.value})
    return json_response(204)
