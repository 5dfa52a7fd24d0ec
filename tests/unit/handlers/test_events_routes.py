"""The history and webhooks routes through the edge, as each AUTH_MODE's caller (the rules themselves are
tests/unit/webhooks/test_registry.py's): answers, refusals counted as refused authorizations, secrets never logged."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from typing import Any

import pytest

from devstack.dynamodb import FAKE_CREDENTIALS
from scheduler.events.producer import events_of
from scheduler.runtime import Runtime
from scheduler.store.memory import MemoryLeaseStore
from scheduler.store.memory.history import MemoryHistory
from scheduler.store.memory.webhooks import MemoryWebhooks
from tests.support.metrics import RecordedMetrics

from ..builders import NOW, Leases
from ..conftest import memory_store
from .conftest import Function, event, runtime_of

SERVICE = {"lambda": {"caller": "anim", "role": "service", "owners": '["anim-service"]'}}
OTHER = {"lambda": {"caller": "render", "role": "service", "owners": '["render-service"]'}}
VIEWER = {"lambda": {"caller": "audit", "role": "viewer", "owners": "[]"}}


class Routes:
    def __init__(self, load: Callable[..., Function]) -> None:
        self.store: MemoryLeaseStore = memory_store()
        self.metrics = RecordedMetrics()
        self.runtime: Runtime = runtime_of(
            self.store, metrics=self.metrics, auth_mode="token", webhook_allow_loopback=True
        )
        self.runtime.webhooks = MemoryWebhooks()
        self.runtime.history = MemoryHistory()
        self.load = load

    def call(self, name: str, authorizer: dict[str, Any], body: Any = None, **changes: Any) -> tuple[int, Any]:
        sample = event(name, **changes)
        sample["requestContext"] = {**sample["requestContext"], "authorizer": authorizer}
        sample["headers"] = {key: value for key, value in sample["headers"].items() if key != "x-lease-owner"}
        if body is not None:
            sample["body"] = json.dumps(body)
        return self.load(name, self.runtime).http(sample)  # type: ignore[no-any-return]

    def add(self, authorizer: dict[str, Any]) -> dict[str, Any]:
        status, body = self.call("create_webhook", authorizer, {"url": "http://127.0.0.1:9/in"})
        assert status == 201, body
        return dict(body)


@pytest.fixture
def routes(monkeypatch: pytest.MonkeyPatch) -> Routes:
    """The routes on the memory store (the registry's and the history's rules run on every backend elsewhere)."""

    def load(name: str, runtime: Runtime) -> Function:
        with monkeypatch.context() as init:
            for variable, value in FAKE_CREDENTIALS.items():
                init.setenv(variable, value)
            module = importlib.import_module(f"functions.{name}.app")
        monkeypatch.setattr(module, "runtime", runtime)
        return Function(module, runtime)

    return Routes(load)


def test_a_service_adds_a_webhook_for_its_owner_and_sees_the_secret_once(
    routes: Routes, capsys: pytest.CaptureFixture[str]
) -> None:
    created = routes.add(SERVICE)

    assert created["webhook"]["owner_id"] == "anim-service" and created["secret"].startswith("whsec_")
    status, listed = routes.call("list_webhooks", SERVICE, queryStringParameters={})
    assert status == 200 and listed == {"webhooks": [created["webhook"]]}
    assert created["secret"] not in capsys.readouterr().out


def test_a_viewer_adding_one_is_refused_and_counted(routes: Routes) -> None:
    status, body = routes.call("create_webhook", VIEWER, {"url": "http://127.0.0.1:9/in", "owner_id": "anim-service"})

    assert (status, body["error"]["code"]) == (403, "forbidden")
    assert routes.metrics.of("AuthRefused") == [{"status": "403", "value": 1}]


def test_a_url_to_a_private_address_is_a_400_naming_it(routes: Routes) -> None:
    status, body = routes.call("create_webhook", SERVICE, {"url": "https://10.0.0.1/in"})

    assert status == 400
    assert body["error"]["details"]["problems"] == [{"field": "url", "problem": "10.0.0.1 is a private address"}]


def test_another_owners_webhook_is_not_found_to_a_service_and_counted(routes: Routes) -> None:
    created = routes.add(OTHER)
    path = {"webhook_id": created["webhook"]["id"]}

    status, body = routes.call("delete_webhook", SERVICE, pathParameters=path)

    assert (status, body["error"]["code"]) == (404, "not_found")
    assert routes.metrics.of("AuthRefused") == [{"status": "404", "value": 1}]
    assert routes.call("delete_webhook", OTHER, pathParameters=path)[0] == 204


def test_listing_another_owners_webhooks_is_forbidden_to_a_service(routes: Routes) -> None:
    assert routes.call("list_webhooks", SERVICE, queryStringParameters={"owner_id": "render-service"})[0] == 403


def _activated(routes: Routes, owner: str) -> str:
    lease = Leases(routes.store).active(owner_id=owner)
    item = routes.store.stored_item(lease.lease_id)
    record = {
        "eventName": "MODIFY",
        "dynamodb": {"SequenceNumber": "100", "OldImage": {**item, "status": {"S": "pending"}}, "NewImage": item},
    }
    routes.runtime.history.record(events_of(record), NOW)
    return lease.lease_id


def test_the_history_of_a_lease_of_its_owners_reads_back(routes: Routes) -> None:
    lease_id = _activated(routes, "anim-service")

    status, body = routes.call("lease_events", SERVICE, queryStringParameters={}, pathParameters={"lease_id": lease_id})

    assert status == 200 and body["next_after"] is None
    assert [event["type"] for event in body["events"]] == ["lease.active", "lease.ready"]


def test_the_history_of_another_owners_lease_is_not_found_to_a_service(routes: Routes) -> None:
    lease_id = _activated(routes, "render-service")

    status, _ = routes.call("lease_events", SERVICE, queryStringParameters={}, pathParameters={"lease_id": lease_id})

    assert status == 404 and routes.metrics.of("AuthRefused") == [{"status": "404", "value": 1}]


def test_a_history_query_out_of_bounds_is_a_400_naming_it(routes: Routes) -> None:
    lease_id = _activated(routes, "anim-service")
    query = {"after": "-1", "limit": "1001"}

    status, body = routes.call(
        "lease_events", SERVICE, queryStringParameters=query, pathParameters={"lease_id": lease_id}
    )

    assert status == 400
    assert [problem["field"] for problem in body["error"]["details"]["problems"]] == ["after", "limit"]
