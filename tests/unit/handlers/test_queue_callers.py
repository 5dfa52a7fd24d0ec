"""The queue and who is calling, in `token` and `iam` modes, on every store: an owner's priority limit binds to the
owner the caller's identity decided (never one it only names), and a queued lease is cancelled by those who may
release it — to a service another owner's queued lease is 404 exactly as one that does not exist."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from scheduler.lifecycle import LeaseStatus
from scheduler.owner_policies import OwnerPolicies
from scheduler.providers.memory import MemoryProvider
from scheduler.runtime import Runtime
from scheduler.store.port import LeaseStorePort

from ..builders import Leases
from .as_callers import ANIM, AUDIT, LIVE, MODES, OPS, Api, with_principals
from .conftest import Function, event, runtime_of
from .test_caller_rules_reads import same_answer
from .test_queue_routes import fill

POLICIES = OwnerPolicies.parse('{"live-control": {"max_priority": 30}}')


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def runtime(store: LeaseStorePort, provider: MemoryProvider, idempotency_table: str, mode: str) -> Runtime:
    configured = runtime_of(
        store, provider, idempotency_table=idempotency_table, auth_mode=mode, owner_policies=POLICIES
    )
    return with_principals(configured)


@pytest.fixture
def api(function: Callable[[str], Function], mode: str) -> Api:
    return Api(function, mode)


def acquire_event(**body: Any) -> dict[str, Any]:
    return event("acquire_lease", body=json.dumps({"kind": "renderer", "ttl_seconds": 600, **body}))


# --- OWNER_POLICIES' max_priority ------------------------------------------------------------------------------


def test_the_priority_limit_is_that_of_the_owner_the_callers_identity_decided(api: Api) -> None:
    status, body = api.http(LIVE, "acquire_lease", acquire_event(priority=31))  # no owner_id: live-control's
    assert (status, body["error"]["code"]) == (403, "forbidden")
    assert "'live-control'" in body["error"]["message"] and "max_priority 30" in body["error"]["message"]
    assert body["error"]["details"] == {"max_priority": 30}
    assert api.http(LIVE, "acquire_lease", acquire_event(priority=30))[0] == 201
    assert api.http(ANIM, "acquire_lease", acquire_event(priority=31))[0] == 201  # anim-service: the default 100


@pytest.mark.parametrize("how", ["owner_id", "x-lease-owner"])
def test_a_service_cannot_take_another_owners_priority_limit_by_naming_it(
    api: Api, provider: MemoryProvider, how: str
) -> None:
    if how == "owner_id":
        status, body = api.http(LIVE, "acquire_lease", acquire_event(priority=90, owner_id="anim-service"))
    else:
        status, body = api.http(LIVE, "acquire_lease", acquire_event(priority=90), owner_header="anim-service")
    assert (status, body["error"]["code"]) == (403, "forbidden")
    assert provider.provisioned == []


# --- DELETE /v1/lease/{id} of a queued lease --------------------------------------------------------------------


def test_cancelling_another_owners_queued_lease_is_to_a_service_exactly_a_lease_that_does_not_exist(
    api: Api, leases: Leases, store: LeaseStorePort
) -> None:
    others = store.get(fill(leases, store)["live-control"])
    nobodys = str(uuid.uuid4())
    refused = api(ANIM, "release_lease", event("release_lease", others.lease_id))
    missing = api(ANIM, "release_lease", event("release_lease", nobodys))
    assert refused["statusCode"] == 404
    assert same_answer(refused, missing, others.lease_id, nobodys)
    assert store.get(others.lease_id) == others


def test_a_viewer_cancels_no_queued_lease(api: Api, leases: Leases, store: LeaseStorePort) -> None:
    queued = store.get(fill(leases, store)["live-control"])
    status, body = api.http(AUDIT, "release_lease", event("release_lease", queued.lease_id))
    assert (status, body["error"]["code"]) == (403, "forbidden")
    assert store.get(queued.lease_id) == queued


@pytest.mark.parametrize(("caller", "owner"), [(ANIM, "anim-batch"), (OPS, "live-control")], ids=["own", "operator"])
def test_a_queued_lease_is_cancelled_by_a_caller_that_acts_for_its_owner(
    api: Api, leases: Leases, store: LeaseStorePort, provider: MemoryProvider, caller: Any, owner: str
) -> None:
    queued = fill(leases, store)[owner]
    assert api(caller, "release_lease", event("release_lease", queued))["statusCode"] == 204
    ended = store.get(queued)
    assert (ended.status, ended.ended_by, provider.provisioned) == (LeaseStatus.RELEASED, caller.name, [])
