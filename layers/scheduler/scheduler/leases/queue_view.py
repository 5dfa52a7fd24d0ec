"""Reading the queue in admission order (`GET /v1/queue`, and the position an acquire's 202 answers with).

The order is `scheduler.fairness`'s: priority, then the owners' weighted shares of the capacity each lease waits
for, then age — so it needs the live leases as well as the queued ones. What it costs: the queue index read
whole (one Query per shard, paged) and the live index (one Query per shard, paged, a projection of what the rules
look at), as an admission reads them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.budgets import budget_owner
from scheduler.callers.access import readable_owners
from scheduler.fairness import Running, Waiting, admission_order
from scheduler.models import Lease

if TYPE_CHECKING:
    from scheduler.api.queries import QueueQuery
    from scheduler.leases.context import Context
    from scheduler.store.queue_model import QueuedLease


def waiting(queued: QueuedLease) -> Waiting:
    """A queued lease as the rules see it."""
    lease = queued.lease
    return Waiting(lease.lease_id, budget_owner(lease.owner_id), lease.priority, queued.queued_epoch, queued.providers)


def ordered(ctx: Context, queued: list[QueuedLease] | None = None, running: list[Running] | None = None) -> list[Lease]:
    """Every queued lease in admission order, each with its `queue_position`."""
    found = list(ctx.store.queue.queued_leases()) if queued is None else queued
    if not found:
        return []
    live = list(ctx.store.queue.running_leases()) if running is None else running
    by_id = {item.lease.lease_id: item.lease for item in found}
    order = admission_order((waiting(item) for item in found), live, ctx.settings.policies)
    return [by_id[lease_id].replace(queue_position=index) for index, lease_id in enumerate(order, start=1)]


def position_of(ctx: Context, lease_id: str) -> int | None:
    """A queued lease's place in the admission order (None: not queued, or not yet visible in the queue index)."""
    return next((lease.queue_position for lease in ordered(ctx) if lease.lease_id == lease_id), None)


def queue_page(ctx: Context, query: QueueQuery) -> list[Lease]:
    """The first `query.limit` queued leases the caller may read (a service: its owners'), in admission order, each
    with its position in the whole queue."""
    owners = readable_owners(ctx.caller, query.owner_id)
    shown = [lease for lease in ordered(ctx) if owners is None or lease.owner_id in owners]
    return shown[: query.limit]
