"""The cost settings parse as documented, and the pure pieces of cost control: the catalog's prices, the
budget counters' arithmetic, the usage table's retention."""

from __future__ import annotations

import pytest

from devstack.stack import local_sweep_interval
from devstack.template import load_yaml
from scheduler.budgets import OwnerBudgets, settlement
from scheduler.config import Settings
from scheduler.costs import micros, money, spend_micros
from scheduler.errors import ConfigurationError
from scheduler.providers.local_docker import LocalDockerSettings
from scheduler.providers.runpod import RunPodSettings
from scheduler.providers.runpod.catalog import CatalogCache, Prices, parse_prices
from scheduler.store.counters import Limit


@pytest.mark.parametrize(
    ("environ", "variable"),
    [
        ({"MAX_COST_PER_HOUR_PER_OWNER": "-1"}, "MAX_COST_PER_HOUR_PER_OWNER"),
        ({"MAX_COST_PER_HOUR_PER_OWNER": "0"}, "MAX_COST_PER_HOUR_PER_OWNER"),
        ({"MAX_SPEND_PER_OWNER_PER_DAY": "lots"}, "MAX_SPEND_PER_OWNER_PER_DAY"),
        ({"MAX_SPEND_PER_OWNER_PER_DAY": "inf"}, "MAX_SPEND_PER_OWNER_PER_DAY"),
        ({"MAX_COST_PER_HOUR_PER_OWNER": "0.0000001"}, "MAX_COST_PER_HOUR_PER_OWNER"),  # below a micro-dollar
        ({"MAX_SPEND_PER_OWNER_PER_DAY": "1.0000005"}, "MAX_SPEND_PER_OWNER_PER_DAY"),  # not whole micro-dollars
        ({"SWEEP_INTERVAL_SECONDS": "0"}, "SWEEP_INTERVAL_SECONDS"),
        ({"SWEEP_INTERVAL_SECONDS": "86401"}, "SWEEP_INTERVAL_SECONDS"),  # more than a day
        ({"RELEASE_ALLOWANCE_SECONDS": "-1"}, "RELEASE_ALLOWANCE_SECONDS"),
        ({"LOCAL_DOCKER_COST_PER_HOUR": "-0.5"}, "LOCAL_DOCKER_COST_PER_HOUR"),
        ({"PROVIDERS": "runpod", "RUNPOD_GPU_ORDER": "random"}, "RUNPOD_GPU_ORDER"),
        ({"PROVIDERS": "runpod", "RUNPOD_REGIONS": "eu"}, "RUNPOD_REGIONS"),
        ({"PROVIDERS": "runpod", "RUNPOD_REGIONS": "eu=A;eu=B"}, "RUNPOD_REGIONS"),
    ],
)
def test_a_bad_cost_setting_refuses_to_start_naming_the_variable(environ: dict[str, str], variable: str) -> None:
    with pytest.raises(ConfigurationError, match=variable):
        Settings.from_environ(environ)


def test_cost_settings_parse_as_documented() -> None:
    settings = Settings.from_environ(
        {
            "PROVIDERS": "local-docker,runpod",
            "MAX_COST_PER_HOUR_PER_OWNER": "12.5",
            "LOCAL_DOCKER_COST_PER_HOUR": "0",
            "RUNPOD_GPU_ORDER": "cheapest",
            "RUNPOD_REGIONS": "eu=EU-RO-1, EU-SE-1; us=US-TX-3",
        }
    )
    runpod = settings.section("runpod", RunPodSettings)
    assert (settings.max_cost_per_hour_per_owner, settings.max_spend_per_owner_per_day) == (12.5, None)
    assert settings.section("local-docker", LocalDockerSettings).local_docker_cost_per_hour == 0
    assert runpod.runpod_gpu_order == "cheapest"
    assert runpod.runpod_regions == (("eu", ("EU-RO-1", "EU-SE-1")), ("us", ("US-TX-3",)))


def test_catalog_prices_are_the_secure_ones_and_garbage_is_ignored() -> None:
    body = {
        "gpus": [
            {"id": "A", "price": {"secure": 0.69, "community": 0.31}},
            {"id": "B", "price": {"secure": "cheap"}},
            {"id": "C", "price": {"secure": True}},
            {"id": "D"},
            "not a gpu",
        ]
    }
    assert parse_prices(body) == Prices({"A": 0.69})
    assert parse_prices({"detail": "nope"}) is None


def test_cheapest_first_puts_unpriced_types_last_in_their_listed_order() -> None:
    prices = Prices({"A": 2.0, "B": 0.5})
    assert prices.ordered(["X", "A", "Y", "B"], cheapest_first=True) == ["B", "A", "X", "Y"]
    assert prices.ordered(["X", "A", "Y", "B"], cheapest_first=False) == ["X", "A", "Y", "B"]


def test_the_catalog_is_asked_again_once_stale_and_a_failed_read_keeps_the_last_prices() -> None:
    now = [0.0]
    cache = CatalogCache(max_age=300, clock=lambda: now[0])
    answers: list[Prices | None] = [Prices({"A": 1.0}), None]
    assert cache.get("url", lambda: answers.pop(0)) == Prices({"A": 1.0})
    now[0] = 301
    assert cache.get("url", lambda: answers.pop(0)) == Prices({"A": 1.0})  # RunPod failed: the last list stands
    assert answers == []


def test_the_end_gives_back_every_reservation_and_books_what_was_billed_on_the_day_it_ended() -> None:
    held = [
        "cost#anim@690000",
        "owner#anim",
        "spend#2026-11-30#anim@300000",
        "spend#2026-12-01#anim@800000",
        "firm#spend#2026-11-30#anim@300000",
        "firm#spend#2026-12-01#anim@800000",
    ]
    ended_0015_on_d2 = 1796084100  # 2026-12-01T00:15:00Z

    moves = settlement(held, 517_500, ended_0015_on_d2)

    assert {move.counter: move.amount for move in moves} == {
        "cost#anim": -690_000,
        "owner#anim": -1,
        "spend#2026-11-30#anim": -300_000,
        "spend#2026-12-01#anim": 517_500 - 800_000,  # one change per counter: a transaction touches an item once
        "firm#spend#2026-11-30#anim": -300_000,
        "firm#spend#2026-12-01#anim": 517_500 - 800_000,
    }
    assert all(move.maximum is None for move in moves)  # never refused: what was billed is booked


def test_a_lease_that_ended_on_a_day_it_held_nothing_on_books_its_whole_cost_there() -> None:
    held = ["spend#2026-11-30#anim@690000"]
    two_days_later = 1796256000  # 2026-12-03T00:00:00Z: its release failed for two days

    moves = settlement(held, 33_810_000, two_days_later)

    assert {move.counter: (move.amount, move.expires) for move in moves} == {
        "spend#2026-11-30#anim": (-690_000, 1796342400),
        "spend#2026-12-03#anim": (33_810_000, 1796601600),  # its TTL: some days after its own day
    }


def test_a_lease_that_can_end_after_midnight_reserves_on_each_day_what_it_bills_if_it_ends_then() -> None:
    at_2330 = 1796081400  # 2026-11-30T23:30:00Z

    limits = OwnerBudgets(per_day=20.0, release_lag_seconds=90).limits("anim", 1.0, 3600, at_2330)

    assert [(limit.counter, limit.amount) for limit in limits] == [
        ("spend#2026-11-30#anim", 500_000),  # ending before midnight: at most 30 minutes
        ("spend#2026-12-01#anim", 1_025_000),  # after it: up to its expiry and the release lag
    ]


def test_activation_reweighs_each_days_reservation_to_the_workers_price() -> None:
    at_2330 = 1796081400
    budgets = OwnerBudgets(per_day=20.0, release_lag_seconds=90)
    held = [limit.held for limit in budgets.limits("anim", 1.0, 3600, at_2330)]

    reweighed = budgets.reweigh(held, 2.0, 3600, at_2330)

    assert reweighed.held == (
        "firm#spend#2026-11-30#anim@1000000",
        "firm#spend#2026-12-01#anim@2050000",
        "spend#2026-11-30#anim@1000000",
        "spend#2026-12-01#anim@2050000",
    )


def test_a_renewal_across_midnight_reserves_on_the_next_day_and_gives_back_the_days_already_over() -> None:
    created_2200 = 1796076000  # 2026-11-30T22:00:00Z
    budgets = OwnerBudgets(per_day=20.0, release_lag_seconds=90)
    held = ("owner#anim", "spend#2026-11-30#anim@1025000", "firm#spend#2026-11-30#anim@1025000")

    # At 23:30 to 00:30: ending before midnight bills up to 2 h, after it up to 2 h 31 min 30 s.
    at_2330 = budgets.renewal(held, "anim", 1.0, created_2200, 1796085000, 1796081400)
    # Renewed again at 00:20 (to 01:20): 30 November is over, its reservation comes back.
    at_0020 = budgets.renewal(at_2330.held, "anim", 1.0, created_2200, 1796088000, 1796084400)

    assert [(limit.counter, limit.amount, limit.maximum) for limit in at_2330.limits] == [
        ("spend#2026-11-30#anim", 975_000, 20_000_000),
        ("firm#spend#2026-11-30#anim", 975_000, None),
        ("spend#2026-12-01#anim", 2_525_000, 20_000_000),
        ("firm#spend#2026-12-01#anim", 2_525_000, None),
    ]
    assert {limit.counter: limit.amount for limit in at_0020.limits} == {
        "spend#2026-12-01#anim": 833_334,
        "firm#spend#2026-12-01#anim": 833_334,
        "spend#2026-11-30#anim": -2_000_000,
        "firm#spend#2026-11-30#anim": -2_000_000,
    }
    assert at_0020.held == ("firm#spend#2026-12-01#anim@3358334", "owner#anim", "spend#2026-12-01#anim@3358334")


def test_budgets_count_whole_micro_dollars_rounded_up() -> None:
    assert (micros(0.69), micros(0.0000001), spend_micros(690_000, 1)) == (690_000, 1, 192)
    limits = OwnerBudgets(per_hour=5.0, per_day=20.0).limits("anim", 0.69, 3600, 1796011200)
    assert [(limit.held, limit.maximum) for limit in limits] == [
        ("cost#anim@690000", 5_000_000),
        ("spend#2026-11-30#anim@690000", 20_000_000),
    ]
    (shared,) = OwnerBudgets(per_hour=5.0).limits(None, 0.69, 3600, 0)
    assert shared.held == "cost#-@690000"  # a lease without owner_id counts against the shared owner


def test_a_days_spend_counter_goes_a_few_days_after_its_day() -> None:
    (spend,) = OwnerBudgets(per_day=20.0).limits("anim", 0.69, 3600, 1796011200)  # 2026-11-30T04:00:00Z
    assert spend.expires == 1796342400  # 2026-12-04T00:00:00Z


def test_a_budget_of_whole_micro_dollars_is_taken_as_written() -> None:
    settings = Settings.from_environ({"MAX_COST_PER_HOUR_PER_OWNER": "0.000001", "MAX_SPEND_PER_OWNER_PER_DAY": "1e-6"})
    assert (settings.max_cost_per_hour_per_owner, settings.max_spend_per_owner_per_day) == (0.000001, 0.000001)


def test_the_functions_know_the_deployed_sweeps_period() -> None:
    template = load_yaml()
    (schedule,) = template["Resources"]["SweepExpiredFunction"]["Properties"]["Events"].values()
    interval = template["Globals"]["Function"]["Environment"]["Variables"]["SWEEP_INTERVAL_SECONDS"]

    assert schedule["Properties"]["Schedule"] == "rate(1 minute)" and interval == "60"


def test_make_run_gives_the_functions_its_own_sweep_period(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWEEP_INTERVAL_SECONDS", "1")
    assert local_sweep_interval() == {"SWEEP_INTERVAL_SECONDS": "1"}
    monkeypatch.delenv("SWEEP_INTERVAL_SECONDS")
    assert local_sweep_interval() == {}  # the template's 60, which is make run's default too


def test_money_prints_in_plain_decimal() -> None:
    assert [money(amount) for amount in (0.000001, 0.69, 5.0, 100.0, 1.035)] == [
        "0.000001",
        "0.69",
        "5",
        "100",
        "1.035",
    ]


def test_a_budget_refusal_prints_small_amounts_in_plain_decimal() -> None:
    budgets = OwnerBudgets(per_hour=0.000002)

    refusal = budgets.refusal(Limit("cost#anim", micros(0.000002), 2, weighed=True), in_use_micros=1)

    assert refusal.message == (
        "the owner's cost per hour of live leases would pass its limit of 0.000002 USD"
        " (MAX_COST_PER_HOUR_PER_OWNER): 0.000001 USD in use, 0.000002 USD requested"
    )
