"""What each caller reads, in `token` and `iam` modes, on every store: a service its owners' leases, logs and usage
only (another owner's lease is 404 exactly as one that does not exist, and that refusal is logged and counted); a
viewer and an operator everything. `X-Lease-Owner` is not needed, and when sent must be one of the caller's owners.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from scheduler.callers.model import Caller
from scheduler.lifecycle import LeaseStatus
from scheduler.providers.memory import MemoryProvider
from scheduler.runtime import Runtime
from scheduler.store.port import LeaseStorePort
from tests.support.metrics import RecordedMetrics

from ..builders import Leases
from .as_callers import ANIM, AUDIT, LIVE, MODES, OPS, Api, with_principals
from .conftest import Function, event, runtime_of


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def runtime(
    store: LeaseStorePort, provider: MemoryProvider, metrics: RecordedMetrics, idempotency_table: str, mode: str
) -> Runtime:
    return with_principals(
        runtime_of(store, provider, metrics=metrics, idempotency_table=idempotency_table, auth_mode=mode)
    )


@pytest.fixture
def api(function: Callable[[str], Function], mode: str) -> Api:
    return Api(function, mode)


def running(leases: Leases, provider: MemoryProvider, owner_id: str | None) -> str:
    lease = leases.active(owner_id=owner_id)
    provider.add_worker(lease.lease_id, str(lease.provider_token))
    return lease.lease_id


def everyone(leases: Leases, provider: MemoryProvider) -> dict[str | None, str]:
    """One running lease of each owner (and one of none), by owner."""
    return {owner: running(leases, provider, owner) for owner in ("anim-service", "anim-batch", "live-control", None)}


def listed(api: Api, caller: Caller, **query: str) -> list[str]:
    """Every lease id the listing gives `caller`, page after page."""
    found: list[str] = []
    while True:
        status, body = api.http(caller, "list_leases", event("list_leases", queryStringParameters=query))
        assert status == 200, body
        found += [lease["lease_id"] for lease in body["leases"]]
        if body["next_token"] is None:
            return found
        query = {**query, "next_token": body["next_token"]}


def same_answer(one: dict[str, Any], other: dict[str, Any], one_id: str, other_id: str) -> bool:
    """Whether two answers are the same but for the lease id each names."""
    return json.dumps(one).replace(one_id, "<id>") == json.dumps(other).replace(other_id, "<id>")


def refusals(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    fields = ("caller", "route", "lease_id", "status", "reason")
    return [
        {name: getattr(record, name) for name in fields}
        for record in caplog.records
        if record.getMessage() == "authorization refused"
    ]


# --- GET /v1/leases --------------------------------------------------------------------------------------------


def test_a_service_lists_the_leases_of_its_owners_only(api: Api, leases: Leases, provider: MemoryProvider) -> None:
    ids = everyone(leases, provider)
    assert sorted(listed(api, ANIM)) == sorted([ids["anim-service"], ids["anim-batch"]])


def test_a_service_naming_one_of_its_owners_lists_that_owners_leases(
    api: Api, leases: Leases, provider: MemoryProvider
) -> None:
    ids = everyone(leases, provider)
    assert listed(api, ANIM, owner_id="anim-batch") == [ids["anim-batch"]]


def test_a_service_pages_through_its_own_leases_only(api: Api, leases: Leases, provider: MemoryProvider) -> None:
    own = [running(leases, provider, owner) for owner in ("anim-service", "anim-batch") * 3]
    [running(leases, provider, "live-control") for _ in range(4)]
    assert sorted(listed(api, ANIM, limit="2")) == sorted(own)


def test_a_service_naming_another_owner_is_refused_and_the_refusal_counted(
    api: Api, leases: Leases, provider: MemoryProvider, metrics: RecordedMetrics, caplog: pytest.LogCaptureFixture
) -> None:
    everyone(leases, provider)
    status, body = api.http(
        ANIM, "list_leases", event("list_leases", queryStringParameters={"owner_id": "live-control"})
    )
    assert (status, body["error"]["code"]) == (403, "forbidden")
    reason = "caller anim may not read owner live-control's leases or usage"
    assert refusals(caplog) == [
        {"caller": "anim", "route": "GET /v1/leases", "lease_id": None, "status": 403, "reason": reason}
    ]
    assert metrics.of("AuthRefused") == [{"status": "403", "value": 1}]


@pytest.mark.parametrize("caller", [OPS, AUDIT], ids=["operator", "viewer"])
def test_an_operator_and_a_viewer_list_every_owners_leases(
    api: Api, leases: Leases, provider: MemoryProvider, caller: Caller
) -> None:
    ids = everyone(leases, provider)
    assert sorted(listed(api, caller)) == sorted(ids.values())
    assert listed(api, caller, owner_id="live-control") == [ids["live-control"]]


# --- GET /v1/lease/{id} --------------------------------------------------------------------------------------


def test_another_owners_lease_is_to_a_service_exactly_a_lease_that_does_not_exist(
    api: Api, leases: Leases, provider: MemoryProvider
) -> None:
    others = running(leases, provider, "live-control")
    nobodys = str(uuid.uuid4())
    refused = api(ANIM, "get_lease", event("get_lease", others))
    missing = api(ANIM, "get_lease", event("get_lease", nobodys))
    assert refused["statusCode"] == 404
    assert same_answer(refused, missing, others, nobodys)


def test_a_services_read_of_another_owners_lease_is_logged_and_counted_as_refused(
    api: Api, leases: Leases, provider: MemoryProvider, metrics: RecordedMetrics, caplog: pytest.LogCaptureFixture
) -> None:
    others = running(leases, provider, "live-control")
    api(ANIM, "get_lease", event("get_lease", others))
    route, reason = "GET /v1/lease/{lease_id}", "another owner's lease: caller anim does not act for its owner"
    assert refusals(caplog) == [{"caller": "anim", "route": route, "lease_id": others, "status": 404, "reason": reason}]
    assert metrics.of("AuthRefused") == [{"status": "404", "value": 1}]


def test_a_lease_that_does_not_exist_is_no_refused_authorization(
    api: Api, metrics: RecordedMetrics, caplog: pytest.LogCaptureFixture
) -> None:
    api(ANIM, "get_lease", event("get_lease", str(uuid.uuid4())))
    assert (refusals(caplog), metrics.of("AuthRefused")) == ([], [])


def test_a_service_reads_its_own_owners_leases_without_x_lease_owner(
    api: Api, leases: Leases, provider: MemoryProvider
) -> None:
    for owner in ANIM.owners:
        lease_id = running(leases, provider, owner)
        status, body = api.http(ANIM, "get_lease", event("get_lease", lease_id))
        assert (status, body["lease"]["owner_id"]) == (200, owner)


@pytest.mark.parametrize("caller", [OPS, AUDIT], ids=["operator", "viewer"])
def test_an_operator_and_a_viewer_read_any_lease(
    api: Api, leases: Leases, provider: MemoryProvider, caller: Caller
) -> None:
    for owner, lease_id in everyone(leases, provider).items():
        status, body = api.http(caller, "get_lease", event("get_lease", lease_id))
        assert (status, body["lease"]["owner_id"]) == (200, owner)


def test_a_services_read_never_ends_another_owners_lease_whose_worker_stopped(
    api: Api, leases: Leases, provider: MemoryProvider, store: LeaseStorePort
) -> None:
    others = running(leases, provider, "live-control")
    provider.stop(str(store.get(others).provider_token))
    assert api.http(ANIM, "get_lease", event("get_lease", others))[0] == 404
    assert store.get(others).status is LeaseStatus.ACTIVE
    status, body = api.http(LIVE, "get_lease", event("get_lease", others))
    assert (status, body["lease"]["status"], body["lease"]["ended_by"]) == (200, "failed", "live")


def test_x_lease_owner_naming_one_of_the_callers_owners_is_taken(
    api: Api, leases: Leases, provider: MemoryProvider
) -> None:
    lease_id = running(leases, provider, "anim-service")
    assert api.http(ANIM, "get_lease", event("get_lease", lease_id), owner_header="anim-batch")[0] == 200


def test_x_lease_owner_naming_an_owner_the_caller_does_not_act_for_is_403(
    api: Api, leases: Leases, provider: MemoryProvider
) -> None:
    lease_id = running(leases, provider, "anim-service")
    status, body = api.http(ANIM, "get_lease", event("get_lease", lease_id), owner_header="live-control")
    assert (status, body["error"]["code"]) == (403, "forbidden")


# --- GET /v1/lease/{id}/logs ---------------------------------------------------------------------------------


def test_another_owners_logs_are_to_a_service_exactly_those_of_a_lease_that_does_not_exist(
    api: Api, leases: Leases, provider: MemoryProvider
) -> None:
    others = running(leases, provider, "live-control")
    nobodys = str(uuid.uuid4())
    refused = api(ANIM, "lease_logs", event("lease_logs", others))
    missing = api(ANIM, "lease_logs", event("lease_logs", nobodys))
    assert refused["statusCode"] == 404
    assert same_answer(refused, missing, others, nobodys)


@pytest.mark.parametrize(
    ("caller", "owner"),
    [(ANIM, "anim-batch"), (OPS, "live-control"), (AUDIT, "live-control")],
    ids=["own", "operator", "viewer"],
)
def test_logs_are_read_by_a_service_of_its_owners_and_by_an_operator_or_viewer_of_any(
    api: Api, leases: Leases, provider: MemoryProvider, caller: Caller, owner: str
) -> None:
    lease_id = running(leases, provider, owner)
    answer = api(caller, "lease_logs", event("lease_logs", lease_id))
    assert (answer["statusCode"], answer["headers"]["X-Lease-Status"]) == (200, "active")


# --- GET /v1/usage -------------------------------------------------------------------------------------------


@pytest.fixture
def usage(function: Callable[[str, Runtime | None], Function], budget_store: LeaseStorePort, mode: str) -> Api:
    """GET /v1/usage on a store with its usage table, one lease of each owner ended today."""
    runtime = with_principals(runtime_of(budget_store, auth_mode=mode))
    for owner in ("anim-service", "anim-batch", "live-control"):
        Leases(budget_store).released(owner_id=owner)
    return Api(lambda name: function(name, runtime), mode)


def usage_owners(api: Api, caller: Caller, **query: str) -> tuple[int, Any]:
    status, body = api.http(caller, "usage", event("usage", queryStringParameters=query))
    return status, sorted(row["owner_id"] for row in body["usage"]) if status == 200 else body["error"]["code"]


def test_a_services_usage_covers_its_own_owners_only(usage: Api) -> None:
    assert usage_owners(usage, ANIM) == (200, ["anim-batch", "anim-service"])
    assert usage_owners(usage, ANIM, owner_id="anim-batch") == (200, ["anim-batch"])


def test_a_service_asking_another_owners_usage_is_refused(usage: Api) -> None:
    assert usage_owners(usage, ANIM, owner_id="live-control") == (403, "forbidden")


@pytest.mark.parametrize("caller", [OPS, AUDIT], ids=["operator", "viewer"])
def test_an_operator_and_a_viewer_read_every_owners_usage(usage: Api, caller: Caller) -> None:
    assert usage_owners(usage, caller) == (200, ["anim-batch", "anim-service", "live-control"])
    assert usage_owners(usage, caller, owner_id="live-control") == (200, ["live-control"])
