"""The owner's daily spend counts what a lease can really bill: from its creation until the sweep has
confirmed its release, up to one sweep period plus the release allowance past `expires_at` — and when
it ends, its reservations come back and what it billed is added to the day it ended, so the counter and
the usage report agree (across midnight: test_spend_across_midnight.py).

The issue's numbers: MAX_SPEND_PER_OWNER_PER_DAY=0.05, LOCAL_DOCKER_COST_PER_HOUR=36 (0.01 USD a second),
leases of `ttl_seconds: 1`. Budgets use transactions: moto only.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from scheduler.budgets import OwnerBudgets
from scheduler.config import Settings
from scheduler.errors import BudgetExceeded, LeaseConflict
from scheduler.leases.acquire import acquire
from scheduler.leases.outcomes import Acquired, AcquireOutcome, NotAcquired
from scheduler.leases.renew import renew
from scheduler.leases.sweep import sweep
from scheduler.leases.usage import usage_report
from scheduler.limits import LeaseLimits
from scheduler.providers.configured import ConfiguredProviders
from scheduler.request_models import LeaseRequest, UsageQuery
from scheduler.store import LeaseStore

from .builders import NOW, context, memory_provider, registry_of

pytestmark = pytest.mark.moto_only("owner budgets use TransactWriteItems, which dynalite lacks")

DAY = "spend#2026-11-30#anim"
ISSUE = {"MAX_SPEND_PER_OWNER_PER_DAY": "0.05", "LOCAL_DOCKER_COST_PER_HOUR": "36"}


class Clock:
    def __init__(self, now: datetime = NOW) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def limits_from(environ: dict[str, str]) -> LeaseLimits:
    return LeaseLimits.from_settings(Settings.from_environ(environ))


def at_36_usd_an_hour() -> ConfiguredProviders:
    return registry_of(memory_provider(cost_per_hour=36.0))


def one_second_lease(
    store: LeaseStore, registry: ConfiguredProviders, limits: LeaseLimits, clock: Clock
) -> AcquireOutcome:
    request = LeaseRequest.parse({"kind": "renderer", "ttl_seconds": 1, "owner_id": "anim"})
    return acquire(context(store, registry, limits=limits, clock=clock), request)


def billed_today(store: LeaseStore) -> float:
    report = usage_report(context(store, clock=lambda: NOW), UsageQuery.parse({"owner_id": "anim"}))
    return sum(float(row["cost_usd"]) for row in report["usage"])  # type: ignore[arg-type]


def test_a_lease_reserves_its_ttl_and_the_release_lag_of_the_deployed_sweep() -> None:
    budgets = OwnerBudgets.from_settings(Settings.from_environ({"MAX_SPEND_PER_OWNER_PER_DAY": "20"}))

    (spend,) = budgets.limits("anim", 0.69, 3600, 1796011200)

    assert budgets.release_lag_seconds == 60 + 30  # the sweep's rate(1 minute) and the release allowance
    assert spend.amount == 707_250  # 0.69 USD/h for 3690 s, in micro-dollars


def test_five_one_second_leases_get_only_what_fits_and_never_bill_past_the_daily_limit(
    budget_store: LeaseStore,
) -> None:
    limits = limits_from({**ISSUE, "SWEEP_INTERVAL_SECONDS": "1", "RELEASE_ALLOWANCE_SECONDS": "1"})
    registry, clock = at_36_usd_an_hour(), Clock()
    granted: list[int] = []

    for _ in range(3):  # five at once, the sweep a period after they expire, again
        outcomes = [one_second_lease(budget_store, registry, limits, clock) for _ in range(5)]
        granted.append(sum(isinstance(outcome, Acquired) for outcome in outcomes))
        clock.advance(2)
        sweep(context(budget_store, registry, clock=clock))

    assert granted == [1, 1, 0]  # each reserves 3 s (0.03 USD) and bills 2 s (0.02 USD)
    assert billed_today(budget_store) == 0.04 <= 0.05
    assert budget_store.counter_values()[DAY] == 40_000  # the counter is what was billed


def test_a_lease_that_billed_past_its_reservation_adds_the_excess_and_the_owner_is_refused(
    budget_store: LeaseStore,
) -> None:
    limits = limits_from({**ISSUE, "SWEEP_INTERVAL_SECONDS": "1", "RELEASE_ALLOWANCE_SECONDS": "1"})
    registry, clock = at_36_usd_an_hour(), Clock()
    assert isinstance(one_second_lease(budget_store, registry, limits, clock), Acquired)  # reserves 0.03

    clock.advance(100)  # the release could not be confirmed for 100 s
    sweep(context(budget_store, registry, clock=clock))
    refused = one_second_lease(budget_store, registry, limits, clock)

    assert billed_today(budget_store) == 1.0
    assert budget_store.counter_values()[DAY] == 1_000_000  # past the limit: what was billed, all of it
    assert isinstance(refused, NotAcquired) and isinstance(refused.error, BudgetExceeded)
    assert refused.error.details is not None and refused.error.details["in_use"] == 1.0


def test_renew_reserves_the_time_added_and_the_lag_stays_reserved_once(budget_store: LeaseStore) -> None:
    limits = limits_from({"MAX_SPEND_PER_OWNER_PER_DAY": "5", "LOCAL_DOCKER_COST_PER_HOUR": "36"})
    registry, clock = at_36_usd_an_hour(), Clock()
    request = LeaseRequest.parse({"kind": "renderer", "ttl_seconds": 60, "owner_id": "anim"})
    outcome = acquire(context(budget_store, registry, limits=limits, clock=clock), request)  # 60 s + 90 s of lag: 1.50
    assert isinstance(outcome, Acquired)
    clock.advance(30)

    renew(
        context(budget_store, limits=limits, clock=clock), outcome.lease.lease_id, "anim", 60
    )  # expires 30 s later: +0.30

    counters = budget_store.counter_values()
    assert (counters[DAY], counters[f"firm#{DAY}"]) == (1_800_000, 1_800_000)


def test_a_renewal_past_the_workers_own_end_is_refused_and_reserves_nothing(budget_store: LeaseStore) -> None:
    limits = limits_from({"MAX_SPEND_PER_OWNER_PER_DAY": "5", "LOCAL_DOCKER_COST_PER_HOUR": "36"})
    registry = registry_of(memory_provider(cost_per_hour=36.0, ends_after_expiry_seconds=30))
    clock = Clock()
    request = LeaseRequest.parse({"kind": "renderer", "ttl_seconds": 60, "owner_id": "anim"})
    outcome = acquire(context(budget_store, registry, limits=limits, clock=clock), request)  # ends in 90 s
    assert isinstance(outcome, Acquired)
    clock.advance(30)
    before = budget_store.counter_values()

    with pytest.raises(LeaseConflict, match="past 2026-11-30T04:01:30Z"):
        renew(context(budget_store, registry, limits=limits, clock=clock), outcome.lease.lease_id, "anim", 61)

    assert budget_store.counter_values() == before
    renewed = renew(context(budget_store, registry, limits=limits, clock=clock), outcome.lease.lease_id, "anim", None)
    assert renewed.expires_at == NOW + timedelta(seconds=90)
