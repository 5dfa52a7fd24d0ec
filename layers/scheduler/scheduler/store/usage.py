"""What leases cost, per owner and UTC day: the usage table, kept 400 days after the leases themselves expire.

One item per owner, day, kind and provider (`owner_key` "owner#<id>", `day_key` "<YYYY-MM-DD>#<kind>#<provider>"),
added to when a lease that had a worker ends (in the same transaction when the end is one): leases,
lease_seconds and cost_micros (whole micro-dollars, as the budgets count). A lease counts on the UTC day
it ended. `ttl` lets DynamoDB drop the item 400 days after its day.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from scheduler.costs import micros, spend_micros, utc_day
from scheduler.models import Lease
from scheduler.store.client import TableClient
from scheduler.store.items import epoch, number_attr, string_attr

USAGE_RETENTION_DAYS = 400
_NO_OWNER = ""


class UsageRow(NamedTuple):
    """One stored total: an owner's leases of one kind on one provider, ended on one day."""

    owner_id: str | None
    day: str
    kind: str
    provider: str
    leases: int
    lease_seconds: int
    cost_micros: int


def owner_key(owner_id: str | None) -> str:
    return f"owner#{owner_id or _NO_OWNER}"


class UsageBook(TableClient):
    """Adding an ended lease to its owner's day, and reading the days back."""

    usage_table: str | None = None

    def _usage_update(self, lease: Lease, seconds: int, now: datetime) -> dict[str, Any] | None:
        """The transaction item adding `lease` (ended now after `seconds` billed) to its owner's day."""
        if not self.usage_table or lease.cost_per_hour is None:
            return None
        day = utc_day(epoch(now))
        expires = datetime.strptime(day, "%Y-%m-%d") + timedelta(days=USAGE_RETENTION_DAYS + 1)
        names = {"#n": "leases", "#s": "lease_seconds", "#c": "cost_micros", "#d": "day", "#k": "kind"}
        names.update({"#p": "provider", "#t": "ttl"})
        values: dict[str, Any] = {
            ":one": number_attr(1),
            ":s": number_attr(seconds),
            ":c": number_attr(spend_micros(micros(lease.cost_per_hour), seconds)),
            ":d": string_attr(day),
            ":k": string_attr(lease.kind.value),
            ":p": string_attr(lease.provider),
            ":t": number_attr(int(expires.timestamp())),
        }
        update = "ADD #n :one, #s :s, #c :c SET #d = :d, #k = :k, #p = :p, #t = :t"
        if lease.owner_id is not None:
            names["#o"] = "owner_id"
            values[":o"] = string_attr(lease.owner_id)
            update += ", #o = :o"
        return {
            "Update": {
                "TableName": self.usage_table,
                "Key": {
                    "owner_key": string_attr(owner_key(lease.owner_id)),
                    "day_key": string_attr(f"{day}#{lease.kind.value}#{lease.provider}"),
                },
                "UpdateExpression": update,
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
            }
        }

    def _add_usage(self, update: dict[str, Any]) -> None:
        """Apply a usage item on its own (an end that was a single write)."""
        self._call("UpdateItem", **update["Update"])

    def usage_rows(self, owner_id: str | None, since: str, until: str) -> Iterator[UsageRow]:
        """Stored totals from day `since` to day `until` (inclusive), of one owner or of all."""
        if not self.usage_table or until < since:
            return  # DynamoDB refuses a BETWEEN whose upper bound is below its lower one
        low, high = string_attr(since), string_attr(f"{until}#\uffff")
        if owner_id is not None:
            request: dict[str, Any] = {
                "TableName": self.usage_table,
                "KeyConditionExpression": "owner_key = :o AND day_key BETWEEN :low AND :high",
                "ExpressionAttributeValues": {":o": string_attr(owner_key(owner_id)), ":low": low, ":high": high},
            }
            pages = self._pages("Query", request)
        else:
            request = {
                "TableName": self.usage_table,
                "FilterExpression": "day_key BETWEEN :low AND :high",
                "ExpressionAttributeValues": {":low": low, ":high": high},
            }
            pages = self._pages("Scan", request)
        for page in pages:
            for item in page.get("Items", []):
                yield _row(item)


def _row(item: dict[str, Any]) -> UsageRow:
    day, kind, provider = item["day_key"]["S"].split("#", 2)
    owner = item["owner_key"]["S"].removeprefix("owner#")
    return UsageRow(
        owner_id=owner or None,
        day=day,
        kind=kind,
        provider=provider,
        leases=int(item.get("leases", {}).get("N", "0")),
        lease_seconds=int(item.get("lease_seconds", {}).get("N", "0")),
        cost_micros=int(item.get("cost_micros", {}).get("N", "0")),
    )
