"""What each caller may change, in `token` and `iam` modes, on every store: a service acquires for its owners only
(its first by default), renews and releases its owners' leases only (another owner's is 404 exactly as one that
does not exist, and stays as it was); a viewer changes nothing (403); an operator changes anything. Quotas bind to
the owner so decided, Idempotency-Keys are each caller's own, and every lease records who made and who ended it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from scheduler.callers.model import Caller
from scheduler.lifecycle import LeaseStatus
from scheduler.models import Lease
from scheduler.providers.memory import MemoryProvider
from scheduler.runtime import Runtime
from scheduler.store.port import LeaseStorePort
from tests.support.metrics import RecordedMetrics

from ..builders import Leases
from .as_callers import ANIM, AUDIT, LIVE, MODES, OPS, Api, with_principals
from .conftest import Function, event, runtime_of
from .test_caller_rules_reads import running, same_answer

IDEMPOTENCY_RECORDS = pytest.mark.dynamodb_only("idempotency records are powertools' DynamoDB table")


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


def acquire_event(key: str | None = None, **body: Any) -> dict[str, Any]:
    sample = event("acquire_lease", body=json.dumps({"kind": "renderer", "ttl_seconds": 600, **body}))
    headers = {name: value for name, value in sample["headers"].items() if name != "idempotency-key"}
    return {**sample, "headers": {**headers, **({"idempotency-key": key} if key else {})}}


def untouched(store: LeaseStorePort, lease: Lease) -> bool:
    return store.get(lease.lease_id) == lease


def running_lease(leases: Leases, provider: MemoryProvider, owner: str | None) -> Lease:
    return leases.store.get(running(leases, provider, owner))


# --- POST /v1/lease ------------------------------------------------------------------------------------------


def test_a_services_lease_without_owner_id_is_its_first_owners_and_records_it_made_it(api: Api) -> None:
    status, body = api.http(ANIM, "acquire_lease", acquire_event())
    assert (status, body["lease"]["owner_id"], body["lease"]["created_by"]) == (201, "anim-service", "anim")


def test_a_service_acquires_for_another_of_its_owners(api: Api) -> None:
    status, body = api.http(ANIM, "acquire_lease", acquire_event(owner_id="anim-batch"))
    assert (status, body["lease"]["owner_id"]) == (201, "anim-batch")


@pytest.mark.parametrize(
    ("caller", "body"), [(ANIM, {"owner_id": "live-control"}), (AUDIT, {})], ids=["service-other-owner", "viewer"]
)
def test_an_acquire_for_an_owner_the_caller_may_not_act_for_is_403_and_makes_nothing(
    api: Api, provider: MemoryProvider, store: LeaseStorePort, caller: Caller, body: dict[str, str]
) -> None:
    status, answer = api.http(caller, "acquire_lease", acquire_event(**body))
    assert (status, answer["error"]["code"]) == (403, "forbidden")
    assert (provider.provisioned, list(store.live_leases())) == ([], [])


def test_an_x_lease_owner_the_caller_does_not_act_for_refuses_the_acquire(api: Api, provider: MemoryProvider) -> None:
    assert api.http(ANIM, "acquire_lease", acquire_event(), owner_header="live-control")[0] == 403
    assert provider.provisioned == []


@pytest.mark.parametrize("owner", ["live-control", None])
def test_an_operator_acquires_for_any_owner_or_none(api: Api, owner: str | None) -> None:
    status, body = api.http(OPS, "acquire_lease", acquire_event(**({"owner_id": owner} if owner else {})))
    assert (status, body["lease"]["owner_id"], body["lease"]["created_by"]) == (201, owner, "ops")


@pytest.mark.moto_only("a quota slot is taken in a transaction, which dynalite lacks")
def test_the_owner_quota_binds_to_the_owner_the_caller_got(
    function: Callable[[str, Runtime | None], Function], limited_store: LeaseStorePort, mode: str
) -> None:
    runtime = with_principals(runtime_of(limited_store, auth_mode=mode, max_leases_per_owner=1))
    api = Api(lambda name: function(name, runtime), mode)
    assert api.http(ANIM, "acquire_lease", acquire_event())[0] == 201
    status, body = api.http(ANIM, "acquire_lease", acquire_event(owner_id="anim-service"))
    assert (status, body["error"]["code"]) == (429, "quota_exceeded")
    assert "'anim-service'" in body["error"]["message"]
    assert api.http(ANIM, "acquire_lease", acquire_event(owner_id="anim-batch"))[0] == 201


@IDEMPOTENCY_RECORDS
def test_another_callers_idempotency_key_never_replays_its_lease(
    api: Api, provider: MemoryProvider, store: LeaseStorePort
) -> None:
    _, first = api.http(LIVE, "acquire_lease", acquire_event(key="job-7"))
    status, answer = api.http(ANIM, "acquire_lease", acquire_event(key="job-7"))
    assert status == 201 and answer["lease"]["lease_id"] != first["lease"]["lease_id"]
    assert (answer["lease"]["owner_id"], answer["lease"]["created_by"]) == ("anim-service", "anim")
    named = api.http(ANIM, "acquire_lease", acquire_event(key="job-7", owner_id="live-control"))
    assert named[0] == 403
    assert api.http(LIVE, "acquire_lease", acquire_event(key="job-7")) == (201, first)  # still its own replay
    assert len(provider.provisioned) == 2
    assert store.get(first["lease"]["lease_id"]).status is LeaseStatus.ACTIVE


# --- POST /v1/lease/{id}/renew -------------------------------------------------------------------------------


@pytest.mark.parametrize("status", ["active", "released", "pending"])
def test_renewing_another_owners_lease_is_to_a_service_exactly_a_lease_that_does_not_exist(
    api: Api, leases: Leases, store: LeaseStorePort, status: str
) -> None:
    others = {"active": leases.active, "released": leases.released, "pending": leases.pending}[status](
        owner_id="live-control"
    )
    nobodys = str(uuid.uuid4())
    refused = api(ANIM, "renew_lease", event("renew_lease", others.lease_id))
    missing = api(ANIM, "renew_lease", event("renew_lease", nobodys))
    assert refused["statusCode"] == 404
    assert same_answer(refused, missing, others.lease_id, nobodys)
    assert untouched(store, others)


def test_a_service_renews_its_own_owners_lease_without_x_lease_owner(api: Api, leases: Leases) -> None:
    lease = leases.active(owner_id="anim-batch")
    status, body = api.http(ANIM, "renew_lease", event("renew_lease", lease.lease_id, body='{"ttl_seconds": 900}'))
    assert (status, body["lease"]["ttl_seconds"]) == (200, 900)


@pytest.mark.parametrize("name", ["renew_lease", "release_lease"])
def test_a_viewer_renews_and_releases_nothing(
    api: Api, leases: Leases, provider: MemoryProvider, store: LeaseStorePort, name: str
) -> None:
    lease = running_lease(leases, provider, "live-control")
    for lease_id in (lease.lease_id, str(uuid.uuid4())):  # a lease that does not exist: as forbidden
        status, body = api.http(AUDIT, name, event(name, lease_id))
        assert (status, body["error"]["code"]) == (403, "forbidden")
    assert untouched(store, lease) and len(provider.workers) == 1


def test_an_operator_renews_any_owners_lease(api: Api, leases: Leases) -> None:
    lease = leases.active(owner_id="live-control")
    assert api.http(OPS, "renew_lease", event("renew_lease", lease.lease_id))[0] == 200


# --- DELETE /v1/lease/{id} -----------------------------------------------------------------------------------


def test_releasing_another_owners_lease_is_to_a_service_exactly_a_lease_that_does_not_exist(
    api: Api, leases: Leases, provider: MemoryProvider, store: LeaseStorePort
) -> None:
    others = running_lease(leases, provider, "live-control")
    nobodys = str(uuid.uuid4())
    refused = api(ANIM, "release_lease", event("release_lease", others.lease_id))
    missing = api(ANIM, "release_lease", event("release_lease", nobodys))
    assert refused["statusCode"] == 404
    assert same_answer(refused, missing, others.lease_id, nobodys)
    assert untouched(store, others) and len(provider.workers) == 1


@pytest.mark.parametrize(("caller", "owner"), [(ANIM, "anim-batch"), (OPS, "live-control")], ids=["own", "operator"])
def test_a_release_records_who_ended_the_lease(
    api: Api, leases: Leases, provider: MemoryProvider, store: LeaseStorePort, caller: Caller, owner: str
) -> None:
    lease = running_lease(leases, provider, owner)
    assert api.http(caller, "release_lease", event("release_lease", lease.lease_id))[0] == 204
    released = store.get(lease.lease_id)
    assert (released.status, released.ended_by, provider.workers) == (LeaseStatus.RELEASED, caller.name, {})


# --- DELETE /v1/leases ---------------------------------------------------------------------------------------


def release_all(api: Api, caller: Caller, owner_header: str | None = None, **query: str) -> tuple[int, Any]:
    sample = event("release_owner_leases", queryStringParameters=query)
    return api.http(caller, "release_owner_leases", sample, owner_header=owner_header)


def released_ids(body: dict[str, Any]) -> list[str]:
    return sorted(lease["lease_id"] for lease in body["released"])


def test_a_service_releasing_without_owner_id_releases_its_owners_leases_only(
    api: Api, leases: Leases, provider: MemoryProvider, store: LeaseStorePort
) -> None:
    own = [running(leases, provider, owner) for owner in ("anim-service", "anim-batch")]
    others = running_lease(leases, provider, "live-control")
    status, body = release_all(api, ANIM)
    assert (status, released_ids(body), body["next_token"]) == (200, sorted(own), None)
    assert {lease["ended_by"] for lease in body["released"]} == {"anim"}
    assert untouched(store, others)


def test_a_service_releasing_one_of_its_owners_releases_that_owners_leases(
    api: Api, leases: Leases, provider: MemoryProvider
) -> None:
    batch = running(leases, provider, "anim-batch")
    running(leases, provider, "anim-service")
    status, body = release_all(api, ANIM, owner_id="anim-batch")
    assert (status, released_ids(body)) == (200, [batch])


@pytest.mark.parametrize(
    ("caller", "query", "header"),
    [(ANIM, {"owner_id": "live-control"}, None), (AUDIT, {}, None), (ANIM, {}, "live-control")],
    ids=["service-other-owner", "viewer", "x-lease-owner-not-its-own"],
)
def test_a_bulk_release_the_caller_may_not_make_is_403_and_releases_nothing(
    api: Api,
    leases: Leases,
    provider: MemoryProvider,
    store: LeaseStorePort,
    caller: Caller,
    query: dict[str, str],
    header: str | None,
) -> None:
    everyone = [running_lease(leases, provider, owner) for owner in ("anim-service", "live-control")]
    status, body = release_all(api, caller, owner_header=header, **query)
    assert (status, body["error"]["code"]) == (403, "forbidden")
    assert all(untouched(store, lease) for lease in everyone) and len(provider.workers) == 2


def test_an_operator_releases_any_owners_leases_and_must_name_the_owner(
    api: Api, leases: Leases, provider: MemoryProvider
) -> None:
    others = running(leases, provider, "live-control")
    status, body = release_all(api, OPS)
    assert (status, body["error"]["details"]["problems"][0]["field"]) == (400, "owner_id")
    status, body = release_all(api, OPS, owner_id="live-control")
    assert (status, released_ids(body), body["released"][0]["ended_by"]) == (200, [others], "ops")
