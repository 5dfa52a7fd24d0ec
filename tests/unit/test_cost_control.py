"""Cost control: price ceilings, owner budgets taken atomically with the lease, what each lease cost, usage.

Budgets are counters changed in the lease's own transaction (TransactWriteItems), which dynalite lacks:
those tests run on moto only. Usage totals of leases ended by a single write run on both.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

import pytest

from scheduler.budgets import OwnerBudgets
from scheduler.errors import BudgetExceeded, InvalidRequest, NoCapacity
from scheduler.leases.acquire import acquire as acquire_lease
from scheduler.leases.outcomes import Acquired, NotAcquired, lease_or_raise
from scheduler.leases.reconcile import repair_counters
from scheduler.leases.release import release
from scheduler.leases.renew import renew
from scheduler.leases.usage import usage_report
from scheduler.limits import LeaseLimits
from scheduler.models import GpuClass, Lease, WorkerKind
from scheduler.providers.configured import ConfiguredProviders
from scheduler.providers.memory import MemoryProvider
from scheduler.request_models import LeaseRequest, UsageGrouping, UsageQuery
from scheduler.store import LeaseStore

from .builders import NOW, context, memory_provider, new_lease, registry_of
from .stored import drift_counter

NEEDS_TRANSACTIONS = pytest.mark.moto_only("owner budgets use TransactWriteItems, which dynalite lacks")


def request(**fields: object) -> LeaseRequest:
    return LeaseRequest.parse({"kind": "renderer", "ttl_seconds": 3600, "owner_id": "anim", **fields})


def budgets(per_hour: float | None = None, per_day: float | None = None) -> LeaseLimits:
    return LeaseLimits(budgets=OwnerBudgets(per_hour, per_day))


class Clock:
    def __init__(self, now: datetime = NOW) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def acquire(
    store: LeaseStore, registry: ConfiguredProviders, limits: LeaseLimits, clock: Clock | None = None, **fields: object
) -> Lease:
    return lease_or_raise(
        acquire_lease(context(store, registry, limits=limits, clock=clock or Clock()), request(**fields))
    )


def priced(name: str, cost: float) -> MemoryProvider:
    return memory_provider(name, cost_per_hour=cost)


# --- the price ceiling ------------------------------------------------------------------------------------


def test_a_ceiling_skips_the_provider_above_it_for_the_next(store: LeaseStore) -> None:
    dear, cheap = priced("dear", 2.0), priced("cheap", 0.5)

    lease = acquire(store, registry_of(dear, cheap), LeaseLimits(), max_cost_per_hour=1.0)

    assert (lease.provider, lease.cost_per_hour, lease.max_cost_per_hour) == ("cheap", 0.5, 1.0)
    assert dear.workers == {}


def test_nothing_within_the_ceiling_is_no_capacity_naming_the_ceiling_and_the_cheapest_price(store: LeaseStore) -> None:
    dear, dearer = priced("dear", 2.0), priced("dearer", 3.0)

    outcome = acquire_lease(
        context(store, registry_of(dear, dearer), limits=LeaseLimits()), request(max_cost_per_hour=1.5)
    )

    assert isinstance(outcome, NotAcquired) and isinstance(outcome.error, NoCapacity)
    assert outcome.error.details is not None
    assert (outcome.error.details["max_cost_per_hour"], outcome.error.details["cheapest_cost_per_hour"]) == (1.5, 2.0)
    assert (dear.workers, dearer.workers) == ({}, {})


def test_the_ceiling_and_the_cheapest_price_print_in_plain_decimal(store: LeaseStore) -> None:
    outcome = acquire_lease(
        context(store, registry_of(priced("dear", 0.000002)), limits=LeaseLimits()), request(max_cost_per_hour=0.000001)
    )

    assert isinstance(outcome, NotAcquired)
    assert "within max_cost_per_hour 0.000001 (cheapest seen: 0.000002 USD/h)" in outcome.error.message


def test_a_docker_hosts_ceiling_refusal_prints_prices_in_plain_decimal() -> None:
    from scheduler.providers.base import PriceAboveCeiling
    from scheduler.providers.local_docker.driver import LocalDockerProvider

    def connect() -> object:
        raise AssertionError("a worker above the ceiling is refused before the engine is asked")

    docker = LocalDockerProvider(
        connect,
        {WorkerKind.RENDERER: "r"},
        network="none",
        worker_port=8080,
        cost_per_hour=0.00002,
    )

    with pytest.raises(PriceAboveCeiling) as refused:
        docker.provision(new_lease().replace(max_cost_per_hour=0.000001), {})

    assert "costs 0.00002 USD/h" in str(refused.value) and "max_cost_per_hour 0.000001" in str(refused.value)


@pytest.mark.parametrize("ceiling", [0, -1, "1.5", True, float("nan"), 10_001, 5e-324])
def test_a_ceiling_must_be_a_positive_number(ceiling: object) -> None:
    with pytest.raises(InvalidRequest, match="max_cost_per_hour"):
        request(max_cost_per_hour=ceiling)


# --- regions ----------------------------------------------------------------------------------------------


class Regional(MemoryProvider):
    def regions(self) -> tuple[str, ...] | None:
        return ("eu", "us")


def test_an_unknown_region_is_refused_naming_the_known_ones(store: LeaseStore) -> None:
    outcome = acquire_lease(
        context(store, registry_of(Regional(name="runpod")), limits=LeaseLimits()), request(region="mars")
    )

    assert isinstance(outcome, NotAcquired) and isinstance(outcome.error, InvalidRequest)
    assert "eu, us" in outcome.error.message


def test_a_region_is_a_label_where_no_provider_has_regions(store: LeaseStore) -> None:
    assert acquire(store, registry_of(memory_provider()), LeaseLimits(), region="anywhere").region == "anywhere"


# --- the owner's cost per hour --------------------------------------------------------------------------


@NEEDS_TRANSACTIONS
def test_thirty_concurrent_acquires_against_the_hourly_budget_grant_exactly_what_fits(budget_store: LeaseStore) -> None:
    provider = priced("local-docker", 0.7)
    registry = registry_of(provider)
    limits = budgets(per_hour=7.0)  # room for exactly 10 leases at 0.70 USD/h
    start = threading.Barrier(30)
    outcomes: list[object] = []
    lock = threading.Lock()

    def one() -> None:
        start.wait()
        outcome = acquire_lease(context(budget_store, registry, limits=limits, clock=Clock()), request())
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=one) for _ in range(30)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    granted = [o for o in outcomes if isinstance(o, Acquired)]
    refused = [o for o in outcomes if isinstance(o, NotAcquired) and isinstance(o.error, BudgetExceeded)]
    assert (len(granted), len(refused), len(provider.workers)) == (10, 20, 10)
    assert budget_store.counter_values()["cost#anim"] == 7_000_000  # micro-dollars


@NEEDS_TRANSACTIONS
def test_over_the_hourly_budget_is_429_with_limit_in_use_and_requested(budget_store: LeaseStore) -> None:
    registry = registry_of(priced("local-docker", 1.5))
    acquire(budget_store, registry, budgets(per_hour=2.0))

    outcome = acquire_lease(context(budget_store, registry, limits=budgets(per_hour=2.0), clock=Clock()), request())

    assert isinstance(outcome, NotAcquired) and isinstance(outcome.error, BudgetExceeded)
    assert outcome.error.details == {
        "limit": 2.0,
        "in_use": 1.5,
        "requested": 1.5,
        "budget": "MAX_COST_PER_HOUR_PER_OWNER",
    }


@NEEDS_TRANSACTIONS
def test_an_owners_first_lease_dearer_than_the_hourly_budget_is_refused(budget_store: LeaseStore) -> None:
    provider = priced("local-docker", 36.0)

    outcome = acquire_lease(context(budget_store, registry_of(provider), limits=budgets(per_hour=1.0)), request())

    assert isinstance(outcome, NotAcquired) and isinstance(outcome.error, BudgetExceeded)
    assert outcome.error.details["in_use"] == 0.0 and outcome.error.details["requested"] == 36.0
    assert provider.workers == {}


@NEEDS_TRANSACTIONS
def test_an_owners_first_lease_whose_reservation_passes_the_daily_budget_is_refused(budget_store: LeaseStore) -> None:
    provider = priced("local-docker", 36.0)

    limits = budgets(per_day=0.05)
    outcome = acquire_lease(
        context(budget_store, registry_of(provider), limits=limits, clock=Clock()), request(ttl_seconds=600)
    )

    assert isinstance(outcome, NotAcquired) and isinstance(outcome.error, BudgetExceeded)
    assert outcome.error.details["budget"] == "MAX_SPEND_PER_OWNER_PER_DAY"
    assert provider.workers == {}


@NEEDS_TRANSACTIONS
def test_release_gives_the_hourly_cost_back(budget_store: LeaseStore) -> None:
    registry = registry_of(priced("local-docker", 1.5))
    first = acquire(budget_store, registry, budgets(per_hour=2.0))
    release(context(budget_store, registry, clock=Clock()), first.lease_id, "anim")

    acquire(budget_store, registry, budgets(per_hour=2.0))

    assert budget_store.counter_values()["cost#anim"] == 1_500_000


@NEEDS_TRANSACTIONS
def test_a_worker_dearer_than_reserved_is_reweighed_or_refused_at_activation(budget_store: LeaseStore) -> None:
    class Underestimating(MemoryProvider):
        def price_bound(self, request: LeaseRequest, deadline: object = None) -> float | None:
            return None  # unknown until made: nothing reserved before the worker exists

    provider = Underestimating(cost_per_hour=1.5)
    registry = registry_of(provider)
    acquire(budget_store, registry, budgets(per_hour=2.0))

    # Another kind: no worker of it was seen yet, so nothing is reserved before it exists.
    outcome = acquire_lease(
        context(budget_store, registry, limits=budgets(per_hour=2.0), clock=Clock()), request(kind="anim")
    )

    assert isinstance(outcome, NotAcquired) and isinstance(outcome.error, BudgetExceeded)
    assert len(provider.workers) == 1  # the second worker was removed at once
    assert budget_store.counter_values()["cost#anim"] == 1_500_000


@NEEDS_TRANSACTIONS
def test_a_worker_seen_dearer_than_its_estimate_is_reserved_at_that_price_before_the_next_is_made(
    budget_store: LeaseStore,
) -> None:
    class Underestimating(MemoryProvider):
        def price_bound(self, request: LeaseRequest, deadline: object = None) -> float | None:
            return 1.0

    provider = Underestimating(cost_per_hour=1.5)
    registry = registry_of(provider)
    acquire(budget_store, registry, budgets(per_hour=2.0))

    outcome = acquire_lease(context(budget_store, registry, limits=budgets(per_hour=2.0), clock=Clock()), request())

    assert isinstance(outcome, NotAcquired) and isinstance(outcome.error, BudgetExceeded)
    assert outcome.error.details is not None and outcome.error.details["requested"] == 1.5
    assert len(provider.provisioned) == 1  # refused before a second worker was made


@NEEDS_TRANSACTIONS
def test_the_reconciler_repairs_a_drifted_hourly_cost_counter(budget_store: LeaseStore) -> None:
    registry = registry_of(priced("local-docker", 0.5))
    acquire(budget_store, registry, budgets(per_hour=5.0))
    drift_counter(budget_store, "cost#anim", 500_000 + 900_000)  # drift: a lost give-back, as after a bug
    repair_counters(context(budget_store, clock=lambda: NOW))
    repaired = repair_counters(context(budget_store, clock=lambda: NOW + timedelta(seconds=60)))

    assert repaired == {"cost#anim": (1_400_000, 500_000)}


# --- the owner's spend per day -------------------------------------------------------------------------


@NEEDS_TRANSACTIONS
def test_the_daily_budget_reserves_rate_times_ttl_at_acquire(budget_store: LeaseStore) -> None:
    registry = registry_of(priced("local-docker", 1.0))
    acquire(budget_store, registry, budgets(per_day=3.0), ttl_seconds=7200)  # reserves 2.00

    outcome = acquire_lease(
        context(budget_store, registry, limits=budgets(per_day=3.0), clock=Clock()), request(ttl_seconds=7200)
    )

    assert isinstance(outcome, NotAcquired) and isinstance(outcome.error, BudgetExceeded)
    assert outcome.error.details == {
        "limit": 3.0,
        "in_use": 2.0,
        "requested": 2.0,
        "budget": "MAX_SPEND_PER_OWNER_PER_DAY",
    }


@NEEDS_TRANSACTIONS
def test_renew_reserves_the_extension_and_is_refused_past_the_daily_budget(budget_store: LeaseStore) -> None:
    clock = Clock()
    registry = registry_of(priced("local-docker", 1.0))
    limits = budgets(per_day=2.0)
    lease = acquire(budget_store, registry, limits, clock, ttl_seconds=3600)  # reserves 1.00
    clock.advance(1800)

    renewed = renew(
        context(budget_store, limits=limits, clock=clock), lease.lease_id, "anim", 3600
    )  # +0.50 (30 min more)
    clock.advance(1800)
    with pytest.raises(BudgetExceeded) as refused:
        renew(
            context(budget_store, limits=limits, clock=clock), lease.lease_id, "anim", 7200
        )  # +1.50 (90 min more): 3.00 > 2.00

    assert renewed.expires_at == NOW + timedelta(seconds=5400)
    assert budget_store.counter_values()["spend#2026-11-30#anim"] == 1_500_000
    assert refused.value.details == {
        "limit": 2.0,
        "in_use": 1.5,
        "requested": 1.5,
        "budget": "MAX_SPEND_PER_OWNER_PER_DAY",
    }


@NEEDS_TRANSACTIONS
def test_an_early_release_gives_back_the_unused_part_of_the_day(budget_store: LeaseStore) -> None:
    clock = Clock()
    registry = registry_of(priced("local-docker", 1.0))
    lease = acquire(budget_store, registry, budgets(per_day=2.0), clock, ttl_seconds=3600)  # reserves 1.00
    clock.advance(900)

    ended = release(context(budget_store, registry, clock=clock), lease.lease_id, "anim")

    assert budget_store.counter_values()["spend#2026-11-30#anim"] == 250_000  # the 15 minutes it ran
    assert ended.cost_usd == 0.25


# --- what each lease cost -------------------------------------------------------------------------------


def test_an_ended_lease_cost_its_rate_times_its_duration(store: LeaseStore) -> None:
    clock = Clock()
    registry = registry_of(priced("local-docker", 0.69))
    lease = acquire(store, registry, LeaseLimits(), clock)
    clock.advance(1200)

    release(context(store, registry, clock=clock), lease.lease_id, "anim")

    assert store.get(lease.lease_id).cost_usd == round(0.69 * 1200 / 3600, 6)


def test_a_live_lease_shows_what_it_has_accrued(store: LeaseStore) -> None:
    lease = acquire(store, registry_of(priced("local-docker", 0.6)), LeaseLimits())

    assert lease.wire(now=NOW + timedelta(minutes=30))["cost_usd"] == 0.3


# --- usage ------------------------------------------------------------------------------------------------


def test_usage_adds_up_ended_leases_per_owner_day_kind_and_provider(budget_store: LeaseStore) -> None:
    clock = Clock()
    docker, pods = priced("local-docker", 0.0), priced("runpod", 2.0)
    registry = registry_of(docker, pods)
    for owner, kind, gpu, minutes, day in [
        ("anim", "renderer", "none", 30, 0),
        ("anim", "anim", "entry", 60, 0),
        ("live", "renderer", "none", 15, 1),
        ("anim", "anim", "entry", 30, 1),
    ]:
        clock.now = NOW + timedelta(days=day)
        chosen = registry_of(pods) if gpu == "entry" else registry_of(docker)
        lease = acquire(
            budget_store, chosen, LeaseLimits(), clock, owner_id=owner, kind=kind, gpu=gpu, ttl_seconds=7200
        )
        clock.advance(minutes * 60)
        release(context(budget_store, registry, clock=clock), lease.lease_id, owner)

    def report(**query: object) -> object:
        return usage_report(context(budget_store, clock=clock), UsageQuery.parse(query))

    assert report(since="2026-11-30", until="2026-12-01") == {
        "usage": [
            {"owner_id": "anim", "leases": 3, "lease_seconds": 7200, "cost_usd": 3.0},
            {"owner_id": "live", "leases": 1, "lease_seconds": 900, "cost_usd": 0.0},
        ],
        "since": "2026-11-30",
        "until": "2026-12-01",
    }
    assert report(owner_id="anim", since="2026-11-30", until="2026-12-01", group_by="provider")["usage"] == [
        {"owner_id": "anim", "provider": "local-docker", "leases": 1, "lease_seconds": 1800, "cost_usd": 0.0},
        {"owner_id": "anim", "provider": "runpod", "leases": 2, "lease_seconds": 5400, "cost_usd": 3.0},
    ]
    assert report(group_by="kind")["usage"] == [  # default: today (2026-12-01)
        {"owner_id": "anim", "kind": "anim", "leases": 1, "lease_seconds": 1800, "cost_usd": 1.0},
        {"owner_id": "live", "kind": "renderer", "leases": 1, "lease_seconds": 900, "cost_usd": 0.0},
    ]


def test_a_usage_range_that_ends_before_it_starts_holds_nothing(budget_store: LeaseStore) -> None:
    report = usage_report(context(budget_store, clock=Clock()), UsageQuery(since="2026-12-02", until="2026-12-01"))
    assert report == {"usage": [], "since": "2026-12-02", "until": "2026-12-01"}


@pytest.mark.parametrize("query", [{"since": "2026-02-30"}, {"until": "yesterday"}, {"group_by": "day"}])
def test_a_bad_usage_query_is_refused(query: dict[str, str]) -> None:
    with pytest.raises(InvalidRequest):
        UsageQuery.parse(query)


def test_usage_groups_are_the_documented_ones() -> None:
    assert [group.value for group in UsageGrouping] == ["owner", "kind", "provider"]


def test_gpu_classes_are_unchanged() -> None:
    assert GpuClass("entry") is GpuClass.ENTRY and WorkerKind("anim") is WorkerKind.ANIM


@pytest.mark.dynamodb_only("reads the TTL of the usage table's item")
def test_usage_totals_are_kept_400_days_after_their_day(budget_store: LeaseStore) -> None:
    clock = Clock()
    registry = registry_of(priced("local-docker", 1.0))
    lease = acquire(budget_store, registry, LeaseLimits(), clock)
    clock.advance(60)
    release(context(budget_store, registry, clock=clock), lease.lease_id, "anim")

    (item,) = budget_store.client.scan(TableName=budget_store.usage_table)["Items"]

    assert item["day_key"]["S"] == "2026-11-30#renderer#local-docker"
    kept_until = datetime.fromtimestamp(int(item["ttl"]["N"]), NOW.tzinfo)
    assert kept_until == datetime(2026, 11, 30, tzinfo=NOW.tzinfo) + timedelta(days=401)
