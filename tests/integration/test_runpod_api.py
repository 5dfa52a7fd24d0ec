"""RunPod as a provider, through the public API: placement, failover, failures, release and expiry."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.runpod import FakeRunPod, start_fake_runpod
from tests.support.stack import RunningStack, start_stack
from tests.support.waiting import wait_for

H100, A100, RTX = "NVIDIA H100 80GB HBM3", "NVIDIA A100 80GB PCIe", "NVIDIA GeForce RTX 4090"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeRunPod]:
    with start_fake_runpod("stack-key", {"tpl-renderer": {"ports": ["8080/http"]}, "tpl-anim": {}}) as server:
        yield server


@pytest.fixture
def runpod(fake: FakeRunPod) -> FakeRunPod:
    fake.reset()
    return fake


def _runpod_env(fake: FakeRunPod, providers: str) -> dict[str, str]:
    return {
        "PROVIDERS": providers,
        "RUNPOD_API_URL": fake.url,
        "RUNPOD_API_KEY": "stack-key",
        "RUNPOD_RENDERER_TEMPLATE": "tpl-renderer",
        "RUNPOD_ANIM_TEMPLATE": "tpl-anim",
        "RUNPOD_GPU_TYPES_ENTRY": RTX,
        "RUNPOD_GPU_TYPES_MID": A100,
        "RUNPOD_GPU_TYPES_HIGH": H100,
        "SWEEP_INTERVAL_SECONDS": "1",
        "RECONCILE_INTERVAL_SECONDS": "3600",
    }


@pytest.fixture(scope="module")
def docker_first(
    docker_host: Any, fake: FakeRunPod, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningStack]:
    running = start_stack(
        tmp_path_factory.mktemp("docker-first"),
        docker_env=docker_host.env(),
        extra_env=_runpod_env(fake, "local-docker,runpod"),
    )
    yield running
    running.stop()


@pytest.fixture(scope="module")
def runpod_first(
    docker_host: Any, fake: FakeRunPod, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningStack]:
    running = start_stack(
        tmp_path_factory.mktemp("runpod-first"),
        docker_env=docker_host.env(),
        extra_env=_runpod_env(fake, "runpod,local-docker"),
    )
    yield running
    running.stop()


def _pods(fake: FakeRunPod) -> list[dict[str, Any]]:
    return list(fake.pods.values())


def _live(stack: RunningStack, owner: str) -> list[dict[str, Any]]:
    return list(stack.request("GET", "/v1/leases", params={"owner_id": owner}).json()["leases"])


def test_high_gpu_lease_lands_on_runpod(docker_first: RunningStack, runpod: FakeRunPod) -> None:
    response = docker_first.acquire(gpu="high", owner_id="gpu-user")

    assert response.status_code == 201
    lease = response.json()["lease"]
    assert response.json()["provider"] == "runpod" == lease["provider"]
    (pod,) = _pods(runpod)
    assert pod["id"] == lease["provider_token"] and pod["name"] == f"lease-{lease['lease_id']}"
    assert lease["endpoint"] == f"https://{pod['id']}-8080.proxy.runpod.net"
    assert lease["cost_per_hour"] == pod["cost"] > 0


def test_cpu_lease_lands_on_docker(docker_first: RunningStack, runpod: FakeRunPod) -> None:
    response = docker_first.acquire(gpu="none")
    assert response.json()["provider"] == "local-docker"
    assert _pods(runpod) == []


def test_entry_gpu_falls_over_to_runpod_when_docker_has_no_gpu(docker_first: RunningStack, runpod: FakeRunPod) -> None:
    response = docker_first.acquire(gpu="entry")
    assert response.status_code == 201
    assert response.json()["provider"] == "runpod"


def test_no_runpod_capacity_falls_over_to_the_next_provider(runpod_first: RunningStack, runpod: FakeRunPod) -> None:
    runpod.configure(no_capacity_gpu_ids={RTX})
    response = runpod_first.acquire(gpu="entry", owner_id="failover")
    # local-docker is next, and this host has no GPU either: no provider is left.
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "no_capacity"
    assert set(response.json()["error"]["details"]["providers"]) == {"runpod", "local-docker"}
    assert _pods(runpod) == [] and _live(runpod_first, "failover") == []


def test_insufficient_balance_answers_provider_error_and_leaves_nothing(
    docker_first: RunningStack, runpod: FakeRunPod
) -> None:
    runpod.configure(insufficient_balance=True)
    response = docker_first.acquire(gpu="high", owner_id="broke")
    assert response.status_code == 502
    assert "balance" in response.json()["error"]["message"]
    assert _pods(runpod) == [] and _live(docker_first, "broke") == []


def test_rate_limited_create_is_retried_after_retry_after(docker_first: RunningStack, runpod: FakeRunPod) -> None:
    runpod.configure(rate_limit_next_creates=1, rate_limit_retry_after=1)
    response = docker_first.acquire(gpu="high")
    assert response.status_code == 201
    assert len(_pods(runpod)) == 1


def test_failed_create_that_made_a_pod_ends_with_exactly_one_leased_pod(
    docker_first: RunningStack, runpod: FakeRunPod
) -> None:
    runpod.configure(create_500_but_running=1)

    response = docker_first.acquire(gpu="high", owner_id="adopted")

    assert response.status_code == 201
    (pod,) = _pods(runpod)
    assert pod["id"] == response.json()["lease"]["provider_token"]


def test_persistent_runpod_errors_leave_no_pod_and_no_lease(docker_first: RunningStack, runpod: FakeRunPod) -> None:
    runpod.configure(fail_next_creates=100, fail_status=503)
    response = docker_first.acquire(gpu="high", owner_id="outage")
    assert response.status_code == 503
    assert _pods(runpod) == [] and _live(docker_first, "outage") == []


def test_release_terminates_the_pod(docker_first: RunningStack, runpod: FakeRunPod) -> None:
    lease = docker_first.acquire(gpu="high").json()["lease"]

    response = docker_first.request("DELETE", f"/v1/lease/{lease['lease_id']}")

    assert response.status_code == 204
    assert _pods(runpod) == [] and lease["provider_token"] in runpod.deleted_pod_ids


def test_expired_runpod_lease_has_its_pod_terminated_by_the_sweep(
    docker_first: RunningStack, runpod: FakeRunPod
) -> None:
    lease = docker_first.acquire(gpu="high", ttl_seconds=2).json()["lease"]

    wait_for(lambda: not _pods(runpod), timeout=10, what="pod termination")

    status = docker_first.request("GET", f"/v1/lease/{lease['lease_id']}").json()["lease"]["status"]
    assert status == "expired"
