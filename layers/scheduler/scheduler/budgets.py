"""Owner budgets: `MAX_COST_PER_HOUR_PER_OWNER` and `MAX_SPEND_PER_OWNER_PER_DAY`, as weighed counter limits.

Both are counters in micro-dollars (`store/counters.py`), taken in the same transaction that records
the lease, so concurrent acquires can never overshoot:

- `cost#<owner>`: the summed cost per hour of the owner's live leases. Acquire reserves the most the
  lease can cost per hour (the providers' `price_bound`, within the request's ceiling); activation
  re-weighs it to the worker's own price; the end gives it back.
- `spend#<day>#<owner>`: the owner's spend on a UTC day, counted as `GET /v1/usage` counts it: a lease's
  whole cost on the day it ENDED. A live lease may end on any day from now until its expiry plus the
  release lag (the time past `expires_at` until the sweep has confirmed its release), so it reserves on
  each of those days what it bills if it ends that day — rate × (from its creation to the end of that
  day, or to the end of the lag if sooner): a lease that crosses midnight must fit both days' budgets.
  Renew reserves, on each day from the renewal's to the new end of the lag, what that day's amount
  grew by, and gives back what it held on days already over (the lease can no longer end on them).
  The end gives back every spend reservation the lease holds and adds what it billed to the day it
  ended, unconditionally and in the same transaction (`settlement`): then each day's counter is what
  the leases that ended that day billed plus what the live leases reserve on it — the usage report's
  total for that day, even past the limit (a release that failed for a long time), which then refuses
  the owner's next acquire.

Each budget has a second counter, `firm#` + its name, holding only amounts that are known: the workers'
own prices (and, for a day, what ended leases billed). An acquire is admitted against the first (what
is known plus what pending acquires reserved at their estimate); activation is admitted against the
firm one. So a pending reservation at a catalog price never stops a worker that fits from being kept,
and the leases kept never cost more than the budget: activation takes the firm counter conditionally.

Leases without an owner count, while any owner budget or quota is set, against one shared owner, `-`
(`SHARED_OWNER`): the same as a caller sending `owner_id: "-"`.
"""

from __future__ import annotations

import math
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
        """The budget limits one lease at `rate_usd` per hour, created at `now_epoch` and expiring
        `lifetime_seconds` later, takes: the hourly cost, and the spend on each day it may end on."""
        owner = budget_owner(owner_id)
        rate = micros(rate_usd)
        found = []
        if self.per_hour is not None:
            found.append(Limit(cost_counter(owner), micros(self.per_hour), rate, weighed=True))
        if self.per_day is not None:
            horizon = now_epoch + self.spend_seconds(lifetime_seconds)
            for day, spend in spend_by_day(rate, now_epoch, now_epoch, horizon).items():
                counter = spend_counter(owner, day)
                found.append(Limit(counter, micros(self.per_day), spend, weighed=True, expires=spend_expiry(day)))
        return found

    def maximum_of(self, counter: str) -> int | None:
        """The maximum (micro-dollars) of a budget counter (or of its firm counter)."""
        name = budget_of(counter)
        if name.startswith(COST_PREFIX):
            return None if self.per_hour is None else micros(self.per_hour)
        if name.startswith(SPEND_PREFIX):
            return None if self.per_day is None else micros(self.per_day)
        return None

    def reweigh(self, held: Iterable[str], rate_usd: float, lifetime_seconds: int, created_epoch: int) -> Reweighing:
        """At activation: the budget entries re-weighed from the estimate to the worker's own price, made firm.

        The counter the acquire was admitted against moves by the difference, unconditionally (it held the
        estimate); the firm counter takes the price, refused past the budget.
        """
        rate = micros(rate_usd)
        horizon = created_epoch + self.spend_seconds(lifetime_seconds)
        entries: list[str] = []
        changes: list[Limit] = []
        for entry in held:
            counter, amount = parse_held(entry)
            if counter.startswith(COST_PREFIX):
                new = rate
            elif counter.startswith(SPEND_PREFIX):
                new = spend_if_ended_on(day_of(counter), rate, created_epoch, horizon)
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
        self, held: Sequence[str], owner: str, rate_usd: float, created_epoch: int, expires_epoch: int, now_epoch: int
    ) -> Reweighing:
        """At renew (at `now_epoch`, to `expires_epoch`): the held entries, and what each spend counter takes.

        Each day from today's to the new end of the release lag takes what the lease's reservation on it
        grows by — on the admitted counter (refused past the budget) and, a kept worker's lease, on the
        firm one; what it held on days already over comes back (the lease can no longer end on them).
        """
        rate = micros(rate_usd)
        horizon = expires_epoch + self.release_lag_seconds
        entries = dict(parse_held(entry) for entry in held)
        families = ["", FIRM_PREFIX] if any(entry.startswith(firm(SPEND_PREFIX)) for entry in held) else [""]
        changes: list[Limit] = []
        for day, target in spend_by_day(rate, created_epoch, now_epoch, horizon).items():
            for family in families:
                counter = family + spend_counter(owner, day)
                extra = target - entries.get(counter, 0)
                if extra > 0:
                    maximum = micros(self.per_day) if self.per_day is not None and not family else None
                    changes.append(Limit(counter, maximum, extra, weighed=True, expires=spend_expiry(day)))
                    entries[counter] = target
        today = start_of_day(now_epoch)
        for counter, amount in list(entries.items()):
            if budget_of(counter).startswith(SPEND_PREFIX) and day_of(counter) < today:
                changes.append(Limit(counter, None, -amount, weighed=True, expires=expiry_of(counter)))
                del entries[counter]
        return Reweighing(_entries(entries), tuple(changes))

    def refusal(self, limit: Limit, in_use_micros: int) -> BudgetExceeded:
        """The 429 for a budget limit that would not take `limit.amount`."""
        per_hour = budget_of(limit.counter).startswith(COST_PREFIX)
        variable = PER_HOUR if per_hour else PER_DAY
        maximum = usd(limit.maximum or 0)
        what = "cost per hour of live leases" if per_hour else f"spend on {spend_day(limit.counter)} (UTC)"
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


DAY_SECONDS = 86_400
# A day's spend counter outlives its day by this much: the leases that may end that day give back what
# they reserved on it when they end (at most openapi.yaml's ttl_seconds maximum and the release lag after
# their last acquire or renew), or later still when a release fails for long.
SPEND_COUNTER_DAYS_KEPT = 3


def start_of_day(epoch_seconds: float) -> int:
    """The start (epoch seconds) of the UTC day of an instant."""
    whole = math.floor(epoch_seconds)
    return whole - whole % DAY_SECONDS


def spend_by_day(rate_micros: int, created_epoch: int, from_epoch: int, horizon: float) -> dict[int, int]:
    """For each UTC day (its start) from `from_epoch`'s to `horizon`'s: the most a lease billing `rate_micros`
    an hour since `created_epoch`, and at the latest until `horizon`, bills if it ends that day."""
    found: dict[int, int] = {}
    day = start_of_day(from_epoch)
    while day <= horizon:
        found[day] = spend_if_ended_on(day, rate_micros, created_epoch, horizon)
        day += DAY_SECONDS
    return found


def spend_if_ended_on(day: int, rate_micros: int, created_epoch: int, horizon: float) -> int:
    """What a lease billing since `created_epoch`, until `horizon` at the latest, bills if it ends on `day`."""
    return spend_micros(rate_micros, min(day + DAY_SECONDS, horizon) - created_epoch)


def spend_expiry(epoch_seconds: int) -> int:
    """When a spend counter taken at `epoch_seconds` may go (TTL): some days after the end of its day."""
    return start_of_day(epoch_seconds) + (1 + SPEND_COUNTER_DAYS_KEPT) * DAY_SECONDS


def spend_day(counter: str) -> str:
    """The UTC day (`YYYY-MM-DD`) of a spend counter or of its firm twin."""
    return budget_of(counter).removeprefix(SPEND_PREFIX).split("#", 1)[0]


def day_of(counter: str) -> int:
    """The start (epoch seconds) of a spend counter's UTC day."""
    return int(datetime.strptime(spend_day(counter), "%Y-%m-%d").replace(tzinfo=UTC).timestamp())


def expiry_of(counter: str) -> int | None:
    """The TTL of a budget counter: a day's spend goes some days after its day; the hourly cost stays."""
    if not budget_of(counter).startswith(SPEND_PREFIX):
        return None
    return spend_expiry(day_of(counter))


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


def _entries(amounts: dict[str, int]) -> tuple[str, ...]:
    """Held entries from counters and their amounts (slots carry none)."""
    return tuple(
        sorted(
            f"{name}@{amount}" if name.startswith((COST_PREFIX, SPEND_PREFIX, FIRM_PREFIX)) else name
            for name, amount in amounts.items()
        )
    )


def settlement(held: Iterable[str], spent: int, end_epoch: int) -> list[Limit]:
    """At the end: how each counter the lease holds moves, in the end's own transaction (never refused).

    Every slot, hourly cost and spend reservation comes back whole, and what the lease billed (`spent`)
    is added to its owner's day it ended on — the day `GET /v1/usage` counts it on — for each spend family
    it holds (the admitted counters, and the firm ones of a kept worker). Changes of one counter are
    netted: a transaction may touch an item once.
    """
    moves: dict[str, int] = {}
    owners: dict[str, str] = {}
    for entry in held:
        counter, amount = parse_held(entry)
        moves[counter] = moves.get(counter, 0) - amount
        if budget_of(counter).startswith(SPEND_PREFIX):
            family = FIRM_PREFIX if counter.startswith(FIRM_PREFIX) else ""
            owners[family] = budget_of(counter).removeprefix(SPEND_PREFIX).split("#", 1)[1]
    for family, owner in owners.items():
        ended_on = family + spend_counter(owner, end_epoch)
        moves[ended_on] = moves.get(ended_on, 0) + spent
    return [
        Limit(counter, None, amount, weighed=True, expires=expiry_of(counter))
        for counter, amount in sorted(moves.items())
        if amount
    ]
