"""POST /v1/webhooks — send an owner's lease events to a URL (checked to be a safe target); the signing secret is
shown this once."""

from typing import Any

from aws_lambda_powertools import Logger

from scheduler.api.http import HttpRequest, Response, http_endpoint, json_response
from scheduler.runtime import Runtime
from scheduler.webhooks.model import WebhookRequest
from scheduler.webhooks.registry import add_webhook

logger = Logger()
runtime = Runtime.from_environment().warm("webhooks")


@logger.inject_lambda_context(clear_state=True, log_event=False)
@http_endpoint
def lambda_handler(request: HttpRequest, context: Any) -> Response:
    """Parse the webhook, decide its owner, check its URL, add it, answer 201 (never logging the secret)."""
    body = WebhookRequest.parse(request.json_body())
    record, secret = add_webhook(
        body,
        request.caller,
        request.header("X-Lease-Owner"),
        runtime.webhooks,
        runtime.clock,
        allow_loopback=runtime.settings.webhook_allow_loopback,
    )
    logger.info(
        "webhook added",
        extra={"webhook_id": record.webhook_id, "owner_id": record.owner_id, "by": request.caller.name},
    )
    return json_response(201, {"webhook": record.wire(), "secret": secret})
