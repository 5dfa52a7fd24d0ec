"""The webhooks routes' rules (`scheduler/webhooks/registry.py`, `callers/access.py`): whose webhook a caller may
add, see and remove in each AUTH_MODE, the URL checked when it is added, the secret made once and never listed.
On moto, dynalite and in memory."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from scheduler.callers.model import SHARED_SECRET, Caller, Role
from scheduler.errors import Conflict, Forbidden, InvalidRequest, NotFound, NotLeaseOwner, OtherOwnersWebhook
from scheduler.events.model import EventType
from scheduler.store.port import WebhooksPort
from scheduler.store.webhooks import WebhookStore
from scheduler.webhooks.model import MAX_PER_OWNER, WebhookRequest
from scheduler.webhooks.registry import add_webhook, list_webhooks, remove_webhook

from ..builders import NOW

SERVICE = Caller("anim", Role.SERVICE, ("anim-service", "anim-batch"))
OTHER_SERVICE = Caller("render", Role.SERVICE, ("render-service",))
OPERATOR = Caller("ops", Role.OPERATOR)
VIEWER = Caller("audit", Role.VIEWER)
URL = "https://hooks.example.com/in"


def resolve(host: str, port: int) -> Sequence[str]:
    return {"hooks.example.com": ["93.184.215.14"], "inside.example.com": ["10.0.0.5"]}.get(host, [])


def add(
    store: WebhooksPort, caller: Caller, owner: str | None = None, header: str | None = None, url: str = URL
) -> str:
    request = WebhookRequest.parse({"url": url, **({"owner_id": owner} if owner else {})})
    record, secret = add_webhook(request, caller, header, store, lambda: NOW, allow_loopback=False, resolver=resolve)
    assert secret.startswith("whsec_")
    return record.webhook_id


def owners(store: WebhooksPort, caller: Caller, requested: str | None = None) -> list[str]:
    return [record.owner_id for record in list_webhooks(caller, requested, store)]


def test_a_service_adds_for_its_first_owner_by_default(webhooks: WebhooksPort) -> None:
    add(webhooks, SERVICE)

    assert owners(webhooks, OPERATOR) == ["anim-service"]


def test_a_service_adds_for_another_of_its_owners_when_it_names_it(webhooks: WebhooksPort) -> None:
    add(webhooks, SERVICE, "anim-batch")

    assert owners(webhooks, SERVICE, "anim-batch") == ["anim-batch"]


def test_a_service_may_not_add_for_another_callers_owner(webhooks: WebhooksPort) -> None:
    with pytest.raises(NotLeaseOwner):
        add(webhooks, SERVICE, "render-service")


def test_a_viewer_adds_none(webhooks: WebhooksPort) -> None:
    with pytest.raises(Forbidden):
        add(webhooks, VIEWER, "anim-service")


def test_an_operator_adds_for_any_owner_it_names(webhooks: WebhooksPort) -> None:
    add(webhooks, OPERATOR, "render-service")

    assert owners(webhooks, OPERATOR) == ["render-service"]


def test_an_operator_without_owners_must_name_one(webhooks: WebhooksPort) -> None:
    with pytest.raises(InvalidRequest, match="owner_id"):
        add(webhooks, OPERATOR)


def test_in_secret_mode_the_owner_is_named_and_asserted_by_x_lease_owner(webhooks: WebhooksPort) -> None:
    with pytest.raises(InvalidRequest, match="owner_id: Field required"):
        add(webhooks, SHARED_SECRET, header="anim-service")
    with pytest.raises(NotLeaseOwner):
        add(webhooks, SHARED_SECRET, "anim-service")

    add(webhooks, SHARED_SECRET, "anim-service", header="anim-service")
    assert owners(webhooks, SHARED_SECRET) == ["anim-service"]


def test_a_url_that_is_no_safe_target_is_refused_naming_why(webhooks: WebhooksPort) -> None:
    with pytest.raises(InvalidRequest) as refused:
        add(webhooks, SERVICE, url="https://inside.example.com/hook")

    why = "inside.example.com, which resolves to 10.0.0.5, is a private address"
    assert refused.value.details == {"problems": [{"field": "url", "problem": why}]}
    assert owners(webhooks, OPERATOR) == []


def test_an_owner_has_at_most_its_share_of_webhooks(webhooks: WebhooksPort) -> None:
    for _ in range(MAX_PER_OWNER):
        add(webhooks, SERVICE)

    with pytest.raises(Conflict, match="remove one first"):
        add(webhooks, SERVICE)


def test_a_service_sees_its_owners_webhooks_only(webhooks: WebhooksPort) -> None:
    add(webhooks, SERVICE)
    add(webhooks, OTHER_SERVICE)

    assert owners(webhooks, SERVICE) == ["anim-service"]
    assert sorted(owners(webhooks, VIEWER)) == ["anim-service", "render-service"]
    with pytest.raises(NotLeaseOwner):
        owners(webhooks, SERVICE, "render-service")


def test_the_listing_shows_no_secret(webhooks: WebhooksPort) -> None:
    add(webhooks, SERVICE)

    (shown,) = [record.wire() for record in list_webhooks(OPERATOR, None, webhooks)]
    assert set(shown) == {"id", "url", "events", "owner_id", "created_at", "created_by"}
    assert shown["events"] == [kind.value for kind in EventType] and shown["created_by"] == "anim"


def test_a_service_removes_its_owners_webhook(webhooks: WebhooksPort) -> None:
    webhook_id = add(webhooks, SERVICE)

    remove_webhook(SERVICE, webhook_id, None, webhooks)

    assert webhooks.get(webhook_id) is None


def test_another_owners_webhook_does_not_exist_to_a_service(webhooks: WebhooksPort) -> None:
    webhook_id = add(webhooks, OTHER_SERVICE)

    with pytest.raises(OtherOwnersWebhook, match=f"webhook {webhook_id} not found"):
        remove_webhook(SERVICE, webhook_id, None, webhooks)
    assert webhooks.get(webhook_id) is not None


def test_a_viewer_removes_none(webhooks: WebhooksPort) -> None:
    webhook_id = add(webhooks, SERVICE)

    with pytest.raises(Forbidden):
        remove_webhook(VIEWER, webhook_id, None, webhooks)


def test_in_secret_mode_removing_needs_the_webhooks_owner_in_x_lease_owner(webhooks: WebhooksPort) -> None:
    webhook_id = add(webhooks, SHARED_SECRET, "anim-service", header="anim-service")

    with pytest.raises(NotLeaseOwner):
        remove_webhook(SHARED_SECRET, webhook_id, "someone-else", webhooks)
    remove_webhook(SHARED_SECRET, webhook_id, "anim-service", webhooks)
    assert webhooks.get(webhook_id) is None


@pytest.mark.parametrize("raw", ["wh_" + "0" * 32, "not-a-webhook", "wh_" + "Z" * 32])
def test_an_unknown_webhook_is_not_found(webhooks: WebhooksPort, raw: str) -> None:
    with pytest.raises(NotFound):
        remove_webhook(OPERATOR, raw, None, webhooks)


def test_the_events_asked_for_are_the_ones_taken_in_their_order() -> None:
    request = WebhookRequest.parse({"url": URL, "events": ["lease.failed", "lease.ready"]})

    assert request.events == ("lease.ready", "lease.failed")


def test_an_unknown_event_type_is_refused_naming_it() -> None:
    with pytest.raises(InvalidRequest) as refused:
        WebhookRequest.parse({"url": URL, "events": ["lease.ready", "lease.exploded"]})

    (problem,) = refused.value.details["problems"]  # type: ignore[index]
    assert problem["field"] == "events.1" and "'lease.expiring'" in problem["problem"]


@pytest.mark.dynamodb_only("what the owner index projects is DynamoDB's")
def test_the_owner_index_holds_no_secret(webhooks: WebhookStore) -> None:
    add(webhooks, SERVICE)

    items = webhooks.client.query(
        TableName=webhooks.table_name,
        IndexName="by-owner",
        KeyConditionExpression="owner_id = :o",
        ExpressionAttributeValues={":o": {"S": "anim-service"}},
    )["Items"]
    assert len(items) == 1 and "secret" not in items[0]
