"""The counters and usage tables, in memory: what `store/counters.py`, `prices.py` and `usage.py` keep in DynamoDB.

A counter is a dict of its attributes (`leases`, `version`, the repair marks, `ttl`), keyed by its name, in
one table with the prices seen and the API quotas, as in DynamoDB's counters table (so `counter_states`
sees the same items). Changes follow DynamoDB's: a take is refused when taking would pass the maximum (a
counter never written holds nothing), a give-back is unconditional (even below zero), and every change bumps
`version`. The callers hold the store's lock.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import NamedTuple

from scheduler.costs import micros, spend_micros, utc_day
from scheduler.models import Lease
from scheduler.store.counters import CounterState, Limit, parse_held
from scheduler.store.items import epoch
from scheduler.store.prices import PRICE_SEEN_SECONDS
from scheduler.store.usage import UsageRow, owner_key

Attributes = dict[str, int | str]
# DynamoDB refuses a transaction that names one item twice, or more than 100 items (a ValidationException).
MAX_TRANSACTION_ITEMS = 100
_REPAIR_MARKS = ("suspect_version", "suspect_expected", "suspect_at")


class Change(NamedTuple):
    """One counter's move in an atomic step: `amount` added (negative: given back), refused past `maximum`."""

    counter: str
    amount: int
    maximum: int | None = None
    expires: int | None = None

    @classmethod
    def take(cls, limit: Limit) -> Change:
        return cls(limit.counter, limit.amount, limit.maximum, limit.expires)

    @classmethod
    def give_back(cls, entry: str, amount: int | None = None) -> Change:
        """What a held entry holds comes back (or `amount` of its counter), as `counters.give_back`."""
        name, held = parse_held(entry)
        return cls(name, -(held if amount is None else amount))


class CounterTable:
    """The counters table: counters, the prices seen, the API quotas."""

    def __init__(self) -> None:
        self.items: dict[str, Attributes] = {}

    def transact(self, changes: Sequence[Change], other_items: int = 1) -> int | None:
        """Apply every change, or none: the position of the first refused, or None once applied.
        `other_items`: the transaction's items besides the counters (the lease, a usage row)."""
        names = [change.counter for change in changes]
        if len(set(names)) != len(names) or len(names) + other_items > MAX_TRANSACTION_ITEMS:
            raise ValueError(f"a transaction may touch an item once, 100 items at most: {names}")
        for index, change in enumerate(changes):
            if not self._fits(change):
                return index
        for change in changes:
            self._add(change)
        return None

    def value(self, name: str) -> int:
        return int(self.items.get(name, {}).get("leases", 0))

    def states(self) -> dict[str, CounterState]:
        return {name: _state(item) for name, item in self.items.items()}

    def update_at_version(self, name: str, version: int, changes: Attributes, removes: Sequence[str] = ()) -> bool:
        """Change a counter still at `version` (0: one that never had one, or does not exist)."""
        item = self.items.get(name, {})
        if int(item.get("version", 0)) != version or (version == 0 and "version" in item):
            return False
        updated = {key: value for key, value in item.items() if key not in removes}
        updated.update(changes)
        self.items[name] = updated
        return True

    def suspect(self, name: str, version: int, expected: int, now: datetime) -> bool:
        marks: Attributes = {"suspect_version": version, "suspect_expected": expected, "suspect_at": epoch(now)}
        return self.update_at_version(name, version, marks)

    def repair(self, name: str, version: int, actual: int) -> bool:
        return self.update_at_version(name, version, {"leases": actual, "version": version + 1}, _REPAIR_MARKS)

    def seen_prices(self, keys: Sequence[str], now: datetime) -> dict[str, int]:
        found: dict[str, int] = {}
        for key in dict.fromkeys(keys):
            item = self.items.get(key, {})
            if "price" in item and epoch(now) - int(item.get("seen_at", 0)) <= PRICE_SEEN_SECONDS:
                found[key] = int(item["price"])
        return found

    def note_price(self, key: str, price_micros: int, now: datetime) -> None:
        prices: Attributes = {"price": price_micros, "seen_at": epoch(now), "ttl": epoch(now) + 2 * PRICE_SEEN_SECONDS}
        self.items[key] = {**self.items.get(key, {}), **prices}

    def _fits(self, change: Change) -> bool:
        if change.maximum is None:
            return True
        # LeaseStore's condition: `leases <= :room`, and a counter never written takes the amount only when the
        # amount alone fits the maximum (`attribute_not_exists(leases)` is offered only when the room is >= 0).
        held = self.items.get(change.counter, {}).get("leases")
        room = change.maximum - change.amount
        return int(held) <= room if held is not None else room >= 0

    def _add(self, change: Change) -> None:
        item = dict(self.items.get(change.counter, {}))
        item["leases"] = int(item.get("leases", 0)) + change.amount
        item["version"] = int(item.get("version", 0)) + 1
        if change.expires is not None:  # a day's spend counter goes some days after its day (DynamoDB's TTL)
            item["ttl"] = change.expires
        self.items[change.counter] = item


def _state(item: Attributes) -> CounterState:
    def optional(name: str) -> int | None:
        return int(item[name]) if name in item else None

    return CounterState(
        leases=int(item.get("leases", 0)),
        version=int(item.get("version", 0)),
        suspect_version=optional("suspect_version"),
        suspect_expected=optional("suspect_expected"),
        suspect_at=optional("suspect_at"),
    )


class UsageTable:
    """What ended leases cost, per owner, UTC day, kind and provider: the totals of `store/usage.py`'s items
    (their TTL, 400 days, is DynamoDB's housekeeping; nothing here is dropped)."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], Attributes] = {}

    def add(self, lease: Lease, seconds: int, now: datetime) -> None:
        """Add a lease that had a worker, ended now after `seconds` billed, to its owner's day."""
        if lease.cost_per_hour is None:
            return
        day = utc_day(epoch(now))
        key = (owner_key(lease.owner_id), f"{day}#{lease.kind.value}#{lease.provider}")
        item = dict(self.items.get(key, {}))
        for name, amount in (
            ("leases", 1),
            ("lease_seconds", seconds),
            ("cost_micros", spend_micros(micros(lease.cost_per_hour), seconds)),
        ):
            item[name] = int(item.get(name, 0)) + amount
        self.items[key] = item

    def rows(self, owner_id: str | None, since: str, until: str) -> Iterator[UsageRow]:
        """The days `since`..`until` (inclusive) of one owner, or of all, as `UsageBook.usage_rows` reads them."""
        if until < since:
            return
        low, high = since, f"{until}#\uffff"
        for (owner, day_key), item in sorted(self.items.items()):
            if (owner_id is not None and owner != owner_key(owner_id)) or not low <= day_key <= high:
                continue
            day, kind, provider = day_key.split("#", 2)
            yield UsageRow(
                owner_id=owner.removeprefix("owner#") or None,
                day=day,
                kind=kind,
                provider=provider,
                leases=int(item.get("leases", 0)),
                lease_seconds=int(item.get("lease_seconds", 0)),
                cost_micros=int(item.get("cost_micros", 0)),
            )
