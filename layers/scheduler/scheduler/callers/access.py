"""What a caller may do: every access rule of the API, as pure functions of the Caller and what the request
names (openapi.yaml and the README's "Who is calling" say the same).

`token` and `iam` modes (the caller was established by the service):
- a `service` caller acts for its owners only: an acquire without `owner_id` gets its first owner, another
  owner is 403; any other owner's lease is 404 to it, exactly as a lease that does not exist; a list, bulk
  release or usage report naming another owner is 403, and without `owner_id` covers its owners;
- a `viewer` reads everything and changes nothing (403 on any change);
- an `operator` reads and changes everything, and may act for any owner;
- `X-Lease-Owner` is not needed; when sent it must be one of the caller's owners (an operator's: any);
- Idempotency-Keys are the caller's own: another caller's key never replays its lease.

`secret` mode (`Caller.asserted`): exactly the rules before callers existed — owners are whatever the request
says, an owned lease's renew, release and logs need `X-Lease-Owner` equal to its owner (`owner_may_act`), a
bulk release needs `X-Lease-Owner` equal to `owner_id`, and reads are open.

Each check raises the domain error the edge answers (Forbidden/NotLeaseOwner 403, LeaseNotFound 404,
InvalidRequest 400) or returns what the use case goes on with.
"""

from __future__ import annotations

from enum import StrEnum

from scheduler.callers.model import Caller, Role
from scheduler.errors import Forbidden, NotLeaseOwner, OtherOwnersLease, OtherOwnersWebhook, invalid_input
from scheduler.lifecycle import owner_may_act

Owners = tuple[str, ...] | None  # the owners a list, bulk release or usage report covers; None: every owner


class LeaseAction(StrEnum):
    """What a request does to one lease."""

    READ = "read"  # GET /v1/lease/{id}
    LOGS = "logs"  # GET /v1/lease/{id}/logs
    RENEW = "renew"  # POST /v1/lease/{id}/renew
    RELEASE = "release"  # DELETE /v1/lease/{id}

    @property
    def changes(self) -> bool:
        return self in (LeaseAction.RENEW, LeaseAction.RELEASE)


def acts_for_any_owner(caller: Caller) -> bool:
    """An operator may act for any owner; a viewer reads any owner's (its `owners` are only a default)."""
    return caller.role in (Role.OPERATOR, Role.VIEWER)


def acquire_owner(caller: Caller, requested: str | None) -> str | None:
    """The owner a new lease gets: the one the body names, else the caller's first (secret mode: the body's)."""
    if caller.asserted:
        return requested
    refuse_change(caller)
    if requested is None:
        return caller.default_owner
    if caller.role is Role.SERVICE and requested not in caller.owners:
        raise NotLeaseOwner(f"caller {caller.name} may not act for owner {requested}")
    return requested


def check_owner_header(caller: Caller, header: str | None) -> None:
    """`X-Lease-Owner`, when sent, must be one of the caller's owners (not needed outside secret mode)."""
    if caller.asserted or header is None or acts_for_any_owner(caller):
        return
    if header not in caller.owners:
        raise NotLeaseOwner(f"X-Lease-Owner {header} is not an owner caller {caller.name} acts for")


def lease_access(
    caller: Caller, action: LeaseAction, lease_id: str, lease_owner: str | None, header: str | None
) -> str | None:
    """Whether `caller` may do `action` to the lease owned by `lease_owner`, which it has read; raises if not.

    Returns the owner the store's conditional write is to hold the lease to (its OWNER guard): in secret mode
    the `X-Lease-Owner` sent, as before; otherwise the lease's own owner, which the caller was found to act for.
    """
    if caller.asserted:
        if action is not LeaseAction.READ and not owner_may_act(lease_owner, header):
            raise NotLeaseOwner(f"lease {lease_id} belongs to another owner (X-Lease-Owner must name it)")
        return header
    check_owner_header(caller, header)
    if action.changes:
        refuse_change(caller)
    if caller.role is Role.SERVICE and lease_owner not in caller.owners:
        # Not "forbidden": to a service another owner's lease does not exist (its id reveals nothing).
        raise OtherOwnersLease(lease_id, f"another owner's lease: caller {caller.name} does not act for its owner")
    return lease_owner


def readable_owners(caller: Caller, requested: str | None) -> Owners:
    """The owners `GET /v1/leases` and `GET /v1/usage` cover: the one named, else (a service) its own owners or
    (anyone else) every owner."""
    if caller.asserted or acts_for_any_owner(caller):
        return None if requested is None else (requested,)
    if requested is None:
        return caller.owners
    if requested not in caller.owners:
        raise NotLeaseOwner(f"caller {caller.name} may not read owner {requested}'s leases or usage")
    return (requested,)


def releasable_owners(caller: Caller, requested: str | None, header: str | None) -> tuple[str, ...]:
    """The owners whose leases `DELETE /v1/leases` releases (never every owner by omission)."""
    if caller.asserted:
        if requested is None:
            raise invalid_input("query", [{"field": "owner_id", "problem": "Field required"}])
        if header != requested:
            raise NotLeaseOwner("X-Lease-Owner must equal owner_id: only an owner may release all its leases")
        return (requested,)
    check_owner_header(caller, header)
    refuse_change(caller)
    if requested is not None:
        if caller.role is Role.SERVICE and requested not in caller.owners:
            raise NotLeaseOwner(f"caller {caller.name} may not release owner {requested}'s leases")
        return (requested,)
    if not caller.owners:
        problem = f"Field required: operator {caller.name} has no owners of its own, so name the owner"
        raise invalid_input("query", [{"field": "owner_id", "problem": problem}])
    return caller.owners


def webhook_owner(caller: Caller, requested: str | None, header: str | None) -> str:
    """The owner a new webhook is for (`POST /v1/webhooks`): the one the body names, else the caller's first. In
    secret mode the body must name it and `X-Lease-Owner` equal it, as for a bulk release: only an owner may send
    its leases' events somewhere."""
    if caller.asserted:
        if requested is None:
            raise invalid_input("request body", [{"field": "owner_id", "problem": "Field required"}])
        if header != requested:
            raise NotLeaseOwner("X-Lease-Owner must equal owner_id: only an owner may add its webhooks")
        return requested
    check_owner_header(caller, header)
    refuse_change(caller)
    owner = requested or caller.default_owner
    if owner is None:
        problem = f"Field required: operator {caller.name} has no owners of its own, so name the owner"
        raise invalid_input("request body", [{"field": "owner_id", "problem": problem}])
    if caller.role is Role.SERVICE and owner not in caller.owners:
        raise NotLeaseOwner(f"caller {caller.name} may not add webhooks for owner {owner}")
    return owner


def webhook_removal(caller: Caller, webhook_id: str, webhook_owner: str, header: str | None) -> None:
    """Whether `caller` may remove a webhook of `webhook_owner` (`DELETE /v1/webhooks/{id}`); raises if not. To a
    service another owner's webhook does not exist."""
    if caller.asserted:
        if header != webhook_owner:
            raise NotLeaseOwner(f"webhook {webhook_id} belongs to another owner (X-Lease-Owner must name it)")
        return
    check_owner_header(caller, header)
    refuse_change(caller)
    if caller.role is Role.SERVICE and webhook_owner not in caller.owners:
        raise OtherOwnersWebhook(f"webhook {webhook_id} not found")


def refuse_change(caller: Caller) -> None:
    """A viewer changes nothing."""
    if caller.role is Role.VIEWER and not caller.asserted:
        raise Forbidden(f"caller {caller.name} is a viewer: it reads, and changes nothing")


def idempotency_key(caller: Caller, key: str) -> str:
    """The key an Idempotency-Key is remembered under: the caller's own (secret mode: the key as sent, shared
    by every holder of the secret, as before)."""
    return key if caller.asserted else f"{caller.name}#{key}"


def require_operator(caller: Caller) -> None:
    """The callers registry is managed by operators only; in secret mode by nobody (the shared secret is no
    one's identity, and a caller made with it would outlive the switch to token or iam mode)."""
    if caller.asserted:
        raise Forbidden("AUTH_MODE=secret has no callers: the registry is managed in token or iam mode")
    if caller.role is not Role.OPERATOR:
        raise Forbidden(f"caller {caller.name} is a {caller.role.value}: only an operator manages callers")


def audit_name(caller: Caller) -> str:
    """What a lease's created_by / ended_by records for this caller."""
    return caller.name
