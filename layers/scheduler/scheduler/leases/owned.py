"""The access rules (`scheduler.callers.access`) applied to the leases the store holds: which lease a caller
may read or change, and which owners a listing covers.

A service caller's other-owner lease is refused as `OtherOwnersLease`: to it, word for word the 404 of a lease
that does not exist (the edge logs and counts the refusal).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.callers.access import LeaseAction, Owners, check_owner_header, lease_access, refuse_change
from scheduler.models import Lease, ListFilter

if TYPE_CHECKING:
    from scheduler.leases.context import Context


def readable_lease(ctx: Context, action: LeaseAction, lease_id: str, header: str | None) -> Lease:
    """The lease, once the caller may do `action` to it (`X-Lease-Owner` is the `header` sent); LeaseNotFound,
    OtherOwnersLease, NotLeaseOwner or Forbidden otherwise."""
    lease = ctx.store.get(lease_id)
    lease_access(ctx.caller, action, lease_id, lease.owner_id, header)
    return lease


def write_owner(ctx: Context, action: LeaseAction, lease_id: str, header: str | None) -> str | None:
    """The owner a renew's or release's conditional write holds the lease to (its OWNER guard).

    `secret` mode: the `X-Lease-Owner` sent, which that guard checks in the same write, as before (no read).
    Otherwise the lease's own owner, once the caller was found to act for it: one strongly consistent read
    first, so that another owner's lease is "not found" to a service whatever its status (the write's own
    refusal would tell a released lease from a busy one). A viewer is refused before anything is read.
    """
    caller = ctx.caller
    if caller.asserted:
        return header
    check_owner_header(caller, header)
    refuse_change(caller)
    return readable_lease(ctx, action, lease_id, header).owner_id


def live_page(ctx: Context, query: ListFilter, owners: Owners) -> tuple[list[Lease], str | None]:
    """One page of the live listing of `owners` (None: every owner), as `query` filters and pages it."""
    if owners is not None and len(owners) == 1 and query.owner_id in (None, owners[0]):
        return ctx.store.list_live(query._replace(owner_id=owners[0]), ctx.clock())
    return ctx.store.list_live(query, ctx.clock(), owners)
