"""Owner budgets: `MAX_COST_PER_HOUR_PER_OWNER` and `MAX_SPEND_PER_OWNER_PER_DAY`, as weighed counter limits.

Both are counters in micro-dollars (`store/counters.py`), taken in the same transaction that records
the lease, so concurrent acquires can never overshoot:

- `cost#<owner>`: the summed cost per hour of the owner's live leases. Acquire reserves the most the
  lease can cost per hour (the providers' `price_bound`, within the request's ceiling); activation
  re-weighs it to the worker's own price; the end gives it back.
- `spend#<day>#<owner>`: the owner's spend on a UTC day. Acquire reserves what the lease can bill: rate ×
  (its lifetime + the release lag, the time past `expires_at` until the sweep has confirmed its release);
  renew reserves the extension (on the day of the renewal). The end trues it up to what the lease billed:
  the unused part comes back, and what it billed beyond its reservation (a release that failed for a
  long time) is added to the day it ended, so the counter and the usage report agree — even past the
  limit, which then refuses the owner's next acquire.

Each budget has a second counter, `firm#` + its name, holding only amounts that are known: the workers'
own prices (and, for a day, what ended leases billed). An acquire is admitted against the first (what
is known plus what pending acquires reserved at their estimate); activation is admitted against the
firm one. So a pending reservation at a catalog price never stops a worker that fits from being kept,
and the leases kept never cost more than the budget: activation takes the firm counter conditionally.

Leases without an owner count, while any owner budget or quota is set, against one shared owner, `-`
(`SHARED_OWNER`): the same as a caller sending `owner_id: "-"`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import NamedTuple

from scheduler.config import Settings
from scheduler.costs import micros, money, spend_micros, usd, utc_day
from scheduler.errors import BudgetExceeded
from scheduler.store.counters import COST_PREFIX, FIRM_PREFIX, SPEND_PREFIX, Limit, budget_of, firm, parse_held

PER_HOUR = "MAX_COST_PER_HOUR_PER_OWNER"
PER_DAY = "MAX_SPEND_PER_OWNER_PER_DAY"
SHARED_OWNER = "-"


def budget_owner(owner_id: str | None) -> str:
    """Whom a lease's budgets and quota count against: its owner, else the shared owner `-`."""
    return SHARED_OWNER if owner_id is None else owner_id


class OwnerBudgets(NamedTuple):
    """The owner budgets the settings set (None: unlimited), and how long past its expiry a lease may bill."""

    per_hour: float | None = None
    per_day: float | None = None
    release_lag_seconds: float = 0.0

    @classmethod
    def from_settings(cls, settings: Settings) -> OwnerBudgets:
        lag = settings.sweep_interval_seconds + settings.release_allowance_seconds
        return cls(settings.max_cost_per_hour_per_owner, settings.max_spend_per_owner_per_day, lag)

    @property
    def active(self) -> bool:
        return self.per_hour is not None or self.per_day is not None

    def spend_seconds(self, lifetime_seconds: float) -> float:
        """How long a lease living `lifetime_seconds` (creation to expires_at) can bill: that and the release lag."""
        return max(0.0, lifetime_seconds) + self.release_lag_seconds

    def limits(self, owner_id: str | None, rate_usd: float, lifetime_seconds: int, now_epoch: int) -> list[Limit]:
        """The budget limits one lease at `rate_usd` per hour, expiring `lifetime_seconds` after `now_epoch`, takes."""
        owner = budget_owner(owner_id)
        rate = micros(rate_usd)
        found = []
        if self.per_hour is not None:
            found.append(Limit(cost_counter(owner), micros(self.per_hour), rate, weighed=True))
        if self.per_day is not None:
            spend = spend_micros(rate, self.spend_seconds(lifetime_seconds))
            counter = spend_counter(owner, now_epoch)
            found.append(Limit(counter, micros(self.per_day), spend, weighed=True, expires=spend_expiry(now_epoch)))
        return found

    def maximum_of(self, counter: str) -> int | None:
        """The maximum (micro-dollars) of a budget counter (or of its firm counter)."""
        name = budget_of(counter)
        if name.startswith(COST_PREFIX):
            return None if self.per_hour is None else micros(self.per_hour)
        if name.startswith(SPEND_PREFIX):
            return None if self.per_day is None else micros(self.per_day)
        return None

    def reweigh(self, held: Iterable[str], rate_usd: float, lifetime_seconds: int) -> Reweighing:
        """At activation: the budget entries re-weighed from the estimate to the worker's own price, made firm.

        The counter the acquire was admitted against moves by the difference, unconditionally (it held the
        estimate); the firm counter takes the price, refused past the budget.
        """
        rate = micros(rate_usd)
        entries: list[str] = []
        changes: list[Limit] = []
        for entry in held:
            counter, amount = parse_held(entry)
            if counter.startswith(COST_PREFIX):
                new = rate
            elif counter.startswith(SPEND_PREFIX):
                new = spend_micros(rate, self.spend_seconds(lifetime_seconds))
            else:
                entries.append(entry)
                continue
            entries.append(f"{counter}@{new}")
            if new != amount:
                changes.append(Limit(counter, None, new - amount, weighed=True))
            if new > 0:
                kept = Limit(firm(counter), self.maximum_of(counter), new, weighed=True, expires=expiry_of(counter))
                entries.append(kept.held)
                changes.append(kept)
        return Reweighing(tuple(sorted(entries)), tuple(changes))

    def renewal(
        self, held: Sequence[str], owner: str, extra: int, now_epoch: int
    ) -> tuple[tuple[str, ...], list[Limit]]:
        """At renew: the held entries, and the limits reserving `extra` micro-dollars more of the owner's day
        — on the admitted counter (refused past the budget) and, a kept worker's lease, on the firm one."""
        counter, expires = spend_counter(owner, now_epoch), spend_expiry(now_epoch)
        takes = [Limit(counter, micros(self.per_day or 0), extra, weighed=True, expires=expires)]
        if any(entry.startswith(firm(SPEND_PREFIX)) for entry in held):
            takes.append(Limit(firm(counter), None, extra, weighed=True, expires=expires))
        for limit in takes:
            held = extend(held, limit.counter, extra)
        return tuple(held), takes

    def refusal(self, limit: Limit, in_use_micros: int) -> BudgetExceeded:
        """The 429 for a budget limit that would not take `limit.amount`."""
        per_hour = budget_of(limit.counter).startswith(COST_PREFIX)
        variable = PER_HOUR if per_hour else PER_DAY
        maximum = usd(limit.maximum or 0)
        what = "cost per hour of live leases" if per_hour else "spend today (UTC)"
        return BudgetExceeded(
            f"the owner's {what} would pass its limit of {money(maximum)} USD ({variable}):"
            f" {money(usd(in_use_micros))} USD in use, {money(usd(limit.amount))} USD requested",
            details={
                "limit": maximum,
                "in_use": usd(in_use_micros),
                "requested": usd(limit.amount),
                "budget": variable,
            },
        )


def is_budget(limit: Limit) -> bool:
    return budget_of(limit.counter).startswith((COST_PREFIX, SPEND_PREFIX))


# A day's spend counter outlives its day by this much: leases acquired that day give back their unused
# part when they end (at most the ttl_seconds maximum of openapi.yaml later, or later still when renewed).
SPEND_COUNTER_DAYS_KEPT = 3


def spend_expiry(epoch_seconds: int) -> int:
    """When a spend counter taken at `epoch_seconds` may go (TTL): some days after the end of its day."""
    start_of_day = epoch_seconds - epoch_seconds % 86_400
    return start_of_day + (1 + SPEND_COUNTER_DAYS_KEPT) * 86_400


def expiry_of(counter: str) -> int | None:
    """The TTL of a budget counter: a day's spend goes some days after its day; the hourly cost stays."""
    name = budget_of(counter)
    if not name.startswith(SPEND_PREFIX):
        return None
    day = name.removeprefix(SPEND_PREFIX).split("#", 1)[0]
    return spend_expiry(int(datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC).timestamp()))


def cost_counter(owner_id: str) -> str:
    return f"{COST_PREFIX}{owner_id}"


def spend_counter(owner_id: str, epoch_seconds: int) -> str:
    return f"{SPEND_PREFIX}{utc_day(epoch_seconds)}#{owner_id}"


class Reweighing(NamedTuple):
    """Held entries after a change of reservation, and what each budget counter takes (amount > 0) or
    gives back (amount < 0) in the same transaction (a limit with a maximum is refused past it)."""

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
            f"{name}@{amount}" if name.startswith((COST_PREFIX, SPEND_PREFIX, FIRM_PREFIX)) else name
            for name, amount in entries.items()
        )
    )


def _spend_families(held: Iterable[str]) -> dict[str, list[tuple[str, int]]]:
    """The held spend reservations, by family: the admitted ones (`spend#`) and the firm ones (`firm#spend#`)."""
    families: dict[str, list[tuple[str, int]]] = {}
    for entry in held:
        counter, amount = parse_held(entry)
        if budget_of(counter).startswith(SPEND_PREFIX):
            family = FIRM_PREFIX if counter.startswith(FIRM_PREFIX) else ""
            families.setdefault(family, []).append((counter, amount))
    return families


def returns(held: Iterable[str], spent: int) -> dict[str, int]:
    """At the end: what each held counter gets back. Slots and the hourly cost come back whole; the
    spend reservations come back less what the lease billed (kept by the latest day's counter first
    giving back: the unused part is the end of the reservation)."""
    held = list(held)
    back: dict[str, int] = {}
    for entry in held:
        counter, amount = parse_held(entry)
        if not budget_of(counter).startswith(SPEND_PREFIX):
            back[counter] = back.get(counter, 0) + amount
    for entries in _spend_families(held).values():
        unused = max(0, sum(amount for _, amount in entries) - spent)
        for counter, amount in sorted(entries, reverse=True):
            given = min(amount, unused)
            unused -= given
            if given:
                back[counter] = given
    return back


def overspent(held: Iterable[str], spent: int, end_epoch: int) -> list[Limit]:
    """At the end: what a lease billed beyond its spend reservations, added (whatever the limit) to its owner's
    counters of the day it ended — the day the usage report counts it on."""
    added: list[Limit] = []
    for family, entries in _spend_families(held).items():
        excess = spent - sum(amount for _, amount in entries)
        if excess <= 0:
            continue
        owner = budget_of(entries[0][0]).removeprefix(SPEND_PREFIX).split("#", 1)[1]
        counter = family + spend_counter(owner, end_epoch)
        added.append(Limit(counter, None, excess, weighed=True, expires=spend_expiry(end_epoch)))
    return added
