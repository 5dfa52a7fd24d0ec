"""DELETE /v1/webhooks/{webhook_id} — remove a webhook; deliveries already queued for it are dropped."""

from typing import Any

from aws_lambda_powertools import Logger

from scheduler.api.http import HttpRequest, Response, http_endpoint, json_response
from scheduler.runtime import Runtime
from scheduler.webhooks.registry import remove_webhook

logger = Logger()
runtime = Runtime.from_environment().warm("webhooks")


@logger.inject_lambda_context(clear_state=True, log_event=False)
@http_endpoint
def lambda_handler(request: HttpRequest, context: Any) -> Response:
    """Check the caller may, remove, answer 204."""
    removed = remove_webhook(
        request.caller, request.path_parameter("webhook_id"), request.header("X-Lease-Owner"), runtime.webhooks
    )
    logger.info("webhook removed", extra={"webhook_id": removed.webhook_id, "owner_id": removed.owner_id})
    return json_response(204)
