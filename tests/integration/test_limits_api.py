"""Safe under retries and load, through the public API: idempotent acquire, caps, quotas, CORS and throttling."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.support.stack import RunningStack, start_stack

MANAGED = "openalice.scheduler/managed=true"


@pytest.fixture(scope="module")
def limited(docker_host: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """A stack with a cap of 10 local-docker leases, an owner quota of 2, CORS for one origin, and throttling."""
    running = start_stack(
        tmp_path_factory.mktemp("limited"),
        docker_env=docker_host.env(),
        extra_env={
            "LOCAL_DOCKER_MAX_LEASES": "10",
            "MAX_LEASES_PER_OWNER": "2",
            "CORS_ORIGINS": "https://console.openalice.example",
            "THROTTLING_BURST_LIMIT": "400",
            "THROTTLING_RATE_LIMIT": "400",
            "RECONCILE_INTERVAL_SECONDS": "3600",
        },
    )
    yield running
    running.stop()


@pytest.fixture(scope="module")
def throttled(docker_host: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    running = start_stack(
        tmp_path_factory.mktemp("throttled"),
        docker_env=docker_host.env(),
        extra_env={"THROTTLING_BURST_LIMIT": "3", "THROTTLING_RATE_LIMIT": "1"},
    )
    yield running
    running.stop()


def _release_all(stack: RunningStack) -> None:
    for lease in stack.request("GET", "/v1/leases", params={"limit": "1000"}).json()["leases"]:
        stack.request("DELETE", f"/v1/lease/{lease['lease_id']}", owner=lease["owner_id"])


def _managed(docker_client: Any) -> int:
    return len(docker_client.containers.list(all=True, filters={"label": MANAGED}))


# --- idempotent acquire -------------------------------------------------------------------------


def test_repeated_acquire_with_one_key_returns_the_same_lease(stack: RunningStack, docker_client: Any) -> None:
    before = _managed(docker_client)
    headers = {"Idempotency-Key": "job-41-attempt"}
    first = stack.request("POST", "/v1/lease", json={"kind": "renderer"}, headers=headers)
    second = stack.request("POST", "/v1/lease", json={"kind": "renderer"}, headers=headers)

    assert first.status_code == second.status_code == 201
    assert first.json() == second.json()
    assert _managed(docker_client) == before + 1


def test_same_key_with_another_body_is_a_conflict(stack: RunningStack) -> None:
    headers = {"Idempotency-Key": "job-42-attempt"}
    stack.request("POST", "/v1/lease", json={"kind": "renderer"}, headers=headers)
    response = stack.request("POST", "/v1/lease", json={"kind": "anim"}, headers=headers)
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "conflict"


def test_ten_concurrent_acquires_with_one_key_make_one_container(stack: RunningStack, docker_client: Any) -> None:
    before = _managed(docker_client)
    headers = {"Idempotency-Key": "job-43-burst"}

    with ThreadPoolExecutor(max_workers=10) as pool:
        responses = list(
            pool.map(lambda _: stack.request("POST", "/v1/lease", json={"kind": "anim"}, headers=headers), range(10))
        )

    assert {response.status_code for response in responses} == {201}
    assert len({response.json()["lease"]["lease_id"] for response in responses}) == 1
    assert _managed(docker_client) == before + 1


def test_too_long_idempotency_key_is_rejected(stack: RunningStack) -> None:
    response = stack.request("POST", "/v1/lease", json={"kind": "anim"}, headers={"Idempotency-Key": "k" * 300})
    assert response.status_code == 400


# --- caps and quotas ----------------------------------------------------------------------------


def test_two_hundred_concurrent_acquires_against_a_cap_of_ten_make_exactly_ten_workers(
    limited: RunningStack, docker_client: Any
) -> None:
    _release_all(limited)
    before = _managed(docker_client)

    with ThreadPoolExecutor(max_workers=40) as pool:
        # One owner each: leases without owner_id would share the owner `-` and its quota of 2.
        responses = list(
            pool.map(lambda i: limited.acquire(kind="anim", ttl_seconds=600, owner_id=f"c{i}"), range(200))
        )

    statuses = [response.status_code for response in responses]
    assert statuses.count(201) == 10
    assert statuses.count(503) == 190
    assert {r.json()["error"]["code"] for r in responses if r.status_code == 503} == {"no_capacity"}
    assert _managed(docker_client) == before + 10
    _release_all(limited)


def test_release_gives_the_capped_slot_back(limited: RunningStack) -> None:
    _release_all(limited)
    leases = [limited.acquire(owner_id=f"slot-{i}").json()["lease"] for i in range(10)]
    assert limited.acquire(owner_id="slot-10").status_code == 503

    limited.request("DELETE", f"/v1/lease/{leases[0]['lease_id']}", owner="slot-0")

    assert limited.acquire(owner_id="slot-10").status_code == 201
    _release_all(limited)


def test_acquire_beyond_the_owner_quota_is_refused_naming_the_limit(limited: RunningStack) -> None:
    _release_all(limited)
    for _ in range(2):
        assert limited.acquire(owner_id="greedy").status_code == 201

    response = limited.acquire(owner_id="greedy")

    assert response.status_code == 429
    error = response.json()["error"]
    assert error["code"] == "quota_exceeded"
    assert "MAX_LEASES_PER_OWNER=2" in error["message"]
    _release_all(limited)


# --- the edge: CORS and throttling --------------------------------------------------------------


def test_preflight_from_an_allowed_origin_is_answered_by_the_gateway(limited: RunningStack) -> None:
    response = limited.request(
        "OPTIONS",
        "/v1/leases",
        secret="",
        headers={"Origin": "https://console.openalice.example", "Access-Control-Request-Method": "GET"},
    )
    assert response.status_code == 204
    assert response.headers["Access-Control-Allow-Origin"] == "https://console.openalice.example"


def test_other_origins_get_no_cors_headers(limited: RunningStack) -> None:
    response = limited.request("GET", "/v1/leases", headers={"Origin": "https://evil.example"})
    assert response.status_code == 200
    assert "Access-Control-Allow-Origin" not in response.headers


def test_no_cors_headers_when_no_origins_are_configured(stack: RunningStack) -> None:
    response = stack.request("GET", "/v1/leases", headers={"Origin": "https://console.openalice.example"})
    assert "Access-Control-Allow-Origin" not in response.headers


def test_requests_beyond_the_route_throttle_get_429(throttled: RunningStack) -> None:
    statuses = [throttled.request("GET", "/health", secret="").status_code for _ in range(8)]
    assert statuses[0] == 200  # within the burst of 3 (the stack's own readiness probe spent one)
    assert 429 in statuses
