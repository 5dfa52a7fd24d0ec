"""The webhooks registry (table WEBHOOKS_TABLE, key `webhook_id`; index `by-owner`): each owner's webhooks,
with their signing secrets.

The index projects no secret: what lists webhooks (the route, and the events function handing each event to
its owner's webhooks) reads the index and never a secret; only a delivery reads one, by the webhook's key.
"""

from __future__ import annotations

from typing import Any

from scheduler.store.client import TableClient
from scheduler.store.items import Item, number_attr, string_attr
from scheduler.webhooks.model import WebhookRecord

OWNER_INDEX = "by-owner"
_SHOWN = "webhook_id, #url, events, owner_id, created_epoch, created_by"


def record_of(item: Item) -> WebhookRecord:
    return WebhookRecord(
        webhook_id=item["webhook_id"]["S"],
        url=item["url"]["S"],
        events=tuple(entry["S"] for entry in item.get("events", {}).get("L", [])),
        owner_id=item["owner_id"]["S"],
        created_at=int(item["created_epoch"]["N"]),
        created_by=item["created_by"]["S"],
    )


class WebhookStore(TableClient):
    """The registry on its DynamoDB table."""

    def create(self, record: WebhookRecord, secret: str) -> None:
        """Add a webhook (its id is new: a clash is our bug, raised as ConditionalCheckFailedException)."""
        item: Item = {
            "webhook_id": string_attr(record.webhook_id),
            "url": string_attr(record.url),
            "events": {"L": [string_attr(name) for name in record.events]},
            "owner_id": string_attr(record.owner_id),
            "created_epoch": number_attr(record.created_at),
            "created_by": string_attr(record.created_by),
            "secret": string_attr(secret),
        }
        self._call(
            "PutItem", TableName=self.table_name, Item=item, ConditionExpression="attribute_not_exists(webhook_id)"
        )

    def get(self, webhook_id: str) -> tuple[WebhookRecord, str] | None:
        """The webhook and its secret (None: there is none of that id)."""
        response = self._call("GetItem", TableName=self.table_name, Key=_key(webhook_id), ConsistentRead=True)
        item = response.get("Item")
        return None if not item else (record_of(item), item["secret"]["S"])

    def find(self, webhook_id: str) -> WebhookRecord | None:
        """The webhook without its secret (what its removal needs): the shown attributes only, as the removing
        function's policy requires (`dynamodb:Attributes`)."""
        response = self._call(
            "GetItem",
            TableName=self.table_name,
            Key=_key(webhook_id),
            ConsistentRead=True,
            ProjectionExpression=_SHOWN,
            ExpressionAttributeNames={"#url": "url"},
        )
        item = response.get("Item")
        return record_of(item) if item else None

    def by_owner(self, owner_id: str) -> list[WebhookRecord]:
        """The owner's webhooks (from the index: no secret is read)."""
        request = {
            "TableName": self.table_name,
            "IndexName": OWNER_INDEX,
            "KeyConditionExpression": "owner_id = :owner",
            "ExpressionAttributeValues": {":owner": string_attr(owner_id)},
        }
        return [record_of(item) for page in self._pages("Query", request) for item in page.get("Items", [])]

    def every(self) -> list[WebhookRecord]:
        """Every webhook (a Scan of the shown attributes: a registry holds hundreds, not millions)."""
        request = {
            "TableName": self.table_name,
            "ProjectionExpression": _SHOWN,
            "ExpressionAttributeNames": {"#url": "url"},
        }
        items = [item for page in self._pages("Scan", request) for item in page.get("Items", [])]
        return sorted((record_of(item) for item in items), key=lambda record: (record.owner_id, record.created_at))

    def delete(self, webhook_id: str) -> None:
        self._call("DeleteItem", TableName=self.table_name, Key=_key(webhook_id))


def _key(webhook_id: str) -> dict[str, Any]:
    return {"webhook_id": string_attr(webhook_id)}
