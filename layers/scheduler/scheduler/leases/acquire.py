"""Acquire: record a pending lease, provision a worker on the first provider that serves, activate it
(`leases/provisioning.py`); or, when nothing can serve it now and it may wait, queue it (`leases/queueing.py`).
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import TYPE_CHECKING

from scheduler import policy
from scheduler.callers.access import acquire_owner, check_owner_header
from scheduler.clock import expiry_after
from scheduler.errors import InvalidRequest, NoCapacity
from scheduler.leases import queueing
from scheduler.leases.outcomes import AcquireOutcome, NotAcquired
from scheduler.leases.provisioning import Slots, provision
from scheduler.lifecycle import LeaseStatus
from scheduler.models import Lease
from scheduler.providers.base import Provider

if TYPE_CHECKING:  # only the acquire path builds one
    from scheduler.callers.model import Caller
    from scheduler.leases.context import Context
    from scheduler.request_models import LeaseRequest


def new_lease_id() -> str:
    """A fresh lease id (a UUID: unguessable, and safe in container and pod names)."""
    return str(uuid.uuid4())


def owned_request(caller: Caller, request: LeaseRequest, header: str | None = None) -> LeaseRequest:
    """The request with the owner its lease gets (`callers.access.acquire_owner`: the one it names, else the
    caller's first; secret mode: as named), once the caller may acquire for it (`header`: the X-Lease-Owner
    sent). What an Idempotency-Key's request is compared by, so a key means one owner's lease."""
    check_owner_header(caller, header)
    owner = acquire_owner(caller, request.owner_id)
    return request if owner == request.owner_id else request._replace(owner_id=owner)


def acquire(ctx: Context, request: LeaseRequest, lease_id: str | None = None) -> AcquireOutcome:
    """The lease, active on the first provider in policy order that served, or why there is none; or, when nothing
    can serve it now and the request may wait (`queue_seconds`), the lease `queued`. Its owner is the one the
    caller may acquire for (`owned_request`; Forbidden raised otherwise), and its quota, budgets and priority
    limit that owner's; it records the caller as its created_by.

    `lease_id` names the lease up front (so the caller's log lines carry it); default a new UUID.
    Every provider call ends by the context's deadline; a worker whose removal could not be confirmed by
    then leaves the lease `pending` for the reconciler.
    """
    request = owned_request(ctx.caller, request)
    queueing.check_priority(ctx.settings.owner_policies, request)
    deadline = ctx.deadline
    candidates = policy.candidates_for(ctx.providers.in_order(), request)
    if not candidates:
        return NotAcquired(NoCapacity(f"no configured provider offers kind={request.kind} gpu={request.gpu}"))
    unknown_region = _unknown_region(request, candidates)
    if unknown_region is not None:
        return NotAcquired(unknown_region)
    now = ctx.clock()
    created = now.replace(microsecond=0)
    draft = Lease(
        lease_id=lease_id or new_lease_id(),
        provider=candidates[0].name,
        kind=request.kind,
        gpu=request.gpu,
        status=LeaseStatus.PENDING,
        created_at=created,
        expires_at=expiry_after(now, request.ttl_seconds),
        owner_id=request.owner_id,
        correlation_id=request.correlation_id,
        region=request.region,
        ttl_seconds=request.ttl_seconds,
        max_cost_per_hour=request.max_cost_per_hour,
        created_by=ctx.caller.name,
        priority=request.priority,
        preemptible=request.preemptible,
        queued_until=created + timedelta(seconds=request.queue_seconds) if request.queue_seconds else None,
    )
    slots = Slots(ctx.store, ctx.limits, draft)
    recorded = slots.record_pending(candidates, request, deadline, queueing.yielded(ctx, request, candidates))
    if isinstance(recorded, NotAcquired):
        if request.queue_seconds and queueing.may_wait(recorded.error):
            return queueing.enqueue(ctx, draft, request, candidates, recorded.error)
        return recorded
    requeue = queueing.requeuer(ctx, recorded[0], request, candidates, slots) if request.queue_seconds else None
    outcome = provision(ctx, request, slots, recorded, requeue)
    if isinstance(outcome, NotAcquired) and outcome.requeued:
        return queueing.queued(ctx, ctx.store.get(draft.lease_id))
    return outcome


def _unknown_region(request: LeaseRequest, candidates: list[Provider]) -> InvalidRequest | None:
    """A 400 when the request names a region that no candidate with regions knows (None: fine)."""
    if request.region is None:
        return None
    known = [provider.regions() for provider in candidates]
    if all(regions is None for regions in known):
        return None  # no candidate places by region: the region is a label, as it always was
    names = sorted({region for regions in known if regions for region in regions})
    if request.region in names:
        return None
    return InvalidRequest(
        f"unknown region {request.region!r}; known regions: {', '.join(names)}",
        details={"problems": [{"field": "region", "problem": f"must be one of {', '.join(names)}"}]},
    )
