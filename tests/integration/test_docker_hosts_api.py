"""The lease API (`make run`) on the Docker hosts users run: Docker's TLS guide, Engine 29's API gate, a hung
engine, and workers killed behind the service's back — real engines on loopback throughout."""

from __future__ import annotations

import shutil
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devstack.docker_tls import generate_untrusted_client
from scheduler.lifecycle import LeaseStatus
from tests.support.engine29_proxy import Engine29Proxy
from tests.support.silent_engine import SilentEngine
from tests.support.stack import RunningStack, start_stack
from tests.support.waiting import wait_for

LEASE_LABEL = "openalice.scheduler/lease-id"
API_GATEWAY_TIMEOUT_SECONDS = 30.0
NO_SCHEDULES = {"SWEEP_INTERVAL_SECONDS": "3600", "RECONCILE_INTERVAL_SECONDS": "3600"}


def _containers_of(client: Any, lease_id: str) -> list[Any]:
    return list(client.containers.list(all=True, filters={"label": f"{LEASE_LABEL}={lease_id}"}))


def _stored_status(stack: RunningStack, lease_id: str) -> LeaseStatus:
    """The lease as the table holds it (a GET would check the worker itself)."""
    return stack.lease_store().get(lease_id).status


# --- a host secured as Docker's guide shows ------------------------------------------------------


@pytest.fixture(scope="module")
def docs_style_stack(docs_style_host: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    state_dir = tmp_path_factory.mktemp("docs-style")
    running = start_stack(state_dir, docker_env=docs_style_host.env(), extra_env=NO_SCHEDULES)
    yield running
    running.stop()


def test_a_host_secured_as_dockers_guide_shows_acquires_and_releases(
    docs_style_stack: RunningStack, docs_style_host: Any
) -> None:
    client = docs_style_host.client()
    try:
        acquired = docs_style_stack.acquire(owner_id="guide")
        assert acquired.status_code == 201, acquired.text
        lease_id = acquired.json()["lease"]["lease_id"]
        assert [container.status for container in _containers_of(client, lease_id)] == ["running"]

        released = docs_style_stack.request("DELETE", f"/v1/lease/{lease_id}", owner="guide")

        assert released.status_code == 204
        assert _containers_of(client, lease_id) == []
    finally:
        client.close()


def test_a_host_secured_as_dockers_guide_is_warned_about_once(docs_style_stack: RunningStack) -> None:
    docs_style_stack.acquire()
    docs_style_stack.acquire()
    # The functions' own log lines (`[FunctionName] {json}`), not the dev stack's (which prepares images).
    warnings = [
        line for line in docs_style_stack.logs().splitlines() if "has no keyUsage extension" in line and "] {" in line
    ]
    by_function = Counter(line.split("]", 1)[0].lstrip("[") for line in warnings)
    assert by_function["AcquireLeaseFunction"] == 1  # once per execution environment, however many acquires
    assert set(by_function.values()) == {1}
    assert all('"level":"WARNING"' in line and "scripts/docker-host-certs" in line for line in warnings)


# --- Engine 29's API version gate ------------------------------------------------------------------


@pytest.fixture(scope="module")
def engine29(docker_host: Any) -> Iterator[Engine29Proxy]:
    proxy = Engine29Proxy(docker_host.host, Path(docker_host.cert_path)).start()
    yield proxy
    proxy.stop()


@pytest.fixture(scope="module")
def engine29_stack(engine29: Engine29Proxy, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    running = start_stack(tmp_path_factory.mktemp("engine29"), docker_env=engine29.env(), extra_env=NO_SCHEDULES)
    yield running
    running.stop()


def test_engine_29_acquires_and_releases_with_a_negotiated_version(
    engine29_stack: RunningStack, engine29: Engine29Proxy, docker_client: Any
) -> None:
    acquired = engine29_stack.acquire()
    assert acquired.status_code == 201, acquired.text
    lease_id = acquired.json()["lease"]["lease_id"]
    assert len(_containers_of(docker_client, lease_id)) == 1

    assert engine29_stack.request("DELETE", f"/v1/lease/{lease_id}").status_code == 204

    assert _containers_of(docker_client, lease_id) == []
    refused = [request for request in engine29.requests_seen if "/v1.41/" in request or "/v1.43/" in request]
    assert refused == []  # nothing ever spoke a version Engine 29 refuses


# --- an engine that accepts connections and never answers ----------------------------------------


@pytest.fixture(scope="module")
def silent_engine() -> Iterator[SilentEngine]:
    with SilentEngine() as engine:
        yield engine


@pytest.fixture(scope="module")
def hung_stack(
    silent_engine: SilentEngine, docker_host: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningStack]:
    running = start_stack(
        tmp_path_factory.mktemp("hung"),
        docker_env={**docker_host.env(), "DOCKER_HOST": silent_engine.host},
        # Images named up front: the stack would otherwise wait on the silent engine to prepare them.
        extra_env={**NO_SCHEDULES, "RENDERER_IMAGE": "openalice/renderer:dev", "ANIM_IMAGE": "openalice/anim:dev"},
    )
    yield running
    running.stop()


def test_acquire_on_a_hung_engine_answers_503_naming_the_provider_before_api_gateways_timeout(
    hung_stack: RunningStack,
) -> None:
    started = time.monotonic()
    response = hung_stack.acquire()
    elapsed = time.monotonic() - started

    assert response.status_code == 503
    error = response.json()["error"]
    assert error["code"] == "no_capacity"
    assert "timed out" in error["details"]["providers"]["local-docker"]
    assert elapsed < API_GATEWAY_TIMEOUT_SECONDS
    print(f"hung engine: 503 after {elapsed:.1f} s: {error['details']['providers']['local-docker']}")


# --- a client given the wrong CA ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def wrong_ca_stack(docker_host: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    wrong = generate_untrusted_client(tmp_path_factory.mktemp("wrong-ca") / "certs")
    for name in ("cert.pem", "key.pem"):
        shutil.copyfile(Path(docker_host.cert_path) / name, wrong / name)
    running = start_stack(
        tmp_path_factory.mktemp("wrong-ca-stack"),
        docker_env={**docker_host.env(), "DOCKER_CERT_PATH": str(wrong)},
        extra_env={**NO_SCHEDULES, "RENDERER_IMAGE": "openalice/renderer:dev", "ANIM_IMAGE": "openalice/anim:dev"},
    )
    yield running
    running.stop()


def test_a_wrong_ca_is_named_to_the_caller_and_in_the_log(wrong_ca_stack: RunningStack) -> None:
    response = wrong_ca_stack.acquire()

    assert response.status_code == 503
    problem = response.json()["error"]["details"]["providers"]["local-docker"]
    assert problem.startswith("TLS verification of the Docker host's certificate failed: unable to get local issuer")
    assert "not signed by" in problem and "/certs/ca.pem" in problem
    logged = [line for line in wrong_ca_stack.logs().splitlines() if '"message":"Docker host call failed"' in line]
    assert logged and "TLS verification of the Docker host's certificate failed" in logged[0]


# --- a worker killed behind the service's back ---------------------------------------------------


@pytest.fixture(scope="module")
def unswept_stack(docker_host: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    running = start_stack(tmp_path_factory.mktemp("unswept"), docker_env=docker_host.env(), extra_env=NO_SCHEDULES)
    yield running
    running.stop()


def test_a_killed_worker_fails_its_lease_through_the_sweep(stack: RunningStack, docker_client: Any) -> None:
    lease = stack.acquire(ttl_seconds=600).json()["lease"]
    (container,) = _containers_of(docker_client, lease["lease_id"])

    container.kill()

    wait_for(lambda: _stored_status(stack, lease["lease_id"]) == LeaseStatus.FAILED, timeout=20, what="the sweep")
    ended = stack.lease_store().get(lease["lease_id"])
    assert str(ended.failure_reason).startswith("the worker container exited with code 137, SIGKILL at ")
    assert _containers_of(docker_client, lease["lease_id"]) == []


def test_a_killed_worker_fails_its_lease_when_it_is_read(unswept_stack: RunningStack, docker_client: Any) -> None:
    lease = unswept_stack.acquire(ttl_seconds=600).json()["lease"]
    (container,) = _containers_of(docker_client, lease["lease_id"])
    container.kill()
    time.sleep(1.1)  # past the read check's interval from the acquire's own read, if any

    def read() -> dict[str, Any]:
        return dict(unswept_stack.request("GET", f"/v1/lease/{lease['lease_id']}").json()["lease"])

    failed = wait_for(lambda: (got := read())["status"] == "failed" and got, timeout=20, what="GET to end it")

    assert failed["failure_reason"].startswith("the worker container exited with code 137, SIGKILL at ")
    assert failed["released_at"] is not None
    assert _containers_of(docker_client, lease["lease_id"]) == []


def test_a_lease_failed_by_a_dead_worker_can_no_longer_be_renewed(
    unswept_stack: RunningStack, docker_client: Any
) -> None:
    lease = unswept_stack.acquire(ttl_seconds=600).json()["lease"]
    _containers_of(docker_client, lease["lease_id"])[0].kill()
    wait_for(
        lambda: unswept_stack.request("GET", f"/v1/lease/{lease['lease_id']}").json()["lease"]["status"] == "failed",
        timeout=20,
        what="GET to end it",
    )

    assert unswept_stack.request("POST", f"/v1/lease/{lease['lease_id']}/renew", json={}).status_code == 404
