"""Leases without an `owner_id` share one owner, `-`, for the owner budgets and the quota: with any of them
set, leaving `owner_id` out is no way around them (and callers that leave it out keep working).

Budgets and quotas use transactions: moto only.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.budgets import OwnerBudgets
from scheduler.errors import BudgetExceeded, QuotaExceeded
from scheduler.leases.acquire import acquire
from scheduler.leases.outcomes import Acquired, AcquireOutcome, NotAcquired
from scheduler.leases.reconcile import COUNTER_SETTLE_SECONDS, repair_counters
from scheduler.leases.release import release
from scheduler.leases.renew import renew
from scheduler.limits import LeaseLimits
from scheduler.providers.configured import ConfiguredProviders
from scheduler.request_models import LeaseRequest
from scheduler.store import LeaseStore

from .builders import NOW, context, memory_provider, registry_of
from .stored import drift_counter

pytestmark = pytest.mark.moto_only("budgets and quotas use TransactWriteItems, which dynalite lacks")


def without_owner(store: LeaseStore, registry: ConfiguredProviders, limits: LeaseLimits) -> AcquireOutcome:
    return acquire(
        context(store, registry, limits=limits, clock=lambda: NOW),
        LeaseRequest.parse({"kind": "renderer", "ttl_seconds": 600}),
    )


def at(price: float) -> ConfiguredProviders:
    return registry_of(memory_provider(cost_per_hour=price))


def test_leases_without_owner_id_share_the_hourly_budget_of_the_owner_dash(budget_store: LeaseStore) -> None:
    limits = LeaseLimits(budgets=OwnerBudgets(per_hour=1.0))  # MAX_COST_PER_HOUR_PER_OWNER=1

    outcomes = [without_owner(budget_store, at(0.69), limits) for _ in range(6)]

    assert [isinstance(outcome, Acquired) for outcome in outcomes] == [True] + [False] * 5
    assert all(isinstance(o.error, BudgetExceeded) for o in outcomes[1:] if isinstance(o, NotAcquired))
    assert budget_store.counter_values()["cost#-"] == 690_000


def test_leases_without_owner_id_share_the_quota_of_the_owner_dash(budget_store: LeaseStore) -> None:
    limits = LeaseLimits(per_owner=2)  # MAX_LEASES_PER_OWNER=2

    outcomes = [without_owner(budget_store, at(0.0), limits) for _ in range(3)]

    refused = outcomes[2]
    assert [isinstance(outcome, Acquired) for outcome in outcomes] == [True, True, False]
    assert isinstance(refused, NotAcquired) and isinstance(refused.error, QuotaExceeded)
    assert "'-' (leases without owner_id share it)" in refused.error.message


def test_a_caller_naming_owner_dash_is_that_shared_owner(budget_store: LeaseStore) -> None:
    limits = LeaseLimits(per_owner=1)
    assert isinstance(without_owner(budget_store, at(0.0), limits), Acquired)

    named = acquire(
        context(budget_store, at(0.0), limits=limits), LeaseRequest.parse({"kind": "renderer", "owner_id": "-"})
    )

    assert isinstance(named, NotAcquired) and isinstance(named.error, QuotaExceeded)


def test_releasing_an_owner_less_lease_gives_the_shared_owner_its_slot_and_budget_back(
    budget_store: LeaseStore,
) -> None:
    registry, limits = at(0.69), LeaseLimits(per_owner=1, budgets=OwnerBudgets(per_hour=1.0))
    first = without_owner(budget_store, registry, limits)
    assert isinstance(first, Acquired)

    release(context(budget_store, registry, clock=lambda: NOW), first.lease.lease_id, None)
    second = without_owner(budget_store, registry, limits)

    assert isinstance(second, Acquired)
    counters = budget_store.counter_values()
    assert (counters["owner#-"], counters["cost#-"], counters["firm#cost#-"]) == (1, 690_000, 690_000)


def test_renewing_an_owner_less_lease_reserves_on_the_shared_owners_day(budget_store: LeaseStore) -> None:
    registry, limits = at(1.0), LeaseLimits(budgets=OwnerBudgets(per_day=1.0))
    lease = without_owner(budget_store, registry, limits)  # 600 s at 1 USD/h: 0.166667
    assert isinstance(lease, Acquired)

    with pytest.raises(BudgetExceeded):
        renew(
            context(budget_store, limits=limits, clock=lambda: NOW), lease.lease.lease_id, None, 3601
        )  # +0.833611: 1.000278

    assert budget_store.counter_values()["spend#2026-11-30#-"] == 166_667


def test_the_reconciler_repairs_the_shared_owners_counters_from_its_live_leases(budget_store: LeaseStore) -> None:
    limits = LeaseLimits(per_owner=5, budgets=OwnerBudgets(per_hour=5.0))
    without_owner(budget_store, at(0.5), limits)
    for counter, value in (("owner#-", 4), ("cost#-", 2_000_000), ("firm#cost#-", 2_000_000)):  # lost give-backs
        drift_counter(budget_store, counter, value)

    repair_counters(context(budget_store, clock=lambda: NOW))
    repaired = repair_counters(context(budget_store, clock=lambda: NOW + timedelta(seconds=COUNTER_SETTLE_SECONDS)))

    assert repaired == {
        "cost#-": (2_000_000, 500_000),
        "firm#cost#-": (2_000_000, 500_000),
        "owner#-": (4, 1),
    }


def test_without_a_budget_or_quota_an_owner_less_lease_holds_no_counter(budget_store: LeaseStore) -> None:
    assert isinstance(without_owner(budget_store, at(0.69), LeaseLimits()), Acquired)

    assert budget_store.counter_values() == {}
