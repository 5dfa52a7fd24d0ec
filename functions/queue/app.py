"""GET /v1/queue — the queued leases in admission order, each with its position (a service: its owners')."""

from typing import Any

from aws_lambda_powertools import Logger

from scheduler.api.http import HttpRequest, Response, http_endpoint, json_response
from scheduler.api.queries import QueueQuery
from scheduler.leases.queue_view import queue_page
from scheduler.runtime import Runtime

logger = Logger()
runtime = Runtime.from_environment().warm("store")


@logger.inject_lambda_context(clear_state=True, log_event=False)
@http_endpoint
def lambda_handler(request: HttpRequest, context: Any) -> Response:
    """Read the queue and the live leases, order the queue as the admissions would, answer the caller's part."""
    query = QueueQuery.parse(request.queryStringParameters)
    leases = queue_page(runtime.context(None, request.caller), query)
    return json_response(200, {"queue": [lease.wire() for lease in leases]})
