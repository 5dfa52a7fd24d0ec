"""Counters for atomic limits: how many live leases each provider and each owner holds (caps, quotas).

A counter item (`counter` = "provider#<name>" or "owner#<owner_id>", `leases` = N) is only ever
changed inside the same DynamoDB transaction as the lease that takes or gives back the slot, so
200 concurrent acquires against a cap of 10 make exactly 10 leases. The lease item records which
counters it holds (`held_counters`), so whatever ends it gives back exactly those.

Every change also bumps the counter's `version`, so the reconciler's repair can prove that no lease
took or gave back a slot between two of its passes (a value alone cannot: +1 then -1 reads the same).

A limit is a counter name, a maximum and the amount one lease takes (1 slot, or for the owner budgets
of `scheduler/budgets.py` an amount of micro-dollars): a weighed limit's held entry carries its amount
(`cost#<owner>@690000`), so whatever ends the lease gives back exactly what it reserved. Each budget
counter has a firm twin (`firm#cost#<owner>`) holding only the amounts of workers kept (see budgets.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from scheduler.errors import StoreUnavailable
from scheduler.store.client import TableClient
from scheduler.store.items import epoch, number_attr, string_attr

WEIGHT_MARK = "@"
COST_PREFIX = "cost#"  # an owner's summed USD/h of live leases, in micro-dollars
SPEND_PREFIX = "spend#"  # an owner's spend on one UTC day, in micro-dollars
FIRM_PREFIX = "firm#"  # a budget counter's twin holding only known amounts: "firm#cost#<owner>"
WEIGHED_PREFIXES = (COST_PREFIX, SPEND_PREFIX, FIRM_PREFIX)  # counters whose held entries carry an amount


def firm(counter: str) -> str:
    """The firm twin of a budget counter."""
    return f"{FIRM_PREFIX}{counter}"


def budget_of(counter: str) -> str:
    """The budget counter a counter is (itself, or the one a firm twin belongs to)."""
    return counter.removeprefix(FIRM_PREFIX)


def repairable(counter: str) -> bool:
    """Whether the live leases' holds say what a counter should read: not a day's spend (nor its firm twin),
    which holds what ended leases billed too."""
    return not budget_of(counter).startswith(SPEND_PREFIX)


def parse_held(entry: str) -> tuple[str, int]:
    """A `held_counters` entry as (counter, amount held)."""
    if entry.startswith(WEIGHED_PREFIXES):
        counter, mark, amount = entry.rpartition(WEIGHT_MARK)
        if mark and amount.isdigit():
            return counter, int(amount)
    return entry, 1


class Limit(NamedTuple):
    """At most `maximum` may be held of `counter`; one lease takes `amount`."""

    counter: str
    maximum: int | None  # None: counted, never refused
    amount: int = 1
    weighed: bool = False  # the held entry records the amount (budgets); else one slot
    expires: int | None = None  # epoch seconds after which the counter is of no use (a past day's spend)

    @property
    def held(self) -> str:
        """The lease's `held_counters` entry for this limit."""
        return f"{self.counter}{WEIGHT_MARK}{self.amount}" if self.weighed else self.counter

    @classmethod
    def for_provider(cls, provider: str, maximum: int | None) -> Limit:
        """The cap on one provider's live leases."""
        return cls(f"provider#{provider}", maximum)

    @classmethod
    def for_owner(cls, owner_id: str, maximum: int) -> Limit:
        """The quota on one owner's live leases."""
        return cls(f"owner#{owner_id}", maximum)


class CounterState(NamedTuple):
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
    """A transaction item taking `limit.amount` of `limit`, refused when that would pass its maximum."""
    update: dict[str, Any] = {
        "TableName": table,
        "Key": {"counter": string_attr(limit.counter)},
        "UpdateExpression": "ADD leases :amount, #version :one",
        "ExpressionAttributeNames": {"#version": "version"},
        "ExpressionAttributeValues": {":amount": number_attr(limit.amount), ":one": number_attr(1)},
    }
    if limit.maximum is not None:
        room = limit.maximum - limit.amount
        # A counter without a row holds nothing: it takes the amount only when the amount alone fits the
        # maximum (a cap of 0, or one lease dearer than a whole budget, is refused on fresh counters too).
        fresh_fits = "attribute_not_exists(leases) OR " if room >= 0 else ""
        update["ConditionExpression"] = f"{fresh_fits}leases <= :room"
        update["ExpressionAttributeValues"][":room"] = number_attr(room)
    if limit.expires is not None:  # TTL drops it once its day is over (the reconciler scans this table)
        update["UpdateExpression"] += " SET #ttl = :expires"
        update["ExpressionAttributeNames"]["#ttl"] = "ttl"
        update["ExpressionAttributeValues"][":expires"] = number_attr(limit.expires)
    return {"Update": update}


def give_back(table: str, counter: str, amount: int | None = None) -> dict[str, Any]:
    """A transaction item giving back what a held entry holds, or `amount` of its counter (unconditional:
    the reconciler repairs any drift)."""
    name, held = parse_held(counter)
    return {
        "Update": {
            "TableName": table,
            "Key": {"counter": string_attr(name)},
            "UpdateExpression": "ADD leases :minus_one, #version :one",
            "ExpressionAttributeNames": {"#version": "version"},
            "ExpressionAttributeValues": {
                ":minus_one": number_attr(-(held if amount is None else amount)),
                ":one": number_attr(1),
            },
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
        for entry in counters:
            name, amount = parse_held(entry)
            counts[name] += amount
    return counts


class CounterBook(TableClient):
    """Reading the counters table, and the reconciler's two-pass repair of a counter that drifted."""

    def counter_values(self) -> dict[str, int]:
        """Every counter as stored (a small table: one item per provider and per owner)."""
        return {name: state.leases for name, state in self.counter_states().items()}

    def counter_states(self) -> dict[str, CounterState]:
        """Every counter with its version, read strongly consistently (a repair must see the latest)."""
        request = {"TableName": self._counters(), "ConsistentRead": True}
        return {
            item["counter"]["S"]: CounterState.from_item(item)
            for page in self._pages("Scan", request)
            for item in page.get("Items", [])
        }

    def counters(self, names: Sequence[str]) -> dict[str, int]:
        """The named counters (BatchGetItem: the cost does not grow with the number of owners).

        DynamoDB may answer part of a batch and hand back the rest as UnprocessedKeys (throttling,
        the 16 MB limit); those are asked for again with backoff, never read as 0.
        """
        if not names:
            return {}
        table = self._counters()
        found: dict[str, int] = {}
        pending: dict[str, Any] = {
            table: {"Keys": [{"counter": string_attr(name)} for name in dict.fromkeys(names)], "ConsistentRead": True}
        }
        attempts = self._retry.attempts()
        while True:
            response = self._call("BatchGetItem", RequestItems=pending)
            for item in response.get("Responses", {}).get(table, []):
                found[item["counter"]["S"]] = int(item.get("leases", {}).get("N", "0"))
            pending = {name: keys for name, keys in (response.get("UnprocessedKeys") or {}).items() if keys.get("Keys")}
            if not pending:
                return {name: found.get(name, 0) for name in names}
            if not attempts.wait():
                raise StoreUnavailable("the lease store kept part of a batch read unprocessed; try again shortly")

    def suspect_counter(self, counter: str, version: int, expected: int, now: datetime) -> bool:
        """Note on the counter that the live index disagrees with it at `version`; False if it changed since."""
        return self._update_at_version(
            counter,
            version,
            "SET suspect_version = :seen, suspect_expected = :expected, suspect_at = :now",
            {":seen": number_attr(version), ":expected": number_attr(expected), ":now": number_attr(epoch(now))},
        )

    def repair_counter(self, counter: str, version: int, actual: int) -> bool:
        """Set a drifted counter to `actual` unless it changed since `version`; True if repaired."""
        return self._update_at_version(
            counter,
            version,
            "SET leases = :actual, #version = :next REMOVE suspect_version, suspect_expected, suspect_at",
            {":actual": number_attr(actual), ":next": number_attr(version + 1)},
        )

    def _update_at_version(self, counter: str, version: int, update: str, values: dict[str, Any]) -> bool:
        condition, names, version_values = at_version(version)
        try:
            self._call(
                "UpdateItem",
                TableName=self._counters(),
                Key={"counter": string_attr(counter)},
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues={**version_values, **values},
            )
        except self._errors.ConditionalCheckFailedException:
            return False
        return True
