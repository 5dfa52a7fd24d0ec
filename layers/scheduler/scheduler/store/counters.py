"""Lease counters: how many live leases each provider and each owner holds, for caps and quotas.

A counter item (`counter` = "provider#<name>" or "owner#<owner_id>", `leases` = N) is only ever
changed inside the same DynamoDB transaction as the lease that takes or gives back the slot, so
200 concurrent acquires against a cap of 10 make exactly 10 leases. The lease item records which
counters it holds (`held_counters`), so whatever ends it gives back exactly those.

Every change also bumps the counter's `version`, so the reconciler's repair can prove that no lease
took or gave back a slot between two of its passes (a value alone cannot: +1 then -1 reads the same).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from scheduler.store.items import number_attr, string_attr


@dataclass(frozen=True)
class Limit:
    """At most `maximum` live leases may hold `counter`."""

    counter: str
    maximum: int | None  # None: counted, never refused

    @classmethod
    def for_provider(cls, provider: str, maximum: int | None) -> Limit:
        """The cap on one provider's live leases."""
        return cls(f"provider#{provider}", maximum)

    @classmethod
    def for_owner(cls, owner_id: str, maximum: int) -> Limit:
        """The quota on one owner's live leases."""
        return cls(f"owner#{owner_id}", maximum)


class LimitReached(Exception):
    """Taking the slot would break the limit."""

    def __init__(self, limit: Limit) -> None:
        super().__init__(limit.counter)
        self.limit = limit


@dataclass(frozen=True)
class CounterState:
    """A counter as stored: its value, its version, and what the last repair pass suspected of it."""

    leases: int = 0
    version: int = 0
    suspect_version: int | None = None
    suspect_expected: int | None = None
    suspect_at: int | None = None

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> CounterState:
        """Read a counter item (absent attributes: 0 and None)."""

        def number(name: str) -> int | None:
            value = item.get(name, {}).get("N")
            return None if value is None else int(value)

        return cls(
            leases=number("leases") or 0,
            version=number("version") or 0,
            suspect_version=number("suspect_version"),
            suspect_expected=number("suspect_expected"),
            suspect_at=number("suspect_at"),
        )


def at_version(version: int) -> tuple[str, dict[str, str], dict[str, Any]]:
    """A condition (with its names and values) that the counter is still at `version`."""
    if version == 0:
        return "attribute_not_exists(#version)", {"#version": "version"}, {}
    return "#version = :version", {"#version": "version"}, {":version": number_attr(version)}


def take(table: str, limit: Limit) -> dict[str, Any]:
    """A transaction item taking one slot of `limit`, refused when it is full."""
    update: dict[str, Any] = {
        "TableName": table,
        "Key": {"counter": string_attr(limit.counter)},
        "UpdateExpression": "ADD leases :one, #version :one",
        "ExpressionAttributeNames": {"#version": "version"},
        "ExpressionAttributeValues": {":one": number_attr(1)},
    }
    if limit.maximum is not None:
        update["ConditionExpression"] = "attribute_not_exists(leases) OR leases < :maximum"
        update["ExpressionAttributeValues"][":maximum"] = number_attr(limit.maximum)
    return {"Update": update}


def give_back(table: str, counter: str) -> dict[str, Any]:
    """A transaction item giving one slot back (unconditional: the reconciler repairs any drift)."""
    return {
        "Update": {
            "TableName": table,
            "Key": {"counter": string_attr(counter)},
            "UpdateExpression": "ADD leases :minus_one, #version :one",
            "ExpressionAttributeNames": {"#version": "version"},
            "ExpressionAttributeValues": {":minus_one": number_attr(-1), ":one": number_attr(1)},
        }
    }


def held_set(counters: Iterable[str]) -> dict[str, Any] | None:
    """The `held_counters` attribute value (a string set), or None when the lease holds none."""
    values = sorted(set(counters))
    return {"SS": values} if values else None


def held_by(item: dict[str, Any]) -> tuple[str, ...]:
    """The counters a lease item holds."""
    return tuple(sorted(item.get("held_counters", {}).get("SS", [])))


def expected_counts(held: Iterable[tuple[str, ...]]) -> Counter[str]:
    """What every counter should read, from the counters the live leases hold."""
    counts: Counter[str] = Counter()
    for counters in held:
        counts.update(counters)
    return counts
