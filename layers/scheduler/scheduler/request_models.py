"""The inputs with many rules: the acquire body (`POST /v1/lease`) and the usage query (`GET /v1/usage`),
validated by hand (`scheduler.inputs`) as strictly as the contract (`openapi.yaml`) describes them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date
from enum import StrEnum
from types import MappingProxyType
from typing import NamedTuple, Self

from scheduler.inputs import Fields, fields_of
from scheduler.models import (
    DEFAULT_TTL_SECONDS,
    MAX_COST_PER_HOUR,
    MAX_ENV_ENTRIES,
    MAX_ENV_VALUE_CHARS,
    MAX_LABEL_CHARS,
    MAX_TTL_SECONDS,
    MIN_COST_PER_HOUR,
    OWNER_ID,
    GpuClass,
    WorkerKind,
)

_ENV_KEY = re.compile(r"[A-Z_][A-Z0-9_]*")


class LeaseRequest(NamedTuple):
    """Body of `POST /v1/lease` (`_replace` gives a changed copy)."""

    kind: WorkerKind
    gpu: GpuClass = GpuClass.NONE
    ttl_seconds: int = DEFAULT_TTL_SECONDS
    owner_id: str | None = None
    correlation_id: str | None = None
    region: str | None = None
    max_cost_per_hour: float | None = None  # USD per hour, from one micro-dollar up
    env: Mapping[str, str] = MappingProxyType({})

    @classmethod
    def parse(cls, data: object) -> Self:
        """From the decoded JSON body; InvalidRequest naming each problem otherwise. A blank label is
        an absent one."""
        body = fields_of(data, "request body", cls._fields)
        kind = body.required_choice("kind", WorkerKind)
        gpu = body.choice_or("gpu", GpuClass, GpuClass.NONE)
        ttl_seconds = body.strict_int_or("ttl_seconds", DEFAULT_TTL_SECONDS, 1, MAX_TTL_SECONDS)
        owner_id = body.text("owner_id", max_length=MAX_LABEL_CHARS, pattern=OWNER_ID, blank_is_absent=True)
        correlation_id = body.text("correlation_id", max_length=MAX_LABEL_CHARS, blank_is_absent=True)
        region = body.text("region", max_length=MAX_LABEL_CHARS, blank_is_absent=True)
        max_cost_per_hour = body.amount("max_cost_per_hour", MIN_COST_PER_HOUR, MAX_COST_PER_HOUR)
        env = body.text_map(
            "env", max_entries=MAX_ENV_ENTRIES, key_pattern=_ENV_KEY, max_value_length=MAX_ENV_VALUE_CHARS
        )
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
            "env": dict(self.env),
        }


class UsageGrouping(StrEnum):
    OWNER = "owner"
    KIND = "kind"
    PROVIDER = "provider"


# ASCII digits only: `\d` takes any script's digits (٢٠٢٦), which `date.fromisoformat` refuses.
_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


class UsageQuery(NamedTuple):
    """Query of `GET /v1/usage`: UTC days `since`..`until` (inclusive; default today), one owner or all."""

    owner_id: str | None = None
    since: str | None = None
    until: str | None = None
    group_by: UsageGrouping = UsageGrouping.OWNER

    @classmethod
    def parse(cls, data: object) -> Self:
        """From the query string's parameters; InvalidRequest naming each problem otherwise."""
        query = fields_of(data, "query", cls._fields)
        found = cls(
            owner_id=query.text("owner_id", max_length=MAX_LABEL_CHARS, pattern=OWNER_ID),
            since=_day(query, "since"),
            until=_day(query, "until"),
            group_by=query.choice_or("group_by", UsageGrouping, UsageGrouping.OWNER),
        )
        query.check("query")
        return found


def _day(query: Fields, name: str) -> str | None:
    """A UTC day, YYYY-MM-DD, that exists (2026-02-30 does not)."""
    value = query.text(name, max_length=10, pattern=_DAY)
    if value is not None:
        try:
            date.fromisoformat(value)  # what the usage report reads it with
        except ValueError:
            query.problem(name, f"Value error, {name} must be a real day (YYYY-MM-DD)")
            return None
    return value
