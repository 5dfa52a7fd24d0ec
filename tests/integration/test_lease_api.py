"""The lease API over real HTTP through the local stack, on a real Docker host over mutual TLS."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.stack import RunningStack

MANAGED = "openalice.scheduler/managed"
LEASE_LABEL = "openalice.scheduler/lease-id"


def _containers_of(docker_client: Any, lease_id: str) -> list[Any]:
    return docker_client.containers.list(all=True, filters={"label": f"{LEASE_LABEL}={lease_id}"})


def _error_code(response: Any) -> str:
    return str(response.json()["error"]["code"])


# --- health and authorization ----------------------------------------------------------------


def test_health_answers_without_a_secret(stack: RunningStack) -> None:
    response = stack.request("GET", "/health", secret="")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "service": "openalice-scheduler"}


def test_request_without_secret_is_unauthorized(stack: RunningStack) -> None:
    response = stack.request("GET", "/v1/leases", secret="")
    assert response.status_code == 401


def test_request_with_wrong_secret_is_forbidden(stack: RunningStack) -> None:
    response = stack.request("GET", "/v1/leases", secret="not-the-secret")
    assert response.status_code == 403


def test_unknown_route_is_not_found(stack: RunningStack) -> None:
    assert stack.request("GET", "/v2/nothing").status_code == 404


# --- acquire -----------------------------------------------------------------------------------


def test_acquire_starts_a_labelled_container_with_the_lease_environment(
    stack: RunningStack, docker_client: Any
) -> None:
    response = stack.acquire(kind="anim", ttl_seconds=600, owner_id="anim-svc", env={"JOB_ID": "42"})

    assert response.status_code == 201
    body = response.json()
    lease = body["lease"]
    assert body["provider"] == "local-docker"
    assert lease["status"] == "active" and lease["kind"] == "anim" and lease["gpu"] == "none"
    assert lease["owner_id"] == "anim-svc" and lease["ttl_seconds"] == 600
    (container,) = _containers_of(docker_client, lease["lease_id"])
    assert container.id == lease["provider_token"]
    assert container.status == "running"
    assert container.labels[MANAGED] == "true" and container.labels["openalice.scheduler/kind"] == "anim"
    env = dict(item.split("=", 1) for item in container.attrs["Config"]["Env"])
    assert env["JOB_ID"] == "42"
    assert env["LEASE_ID"] == lease["lease_id"]
    assert env["LEASE_EXPIRES_AT"] == lease["expires_at"]
    assert container.attrs["HostConfig"]["NetworkMode"] == "none"


def test_acquired_lease_has_every_contract_field(stack: RunningStack) -> None:
    lease = stack.acquire().json()["lease"]
    assert set(lease) == {
        "lease_id",
        "provider",
        "kind",
        "gpu",
        "status",
        "endpoint",
        "created_at",
        "expires_at",
        "released_at",
        "provider_token",
        "owner_id",
        "correlation_id",
        "region",
        "ttl_seconds",
        "cost_per_hour",
        "failure_reason",
        "worker_state",
        "ready_at",
        "max_cost_per_hour",
        "cost_usd",
        "created_by",
        "ended_by",
    }
    assert lease["created_at"].endswith("Z") and lease["released_at"] is None
    assert (lease["created_by"], lease["ended_by"]) == ("shared-secret", None)  # AUTH_MODE=secret


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"kind": "painter"}, "kind"),
        ({"kind": "renderer", "ttl_seconds": 0}, "ttl_seconds"),
        ({"kind": "renderer", "ttl_seconds": 28801}, "ttl_seconds"),
        ({"kind": "renderer", "colour": "blue"}, "colour"),
        ({"kind": "renderer", "env": {f"K{i}": "v" for i in range(65)}}, "env"),
        ({"kind": "renderer", "env": {"lower": "v"}}, "env"),
        ({"kind": "renderer", "gpu": "huge"}, "gpu"),
        ({"gpu": "none"}, "kind"),
    ],
    ids=["wrong-kind", "ttl-0", "ttl-28801", "unknown-field", "oversized-env", "bad-env-key", "bad-gpu", "no-kind"],
)
def test_invalid_lease_request_is_rejected_with_a_structured_error(
    stack: RunningStack, body: dict[str, Any], field: str
) -> None:
    response = stack.acquire(**body) if "kind" in body else stack.request("POST", "/v1/lease", json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert field in error["message"]
    assert "Traceback" not in response.text


def test_non_json_body_is_rejected(stack: RunningStack) -> None:
    response = stack.request("POST", "/v1/lease", data="kind=renderer", headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    assert _error_code(response) == "invalid_request"


def test_json_that_is_not_an_object_is_rejected(stack: RunningStack) -> None:
    response = stack.request("POST", "/v1/lease", json=["renderer"])
    assert response.status_code == 400
    assert _error_code(response) == "invalid_request"


def test_rejected_request_leaves_no_container(stack: RunningStack, docker_client: Any) -> None:
    before = len(docker_client.containers.list(all=True, filters={"label": f"{MANAGED}=true"}))
    stack.acquire(kind="renderer", ttl_seconds=0)
    assert len(docker_client.containers.list(all=True, filters={"label": f"{MANAGED}=true"})) == before


def test_gpu_class_docker_cannot_serve_gets_no_capacity(stack: RunningStack) -> None:
    response = stack.acquire(gpu="high")
    assert response.status_code == 503
    assert _error_code(response) == "no_capacity"


# --- get and list ------------------------------------------------------------------------------


def test_get_returns_the_lease(stack: RunningStack) -> None:
    lease = stack.acquire(correlation_id="job-7").json()["lease"]
    response = stack.request("GET", f"/v1/lease/{lease['lease_id']}")
    assert response.status_code == 200
    assert response.json()["lease"] == lease


def test_get_of_unknown_lease_is_not_found(stack: RunningStack) -> None:
    response = stack.request("GET", "/v1/lease/00000000-0000-4000-8000-000000000000")
    assert response.status_code == 404
    assert _error_code(response) == "not_found"


def test_list_filters_by_owner(stack: RunningStack) -> None:
    mine = stack.acquire(owner_id="list-owner").json()["lease"]
    stack.acquire(owner_id="someone-else")
    response = stack.request("GET", "/v1/leases", params={"owner_id": "list-owner"})
    assert response.status_code == 200
    assert [lease["lease_id"] for lease in response.json()["leases"]] == [mine["lease_id"]]


def test_list_pages_with_limit_and_next_token(stack: RunningStack) -> None:
    ids = {stack.acquire(owner_id="pager").json()["lease"]["lease_id"] for _ in range(3)}
    seen: list[str] = []
    token = None
    for _ in range(10):
        params = {"owner_id": "pager", "limit": "1", **({"next_token": token} if token else {})}
        page = stack.request("GET", "/v1/leases", params=params).json()
        seen += [lease["lease_id"] for lease in page["leases"]]
        token = page["next_token"]
        if token is None:
            break
    assert sorted(seen) == sorted(ids)


@pytest.mark.parametrize("params", [{"limit": "0"}, {"limit": "1001"}, {"kind": "painter"}, {"next_token": "garbage!"}])
def test_list_with_bad_query_is_rejected(stack: RunningStack, params: dict[str, str]) -> None:
    response = stack.request("GET", "/v1/leases", params=params)
    assert response.status_code == 400
    assert _error_code(response) == "invalid_request"


# --- release -----------------------------------------------------------------------------------


def test_release_removes_the_container_and_records_the_release(stack: RunningStack, docker_client: Any) -> None:
    lease = stack.acquire(owner_id="svc").json()["lease"]

    response = stack.request("DELETE", f"/v1/lease/{lease['lease_id']}", owner="svc")

    assert response.status_code == 204 and response.content == b""
    assert _containers_of(docker_client, lease["lease_id"]) == []
    released = stack.request("GET", f"/v1/lease/{lease['lease_id']}").json()["lease"]
    assert released["status"] == "released" and released["released_at"] is not None


def test_released_lease_is_not_listed(stack: RunningStack) -> None:
    lease = stack.acquire(owner_id="gone-from-list").json()["lease"]
    stack.request("DELETE", f"/v1/lease/{lease['lease_id']}", owner="gone-from-list")
    listed = stack.request("GET", "/v1/leases", params={"owner_id": "gone-from-list"}).json()["leases"]
    assert listed == []


def test_release_by_other_owner_is_forbidden_and_keeps_the_container(stack: RunningStack, docker_client: Any) -> None:
    lease = stack.acquire(owner_id="owner-a").json()["lease"]

    response = stack.request("DELETE", f"/v1/lease/{lease['lease_id']}", owner="owner-b")

    assert response.status_code == 403
    assert _error_code(response) == "forbidden"
    assert len(_containers_of(docker_client, lease["lease_id"])) == 1


def test_release_without_owner_header_of_owned_lease_is_forbidden(stack: RunningStack) -> None:
    lease = stack.acquire(owner_id="owner-a").json()["lease"]
    assert stack.request("DELETE", f"/v1/lease/{lease['lease_id']}").status_code == 403


def test_release_of_unowned_lease_needs_no_owner_header(stack: RunningStack) -> None:
    lease = stack.acquire().json()["lease"]
    assert stack.request("DELETE", f"/v1/lease/{lease['lease_id']}").status_code == 204


def test_second_release_is_not_found(stack: RunningStack) -> None:
    lease = stack.acquire().json()["lease"]
    stack.request("DELETE", f"/v1/lease/{lease['lease_id']}")
    response = stack.request("DELETE", f"/v1/lease/{lease['lease_id']}")
    assert response.status_code == 404
    assert _error_code(response) == "not_found"


def test_release_of_unknown_lease_is_not_found(stack: RunningStack) -> None:
    response = stack.request("DELETE", "/v1/lease/00000000-0000-4000-8000-000000000000")
    assert response.status_code == 404
