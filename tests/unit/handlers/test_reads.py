"""GET /v1/lease/{id} and GET /v1/leases: answers, paging tokens, and a read that finds a worker stopped."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable
from datetime import timedelta

import pytest

from scheduler.clock import utc_now
from scheduler.models import ListFilter
from scheduler.providers.memory import MemoryProvider
from scheduler.store import LeaseStore
from tests.support.metrics import RecordedMetrics

from ..builders import Leases
from .conftest import Function, event, runtime_of


def list_event(**query: str) -> dict[str, object]:
    return event(
        "list_leases",
        queryStringParameters=query,
        rawQueryString="&".join(f"{key}={value}" for key, value in query.items()),
    )


def test_get_answers_200_with_the_lease(
    function: Callable[[str], Function], leases: Leases, provider: MemoryProvider
) -> None:
    lease = leases.active()
    provider.add_worker(lease.lease_id, str(lease.provider_token))
    status, body = function("get_lease").http(event("get_lease", lease.lease_id))
    assert (status, body["lease"]["lease_id"], body["lease"]["status"]) == (200, lease.lease_id, "active")


def test_get_of_an_unknown_lease_answers_404(function: Callable[[str], Function]) -> None:
    assert function("get_lease").http(event("get_lease", str(uuid.uuid4())))[0] == 404


def test_get_of_a_lease_whose_worker_stopped_answers_it_failed(
    function: Callable[[str], Function], leases: Leases, provider: MemoryProvider
) -> None:
    lease = leases.active()
    provider.add_worker(lease.lease_id, str(lease.provider_token))
    provider.stop(str(lease.provider_token), "the worker container exited with code 137, SIGKILL")

    status, body = function("get_lease").http(event("get_lease", lease.lease_id))

    assert (status, body["lease"]["status"]) == (200, "failed")
    assert body["lease"]["failure_reason"] == "the worker container exited with code 137, SIGKILL"


def test_a_read_that_ends_a_lease_counts_it_failed_and_a_ghost(
    function: Callable[[str], Function], leases: Leases, provider: MemoryProvider, metrics: RecordedMetrics
) -> None:
    lease = leases.active()
    provider.add_worker(lease.lease_id, str(lease.provider_token))
    provider.stop(str(lease.provider_token))

    function("get_lease").http(event("get_lease", lease.lease_id))

    assert [name for name in metrics.names() if name not in ("ReleaseLatency", "LeaseCost")] == [
        "LeaseFailed",
        "GhostLease",
    ]


def test_a_read_of_a_running_lease_counts_nothing(
    function: Callable[[str], Function], leases: Leases, provider: MemoryProvider, metrics: RecordedMetrics
) -> None:
    lease = leases.active()
    provider.add_worker(lease.lease_id, str(lease.provider_token))
    function("get_lease").http(event("get_lease", lease.lease_id))
    assert metrics.names() == []


def test_list_answers_a_page_and_its_token(function: Callable[[str], Function], leases: Leases) -> None:
    made = [leases.active(), leases.active()]  # at NOW, the runtime's clock
    status, body = function("list_leases").http(list_event(limit="1000"))
    assert status == 200 and body["next_token"] is None
    assert {lease.lease_id for lease in made} <= {lease["lease_id"] for lease in body["leases"]}


def test_a_lease_whose_worker_could_not_be_removed_is_listed_releasing(
    function: Callable[[str], Function], leases: Leases, provider: MemoryProvider
) -> None:
    lease = leases.active(owner_id="anim-service")
    provider.add_worker(lease.lease_id, str(lease.provider_token))
    provider.fail_releases = 1  # the provider's release raises ProviderRequestFailed: the worker stays
    assert function("release_lease").http(event("release_lease", lease.lease_id))[0] == 502

    status, body = function("list_leases").http(list_event(owner_id="anim-service"))

    assert status == 200
    assert [(listed["lease_id"], listed["status"]) for listed in body["leases"]] == [(lease.lease_id, "releasing")]


def test_a_continuation_asked_for_after_its_start_key_expired_answers_200(
    function: Callable[[str], Function], store: LeaseStore, leases: Leases
) -> None:
    now = utc_now()
    soon = leases.active(created_at=now - timedelta(seconds=60), ttl_seconds=30)  # expired 30 s ago
    later = leases.active(created_at=now, ttl_seconds=600)
    page, token = store.list_live(ListFilter(limit=1), now - timedelta(seconds=45))  # a consumer 45 s ago
    assert [lease.lease_id for lease in page] == [soon.lease_id] and token
    listing = function("list_leases", runtime_of(store, clock=lambda: now))

    status, body = listing.http(list_event(limit="1", next_token=token))

    assert status == 200, body
    assert [lease["lease_id"] for lease in body["leases"]] in ([later.lease_id], [])  # a page may be short


def token(payload: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


START = {"lease_id": {"S": "0b6c2f0e-8f0e-4f54-9d8e-3c8a3e4d9a11"}, "live_shard": {"S": "0"}}


@pytest.mark.parametrize(
    "crafted",
    [
        token({"s": 0, "k": {**START, "due_at": {"N": "99999999999999999999"}}}),
        token({"s": 0, "k": {**START, "due_at": {"N": "NaN"}}}),
        token({"s": 0, "k": {**START, "due_at": {"B": "AA=="}}}),
        token({"s": 0, "k": {**START, "due_at": {"N": "1"}, "extra": {"S": "x"}}}),
        token({"s": 1, "k": None}),
        token({"s": True, "k": None}),
        token({"s": 0.5, "k": None}),
        "\ud800",
        "a" * 4000,
    ],
    ids=[
        "huge-due",
        "nan-due",
        "binary-due",
        "extra-attribute",
        "unknown-shard",
        "bool-shard",
        "float-shard",
        "lone-surrogate",
        "long",
    ],
)
def test_a_crafted_next_token_answers_400(function: Callable[[str], Function], crafted: str) -> None:
    status, body = function("list_leases").http(list_event(next_token=crafted))
    assert (status, body["error"]["code"]) == (400, "invalid_request")
