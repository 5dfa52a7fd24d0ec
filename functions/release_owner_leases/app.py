"""DELETE /v1/leases[?owner_id=X] — release every live lease of one owner (token and iam modes, without owner_id:
of the caller's own owners), a bounded batch per call."""

from typing import Any

from scheduler.api.http import HttpRequest, Response, error_status, http_endpoint, json_response
from scheduler.api.queries import OwnerReleaseQuery
from scheduler.leases.release_all import release_all
from scheduler.observability.log import Logger
from scheduler.observability.metrics import lease_ended
from scheduler.runtime import Runtime, request_deadline

logger = Logger()
runtime = Runtime.from_environment().warm("store", "providers")  # drivers load on first release


@logger.inject_lambda_context(clear_state=True, log_event=False)
@http_endpoint
def lambda_handler(request: HttpRequest, context: Any) -> Response:
    """Check the caller's access (secret mode: X-Lease-Owner must name the owner); answer what was released, what
    was not, and where to continue."""
    caller = request.caller
    query = OwnerReleaseQuery.parse(request.queryStringParameters, owner_required=caller.asserted)
    logger.append_keys(owner_id=query.owner_id)
    ctx = runtime.context(request_deadline(context), caller)
    outcome = release_all(ctx, query.owner_id, request.header("X-Lease-Owner"), next_token=query.next_token)
    for lease in outcome.released:
        lease_ended(runtime.metrics, lease)
    not_released = []
    for lease, error in outcome.not_released:
        _, code = error_status(error)
        not_released.append(
            {"lease_id": lease.lease_id, "status": lease.status.value, "code": code, "message": error.message}
        )
    logger.info(
        "owner's leases released",
        extra={
            "released": len(outcome.released),
            "not_released": len(not_released),
            "more": outcome.next_token is not None,
        },
    )
    body = {
        "released": [lease.wire() for lease in outcome.released],
        "not_released": not_released,
        "next_token": outcome.next_token,
    }
    return json_response(200, body)
