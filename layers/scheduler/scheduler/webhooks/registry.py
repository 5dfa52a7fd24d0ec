"""The webhooks routes' use cases: add one (its target checked, its secret made and shown once), list, remove;
each under the caller rules of `scheduler.callers.access`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.callers.access import readable_owners, webhook_owner, webhook_removal
from scheduler.errors import Conflict, NotFound, invalid_input
from scheduler.webhooks import targets
from scheduler.webhooks.model import MAX_PER_OWNER, WebhookRecord, WebhookRequest, new_webhook_id, webhook_id
from scheduler.webhooks.signing import new_secret

if TYPE_CHECKING:
    from scheduler.callers.model import Caller
    from scheduler.clock import Clock
    from scheduler.store.port import WebhooksPort


def add_webhook(
    request: WebhookRequest,
    caller: Caller,
    header: str | None,
    store: WebhooksPort,
    clock: Clock,
    *,
    allow_loopback: bool,
    resolver: targets.Resolve = targets.resolve,
) -> tuple[WebhookRecord, str]:
    """The webhook, added, and its secret (to show once). A URL that is no safe target is a 400 naming why."""
    owner = webhook_owner(caller, request.owner_id, header)
    try:
        targets.check(request.url, allow_loopback, resolver)
    except targets.TargetRefused as refused:
        raise invalid_input("request body", [{"field": "url", "problem": str(refused)}]) from None
    if len(store.by_owner(owner)) >= MAX_PER_OWNER:
        raise Conflict(f"owner {owner} has {MAX_PER_OWNER} webhooks, the most one owner may have: remove one first")
    record = WebhookRecord(
        webhook_id=new_webhook_id(),
        url=request.url,
        events=request.events,
        owner_id=owner,
        created_at=int(clock().timestamp()),
        created_by=caller.name,
    )
    secret = new_secret()
    store.create(record, secret)
    return record, secret


def list_webhooks(caller: Caller, requested: str | None, store: WebhooksPort) -> list[WebhookRecord]:
    """The webhooks the caller may see: of the owner named, else of its owners (a service) or every owner."""
    owners = readable_owners(caller, requested)
    if owners is None:
        return store.every()
    return [record for owner in owners for record in store.by_owner(owner)]


def remove_webhook(caller: Caller, raw_id: str, header: str | None, store: WebhooksPort) -> WebhookRecord:
    """Remove a webhook the caller may remove; NotFound when there is none (to it)."""
    chosen = webhook_id(raw_id)
    record = store.find(chosen) if chosen else None
    if record is None:
        raise NotFound(f"webhook {raw_id[:64]} not found")
    webhook_removal(caller, record.webhook_id, record.owner_id, header)
    store.delete(record.webhook_id)
    return record
