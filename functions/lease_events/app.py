"""GET /v1/lease/{lease_id}/events[?after=N&limit=M] — the lease's lifecycle events in order, with their actor and
reason (its audit trail), as long as the lease is readable."""

from typing import Any

from aws_lambda_powertools import Logger

from scheduler.api.http import HttpRequest, Response, http_endpoint, json_response
from scheduler.events.reads import EventsQuery, lease_events
from scheduler.runtime import Runtime

logger = Logger()
runtime = Runtime.from_environment().warm("store", "history")


@logger.inject_lambda_context(clear_state=True, log_event=False)
@http_endpoint
def lambda_handler(request: HttpRequest, context: Any) -> Response:
    """Answer 200 with a page of the lease's events, or 404."""
    lease_id = request.lease_id()
    logger.append_keys(lease_id=lease_id)
    query = EventsQuery.parse(request.queryStringParameters)
    events, after = lease_events(
        runtime.store, runtime.history, request.caller, lease_id, request.header("X-Lease-Owner"), query
    )
    return json_response(200, {"events": events, "next_after": after})
