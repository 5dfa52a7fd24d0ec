"""POST /v1/lease — acquire a worker (idempotently when the caller sends an Idempotency-Key); 202 with the lease
`queued` when nothing can serve it now and it may wait (`queue_seconds`)."""

from typing import Any

from scheduler.api.http import HttpRequest, Response, http_endpoint, json_response
from scheduler.errors import BudgetExceeded
from scheduler.leases.acquire import acquire, new_lease_id, owned_request
from scheduler.leases.outcomes import AcquireOutcome, NotAcquired, Queued, Replayed
from scheduler.observability.log import Logger
from scheduler.observability.metrics import budget_refused, count, worker_ready
from scheduler.request_models import LeaseRequest
from scheduler.runtime import Runtime, request_deadline

logger = Logger()
# The acquire path always calls a provider: its SDK is imported at init, not on the first request.
runtime = Runtime.from_environment().warm("store", "providers", "limits", "idempotency", drivers=True)


@logger.inject_lambda_context(clear_state=True, log_event=False)
@http_endpoint
def lambda_handler(request: HttpRequest, context: Any) -> Response:
    """Parse the LeaseRequest, decide its owner, acquire (provider calls end before API Gateway's 30 s), answer 201."""
    deadline = request_deadline(context)
    ctx = runtime.context(deadline, request.caller)
    body = owned_request(request.caller, LeaseRequest.parse(request.json_body()), request.header("X-Lease-Owner"))
    logger.append_keys(**{key: value for key in ("owner_id", "correlation_id") if (value := getattr(body, key))})
    lease_id = new_lease_id()

    def fresh() -> AcquireOutcome:
        logger.append_keys(lease_id=lease_id)  # only a lease made now has this id
        return acquire(ctx, body, lease_id)

    key = request.header("Idempotency-Key")  # the caller's own: another caller's never replays its lease
    if key is None:
        outcome = fresh()
    else:
        outcome = runtime.idempotency(key, body, fresh, context, deadline, caller=request.caller)
    if isinstance(outcome, NotAcquired):
        if outcome.ended:
            count(runtime.metrics, "LeaseFailed", provider="none", kind=body.kind.value)
        if isinstance(outcome.error, BudgetExceeded):
            budget_refused(runtime.metrics, outcome.error)
        raise outcome.error
    if isinstance(outcome, Replayed):
        logger.append_keys(lease_id=outcome.lease_id)
        logger.info("lease answered again for a repeated Idempotency-Key", extra={"lease_id": outcome.lease_id})
        return json_response(202 if outcome.waiting else 201, outcome.body())
    if isinstance(outcome, Queued):
        count(runtime.metrics, "LeaseQueued", kind=body.kind.value)
        logger.info(
            "lease queued",
            extra={"lease_id": outcome.lease.lease_id, "position": outcome.lease.queue_position},
        )
        return json_response(202, outcome.body())
    else:
        count(runtime.metrics, "LeaseAcquired", provider=outcome.lease.provider, kind=body.kind.value)
        worker_ready(runtime.metrics, outcome.lease)  # a worker usable at once (its lease reads `ready`)
        logger.info("lease acquired", extra={"lease_id": outcome.lease.lease_id, "provider": outcome.lease.provider})
    return json_response(201, outcome.body())
