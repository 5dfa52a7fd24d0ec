"""What callers see when the Docker host is down or refuses the container: 503/502, and nothing left behind."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.stack import RunningStack, start_stack


@pytest.fixture(scope="module")
def stack_without_docker_host(docker_host: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """A stack whose DOCKER_HOST points at a loopback port nothing listens on."""
    env = {**docker_host.env(), "DOCKER_HOST": "tcp://127.0.0.1:9"}
    running = start_stack(tmp_path_factory.mktemp("no-docker"), docker_env=env)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def stack_with_missing_image(docker_host: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """A stack whose renderer image does not exist on the Docker host."""
    running = start_stack(
        tmp_path_factory.mktemp("no-image"),
        docker_env=docker_host.env(),
        extra_env={"RENDERER_IMAGE": "openalice/does-not-exist:1"},
    )
    yield running
    running.stop()


def test_unreachable_docker_host_answers_no_capacity(stack_without_docker_host: RunningStack) -> None:
    response = stack_without_docker_host.acquire()
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "no_capacity"


def test_unreachable_docker_host_leaves_no_live_lease(stack_without_docker_host: RunningStack) -> None:
    stack_without_docker_host.acquire(owner_id="down")
    listed = stack_without_docker_host.request("GET", "/v1/leases", params={"owner_id": "down"}).json()
    assert listed["leases"] == []


def test_failed_create_answers_provider_error(stack_with_missing_image: RunningStack) -> None:
    response = stack_with_missing_image.acquire(kind="renderer")
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["code"] == "provider_error"
    assert "does-not-exist" in error["message"]


def test_failed_create_leaves_no_container_and_no_live_lease(
    stack_with_missing_image: RunningStack, docker_client: Any
) -> None:
    before = {c.id for c in docker_client.containers.list(all=True)}
    response = stack_with_missing_image.acquire(kind="renderer", owner_id="bad-image")
    lease_id = response.json()["error"]["details"]["lease_id"]
    assert {c.id for c in docker_client.containers.list(all=True)} == before
    listed = stack_with_missing_image.request("GET", "/v1/leases", params={"owner_id": "bad-image"}).json()
    assert listed["leases"] == []
    assert stack_with_missing_image.request("GET", f"/v1/lease/{lease_id}").json()["lease"]["status"] == "failed"
