"""The daily spend across midnight (UTC): a lease counts on the day it ended, in the counters as in the usage
report, so each day's counter is what `GET /v1/usage` reports for that day (plus what live leases reserve on it),
and no day's usage passes MAX_SPEND_PER_OWNER_PER_DAY when releases are prompt.

A lease that may end after midnight reserves on that day too (what it bills if it ends then), at acquire and at
renew. Budgets use transactions: moto only.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduler.config import Settings
from scheduler.errors import BudgetExceeded
from scheduler.leases.acquire import acquire
from scheduler.leases.outcomes import Acquired, AcquireOutcome, NotAcquired
from scheduler.leases.release import release
from scheduler.leases.renew import renew
from scheduler.leases.usage import usage_report
from scheduler.limits import LeaseLimits
from scheduler.models import Lease
from scheduler.providers.configured import ConfiguredProviders
from scheduler.request_models import LeaseRequest, UsageQuery
from scheduler.store import LeaseStore

from .builders import context, memory_provider, registry_of

pytestmark = pytest.mark.moto_only("owner budgets use TransactWriteItems, which dynalite lacks")

D1, D2 = "2026-11-30", "2026-12-01"
AT_2330 = datetime(2026, 11, 30, 23, 30, tzinfo=UTC)
ONE_HOUR = LeaseRequest.parse({"kind": "renderer", "ttl_seconds": 3600, "owner_id": "anim"})


def daily_limit(usd: str) -> LeaseLimits:
    return LeaseLimits.from_settings(Settings.from_environ({"MAX_SPEND_PER_OWNER_PER_DAY": usd}))


def at_one_usd_an_hour() -> ConfiguredProviders:
    return registry_of(memory_provider(cost_per_hour=1.0))


def one_hour_lease(
    store: LeaseStore, registry: ConfiguredProviders, limits: LeaseLimits, at: datetime
) -> AcquireOutcome:
    return acquire(context(store, registry, limits=limits, clock=lambda: at), ONE_HOUR)


def granted(outcome: AcquireOutcome) -> Lease:
    assert isinstance(outcome, Acquired), outcome
    return outcome.lease


def refused_over_budget(outcome: AcquireOutcome) -> bool:
    return isinstance(outcome, NotAcquired) and isinstance(outcome.error, BudgetExceeded)


def billed_micros(store: LeaseStore, day: str) -> int:
    query = UsageQuery.parse({"owner_id": "anim", "since": day, "until": day})
    rows = usage_report(context(store), query)["usage"]
    return round(sum(float(row["cost_usd"]) for row in rows) * 1_000_000)  # type: ignore[union-attr]


def spend_counters(store: LeaseStore, day: str) -> tuple[int, int]:
    """The day's admitted and firm spend counters."""
    values = store.counter_values()
    return values.get(f"spend#{day}#anim", 0), values.get(f"firm#spend#{day}#anim", 0)


def test_a_lease_that_ended_after_midnight_counts_on_the_day_it_ended_in_the_counters_as_in_the_usage(
    budget_store: LeaseStore,
) -> None:
    limits, registry = daily_limit("1.5"), at_one_usd_an_hour()
    first = granted(one_hour_lease(budget_store, registry, limits, AT_2330))
    release(
        context(budget_store, registry, clock=lambda: AT_2330 + timedelta(minutes=59)), first.lease_id, "anim"
    )  # 00:29

    second = one_hour_lease(budget_store, registry, limits, AT_2330 + timedelta(minutes=61))  # 00:31: 1.025 more

    assert refused_over_budget(second)  # 0.983334 + 1.025 would pass 1.5 on 1 December
    assert billed_micros(budget_store, D1) == 0 and spend_counters(budget_store, D1) == (0, 0)
    assert billed_micros(budget_store, D2) == 983_334 <= 1_500_000
    assert spend_counters(budget_store, D2) == (983_334, 983_334)


def test_a_lease_that_may_end_after_midnight_holds_the_next_days_budget_while_it_lives(
    budget_store: LeaseStore,
) -> None:
    limits, registry = daily_limit("1.5"), at_one_usd_an_hour()
    first = granted(one_hour_lease(budget_store, registry, limits, AT_2330))  # 0.5 on 30 Nov., 1.025 on 1 Dec.
    assert spend_counters(budget_store, D2) == (1_025_000, 1_025_000)

    second = one_hour_lease(budget_store, registry, limits, AT_2330 + timedelta(minutes=40))  # 00:10
    release(context(budget_store, registry, clock=lambda: AT_2330 + timedelta(minutes=50)), first.lease_id, "anim")

    assert refused_over_budget(second)  # had it been granted, both would count on 1 December: over 1.5
    assert billed_micros(budget_store, D2) == 833_334
    assert spend_counters(budget_store, D2) == (833_334, 833_334)
    assert spend_counters(budget_store, D1) == (0, 0)


def test_a_renewal_across_midnight_reserves_on_the_next_day_what_the_lease_may_bill_then(
    budget_store: LeaseStore,
) -> None:
    limits, registry = daily_limit("2.5"), at_one_usd_an_hour()
    first = granted(one_hour_lease(budget_store, registry, limits, AT_2330 - timedelta(minutes=45)))  # 22:45

    renew(context(budget_store, limits=limits, clock=lambda: AT_2330), first.lease_id, "anim", 3600)  # to 00:30
    second = one_hour_lease(budget_store, registry, limits, AT_2330 + timedelta(minutes=35))  # 00:05
    release(
        context(budget_store, registry, clock=lambda: AT_2330 + timedelta(minutes=50)), first.lease_id, "anim"
    )  # 00:20

    assert refused_over_budget(second)  # 1 December held 1.775 for the renewed lease: 1.025 more would pass 2.5
    assert billed_micros(budget_store, D2) == 1_583_334 <= 2_500_000
    assert spend_counters(budget_store, D2) == (1_583_334, 1_583_334)
    assert spend_counters(budget_store, D1) == (0, 0)


def test_a_renewal_after_midnight_gives_back_what_the_lease_held_on_the_day_that_is_over(
    budget_store: LeaseStore,
) -> None:
    limits, registry = daily_limit("20"), at_one_usd_an_hour()
    first = granted(one_hour_lease(budget_store, registry, limits, AT_2330))

    renew(
        context(budget_store, limits=limits, clock=lambda: AT_2330 + timedelta(minutes=45)),
        first.lease_id,
        "anim",
        3600,
    )

    assert spend_counters(budget_store, D1) == (0, 0)  # it can no longer end on 30 November
    assert spend_counters(budget_store, D2) == (1_775_000, 1_775_000)  # 23:30 to 01:15, and the 90 s lag
    (holds,) = budget_store.live_holds()
    assert not [entry for entry in holds if D1 in entry]
