"""GET /v1/webhooks[?owner_id=] — the webhooks the caller may see, never their secrets."""

from typing import Any

from aws_lambda_powertools import Logger

from scheduler.api.http import HttpRequest, Response, http_endpoint, json_response
from scheduler.runtime import Runtime
from scheduler.webhooks.model import WebhooksQuery
from scheduler.webhooks.registry import list_webhooks

logger = Logger()
runtime = Runtime.from_environment().warm("webhooks")


@logger.inject_lambda_context(clear_state=True, log_event=False)
@http_endpoint
def lambda_handler(request: HttpRequest, context: Any) -> Response:
    """Parse the query, list what the caller may see."""
    query = WebhooksQuery.parse(request.queryStringParameters)
    found = list_webhooks(request.caller, query.owner_id, runtime.webhooks)
    return json_response(200, {"webhooks": [record.wire() for record in found]})
