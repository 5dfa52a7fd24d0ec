"""Owner budgets: `MAX_COST_PER_HOUR_PER_OWNER` and `MAX_SPEND_PER_OWNER_PER_DAY`, as weighed counter limits.

Both are counters in micro-dollars (`store/counters.py`), taken in the same transaction that records
the lease, so concurrent acquires can never overshoot:

- `cost#<owner>`: the summed cost per hour of the owner's live leases. Acquire reserves the most the
  lease can cost per hour (the providers' `price_bound`, within the request's ceiling); activation
  re-weighs it to the worker's own price; the end gives it back.
- `spend#<day>#<owner>`: the owner's spend on a UTC day. Acquire reserves rate × ttl, renew the
  extension (on the day of the renewal), and the end gives back what was reserved and not billed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from scheduler.config import Settings
from scheduler.costs import micros, spend_micros, usd, utc_day
from scheduler.errors import BudgetExceeded
from scheduler.store.counters import COST_PREFIX, SPEND_PREFIX, Limit, parse_held

PER_HOUR = "MAX_COST_PER_HOUR_PER_OWNER"
PER_DAY = "MAX_SPEND_PER_OWNER_PER_DAY"


class OwnerBudgets(NamedTuple):
    """The owner budgets the settings set (None: unlimited). Leases without an owner have none."""

    per_hour: float | None = None
    per_day: float | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> OwnerBudgets:
        return cls(settings.max_cost_per_hour_per_owner, settings.max_spend_per_owner_per_day)

    @property
    def active(self) -> bool:
        return self.per_hour is not None or self.per_day is not None

    def limits(self, owner_id: str | None, rate_usd: float, ttl_seconds: int, now_epoch: int) -> list[Limit]:
        """The budget limits one lease at `rate_usd` per hour for `ttl_seconds` takes."""
        if owner_id is None:
            return []
        rate = micros(rate_usd)
        found = []
        if self.per_hour is not None:
            found.append(Limit(cost_counter(owner_id), micros(self.per_hour), rate, weighed=True))
        if self.per_day is not None:
            spend = spend_micros(rate, ttl_seconds)
            counter = spend_counter(owner_id, now_epoch)
            found.append(Limit(counter, micros(self.per_day), spend, weighed=True, expires=spend_expiry(now_epoch)))
        return found

    def maximum_of(self, counter: str) -> int | None:
        """The maximum (micro-dollars) of a budget counter."""
        if counter.startswith(COST_PREFIX):
            return None if self.per_hour is None else micros(self.per_hour)
        if counter.startswith(SPEND_PREFIX):
            return None if self.per_day is None else micros(self.per_day)
        return None

    def reweigh(self, held: Iterable[str], rate_usd: float, ttl_seconds: int) -> Reweighing:
        """At activation: the budget entries re-weighed from the estimate to the worker's own price."""
        rate = micros(rate_usd)
        entries: list[str] = []
        changes: list[Limit] = []
        for entry in held:
            counter, amount = parse_held(entry)
            if counter.startswith(COST_PREFIX):
                new = rate
            elif counter.startswith(SPEND_PREFIX):
                new = spend_micros(rate, ttl_seconds)
            else:
                entries.append(entry)
                continue
            entries.append(f"{counter}@{new}")
            if new != amount:
                changes.append(Limit(counter, self.maximum_of(counter), new - amount, weighed=True))
        return Reweighing(tuple(sorted(entries)), tuple(changes))

    def refusal(self, limit: Limit, in_use_micros: int) -> BudgetExceeded:
        """The 429 for a budget limit that would not take `limit.amount`."""
        per_hour = limit.counter.startswith(COST_PREFIX)
        variable = PER_HOUR if per_hour else PER_DAY
        maximum = usd(limit.maximum or 0)
        what = "cost per hour of live leases" if per_hour else "spend today (UTC)"
        return BudgetExceeded(
            f"the owner's {what} would pass its limit of {maximum:g} USD ({variable}):"
            f" {usd(in_use_micros):g} USD in use, {usd(limit.amount):g} USD requested",
            details={
                "limit": maximum,
                "in_use": usd(in_use_micros),
                "requested": usd(limit.amount),
                "budget": variable,
            },
        )


def is_budget(limit: Limit) -> bool:
    return limit.counter.startswith((COST_PREFIX, SPEND_PREFIX))


# A day's spend counter outlives its day by this much: leases acquired that day give back their unused
# part when they end (at most MAX_TTL_SECONDS later, or later still when renewed).
SPEND_COUNTER_DAYS_KEPT = 3


def spend_expiry(epoch_seconds: int) -> int:
    """When a spend counter taken at `epoch_seconds` may go (TTL): some days after the end of its day."""
    start_of_day = epoch_seconds - epoch_seconds % 86_400
    return start_of_day + (1 + SPEND_COUNTER_DAYS_KEPT) * 86_400


def cost_counter(owner_id: str) -> str:
    return f"{COST_PREFIX}{owner_id}"


def spend_counter(owner_id: str, epoch_seconds: int) -> str:
    return f"{SPEND_PREFIX}{utc_day(epoch_seconds)}#{owner_id}"


class Reweighing(NamedTuple):
    """Held entries after a change of reservation, and what each budget counter takes (amount > 0) or
    gives back (amount < 0) in the same transaction."""

    held: tuple[str, ...]
    limits: tuple[Limit, ...]

    @property
    def deltas(self) -> bool:
        return bool(self.limits)


def extend(held: Sequence[str], counter: str, extra: int) -> tuple[str, ...]:
    """The held entries with `extra` more reserved on a spend counter (at renew)."""
    entries = dict(parse_held(entry) for entry in held)
    entries[counter] = entries.get(counter, 0) + extra
    return tuple(
        sorted(
            f"{name}@{amount}" if name.startswith((COST_PREFIX, SPEND_PREFIX)) else name
            for name, amount in entries.items()
        )
    )


def returns(held: Iterable[str], spent: int) -> dict[str, int]:
    """At the end: what each held counter gets back. Slots and the hourly cost come back whole; the
    spend reservations come back less what the lease billed (kept by the latest day's counter first
    giving back: the unused part is the end of the reservation)."""
    back: dict[str, int] = {}
    spend_entries: list[tuple[str, int]] = []
    for entry in held:
        counter, amount = parse_held(entry)
        if counter.startswith(SPEND_PREFIX):
            spend_entries.append((counter, amount))
        else:
            back[counter] = back.get(counter, 0) + amount
    unused = max(0, sum(amount for _, amount in spend_entries) - spent)
    for counter, amount in sorted(spend_entries, reverse=True):
        given = min(amount, unused)
        unused -= given
        if given:
            back[counter] = given
    return back
