"""The cost routes through their handlers: 429 budget_exceeded (and BudgetRefused) from acquire, GET /v1/usage."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from scheduler.store import LeaseStore
from tests.support.metrics import RecordedMetrics

from ..builders import NOW, memory_provider
from .conftest import Function, event, runtime_of


def acquire_event(**body: object) -> dict[str, object]:
    return event("acquire_lease", body=json.dumps({"kind": "renderer", "owner_id": "anim", **body}))


@pytest.mark.moto_only("owner budgets use TransactWriteItems, which dynalite lacks")
def test_an_acquire_over_the_owners_hourly_budget_is_429_and_counts_budget_refused(
    function: Callable[[str], Function], budget_store: LeaseStore, metrics: RecordedMetrics
) -> None:
    runtime = runtime_of(
        budget_store, memory_provider(cost_per_hour=0.6), metrics=metrics, max_cost_per_hour_per_owner=1.0
    )
    acquire = function("acquire_lease", runtime)

    first, _ = acquire.http(acquire_event())
    status, body = acquire.http(acquire_event())

    assert (first, status, body["error"]["code"]) == (201, 429, "budget_exceeded")
    assert body["error"]["details"] == {
        "limit": 1.0,
        "in_use": 0.6,
        "requested": 0.6,
        "budget": "MAX_COST_PER_HOUR_PER_OWNER",
    }
    assert metrics.of("BudgetRefused") == [{"reason": "MAX_COST_PER_HOUR_PER_OWNER", "value": 1}]


def test_usage_answers_the_days_and_totals(function: Callable[[str], Function], budget_store: LeaseStore) -> None:
    usage = function("usage", runtime_of(budget_store))

    status, body = usage.http(event("usage", queryStringParameters={"since": "2026-11-01"}))

    assert status == 200
    assert body == {"usage": [], "since": "2026-11-01", "until": NOW.date().isoformat()}


@pytest.mark.parametrize("query", [{"group_by": "day"}, {"since": "2026-13-01"}, {"owner": "anim"}])
def test_a_bad_usage_query_is_400_naming_the_problem(
    function: Callable[[str], Function], budget_store: LeaseStore, query: dict[str, str]
) -> None:
    status, body = function("usage", runtime_of(budget_store)).http(event("usage", queryStringParameters=query))

    assert (status, body["error"]["code"]) == (400, "invalid_request")
    assert body["error"]["details"]["problems"]
