"""DynamoDB item encoding of leases: the wire fields, with times as epoch seconds."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from scheduler.models import GpuClass, Lease, LeaseStatus, WorkerKind

Item = dict[str, dict[str, Any]]


def epoch(value: datetime) -> int:
    return int(value.timestamp())


def from_epoch(value: str) -> datetime:
    return datetime.fromtimestamp(int(float(value)), UTC)


def string_attr(value: str | None) -> dict[str, Any]:
    return {"NULL": True} if value is None else {"S": value}


def number_attr(value: float | int) -> dict[str, str]:
    return {"N": str(value)}


def lease_from_item(item: Item) -> Lease:
    """Build the wire model from a DynamoDB item (table, index or stream image)."""

    def text(name: str) -> str | None:
        return item.get(name, {}).get("S")

    def number(name: str) -> str | None:
        return item.get(name, {}).get("N")

    released = number("released_epoch")
    cost = number("cost_per_hour")
    return Lease(
        lease_id=item["lease_id"]["S"],
        provider=item["provider"]["S"],
        kind=WorkerKind(item["kind"]["S"]),
        gpu=GpuClass(item["gpu"]["S"]),
        status=LeaseStatus(item["status"]["S"]),
        endpoint=text("endpoint"),
        created_at=from_epoch(item["created_epoch"]["N"]),
        expires_at=from_epoch(item["expires_epoch"]["N"]),
        released_at=from_epoch(released) if released else None,
        provider_token=text("provider_token"),
        owner_id=text("owner_id"),
        correlation_id=text("correlation_id"),
        region=text("region"),
        ttl_seconds=int(item["ttl_seconds"]["N"]),
        cost_per_hour=float(cost) if cost else None,
        failure_reason=text("failure_reason"),
    )
