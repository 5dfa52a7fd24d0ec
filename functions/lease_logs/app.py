"""GET /v1/lease/{lease_id}/logs — the lease's worker output as text (Docker: stdout and stderr; RunPod: pod logs).

The driver (and the Docker SDK) loads only when the first logs are read.
"""

from typing import Any

from scheduler.api.http import HttpRequest, Response, http_endpoint, text_response
from scheduler.api.queries import LogsQuery
from scheduler.leases.logs import worker_logs
from scheduler.observability.log import Logger
from scheduler.runtime import Runtime, request_deadline

logger = Logger()
runtime = Runtime.from_environment().warm("store")


@logger.inject_lambda_context(clear_state=True, log_event=False)
@http_endpoint
def lambda_handler(request: HttpRequest, context: Any) -> Response:
    """Check the caller's access, read the last `tail` lines (since `since`), answer text/plain."""
    lease_id = request.lease_id()
    owner = request.header("X-Lease-Owner")
    logger.append_keys(lease_id=lease_id, owner_id=owner)
    query = LogsQuery.parse(request.queryStringParameters)
    ctx = runtime.context(request_deadline(context), request.caller)
    output = worker_logs(ctx, lease_id, owner, query.log_query(), timestamps=query.timestamps)
    headers = {"X-Lease-Status": output.lease.status.value, "X-Log-Lines": str(output.logs.lines)}
    if output.logs.truncated:
        headers["X-Logs-Truncated"] = "true"
    return text_response(200, output.logs.text, headers)
