"""The inputs with many rules: the acquire body (`POST /v1/lease`) and the usage query (`GET /v1/usage`),
validated by hand (`scheduler.inputs`) by the contract's rules (`scheduler.wire`, from `openapi.yaml`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from enum import StrEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, NamedTuple, Self

from scheduler import wire
from scheduler.inputs import Fields, fields_of
from scheduler.models import GpuClass, WorkerKind

if TYPE_CHECKING:
    from scheduler.wire import TextRule

# The body's pattern admits "" as well, the absent owner; a value it refuses is told an owner's own pattern.
_NOT_AN_OWNER = f"String should match pattern '^{wire.LIST_LEASES_QUERY['owner_id']['pattern']}$'"


class LeaseRequest(NamedTuple):
    """Body of `POST /v1/lease` (`_replace` gives a changed copy)."""

    kind: WorkerKind
    gpu: GpuClass = GpuClass(wire.LEASE_REQUEST["gpu"]["default"])
    ttl_seconds: int = wire.LEASE_REQUEST["ttl_seconds"]["default"]
    owner_id: str | None = None
    correlation_id: str | None = None
    region: str | None = None
    max_cost_per_hour: float | None = None  # USD per hour
    queue_seconds: int = wire.LEASE_REQUEST["queue_seconds"]["default"]  # 0: answer at once (no queue)
    priority: int = wire.LEASE_REQUEST["priority"]["default"]
    preemptible: bool = wire.LEASE_REQUEST["preemptible"]["default"]
    env: Mapping[str, str] = MappingProxyType({})

    @classmethod
    def parse(cls, data: object) -> Self:
        """From the decoded JSON body; InvalidRequest naming each problem otherwise. A blank label is
        an absent one."""
        rules = wire.LEASE_REQUEST
        body = fields_of(data, "request body", rules)
        kind = body.required_choice("kind", rules["kind"], WorkerKind)
        gpu = body.choice_or("gpu", rules["gpu"], GpuClass)
        ttl_seconds = body.strict_int_or("ttl_seconds", rules["ttl_seconds"])
        owner_id = body.text("owner_id", rules["owner_id"], blank_is_absent=True, mismatch=_NOT_AN_OWNER)
        correlation_id = body.text("correlation_id", rules["correlation_id"], blank_is_absent=True)
        region = body.text("region", rules["region"], blank_is_absent=True)
        max_cost_per_hour = body.amount("max_cost_per_hour", rules["max_cost_per_hour"])
        queue_seconds = body.strict_int_or("queue_seconds", rules["queue_seconds"])
        priority = body.strict_int_or("priority", rules["priority"])
        preemptible = body.boolean_or("preemptible", rules["preemptible"])
        env = body.text_map("env", rules["env"], mismatch="String should not contain NUL")
        body.check("request body")
        assert kind is not None  # noqa: S101 - check() refused a missing kind  # nosec B101
        return cls(
            kind=kind,
            gpu=gpu,
            ttl_seconds=ttl_seconds,
            owner_id=owner_id,
            correlation_id=correlation_id,
            region=region,
            max_cost_per_hour=max_cost_per_hour,
            queue_seconds=queue_seconds,
            priority=priority,
            preemptible=preemptible,
            env=env,
        )

    def as_json(self) -> dict[str, object]:
        """Every field as JSON values, defaults included, in declaration order: what an Idempotency-Key's
        stored request is compared by."""
        return {
            "kind": self.kind.value,
            "gpu": self.gpu.value,
            "ttl_seconds": self.ttl_seconds,
            "owner_id": self.owner_id,
            "correlation_id": self.correlation_id,
            "region": self.region,
            "max_cost_per_hour": self.max_cost_per_hour,
            "queue_seconds": self.queue_seconds,
            "priority": self.priority,
            "preemptible": self.preemptible,
            "env": dict(self.env),
        }


class UsageGrouping(StrEnum):
    OWNER = "owner"
    KIND = "kind"
    PROVIDER = "provider"


class UsageQuery(NamedTuple):
    """Query of `GET /v1/usage`: UTC days `since`..`until` (inclusive; default today), one owner or all."""

    owner_id: str | None = None
    since: str | None = None
    until: str | None = None
    group_by: UsageGrouping = UsageGrouping(wire.GET_USAGE_QUERY["group_by"]["default"])

    @classmethod
    def parse(cls, data: object) -> Self:
        """From the query string's parameters; InvalidRequest naming each problem otherwise."""
        rules = wire.GET_USAGE_QUERY
        query = fields_of(data, "query", rules)
        found = cls(
            owner_id=query.text("owner_id", rules["owner_id"]),
            since=_day(query, "since", rules["since"]),
            until=_day(query, "until", rules["until"]),
            group_by=query.choice_or("group_by", rules["group_by"], UsageGrouping),
        )
        query.check("query")
        return found


def _day(query: Fields, name: str, rule: TextRule) -> str | None:
    """A UTC day, YYYY-MM-DD by the rule's pattern (ASCII digits), that exists (2026-02-30 does not): the
    rule's `format: date`, which no pattern can say."""
    value = query.text(name, rule)
    if value is not None:
        try:
            date.fromisoformat(value)  # what the usage report reads it with
        except ValueError:
            query.problem(name, f"Value error, {name} must be a real day (YYYY-MM-DD)")
            return None
    return value
