"""Cost control through the public API on both providers: ceilings, regions, owner budgets, cost_usd, usage."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.runpod import FakeRunPod, start_fake_runpod
from tests.support.stack import RunningStack, start_stack

A100, RTX, H100 = "NVIDIA A100 80GB PCIe", "NVIDIA GeForce RTX 4090", "NVIDIA H100 80GB HBM3"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeRunPod]:
    with start_fake_runpod("stack-key", {"tpl-renderer": {}, "tpl-anim": {}}) as server:
        yield server


@pytest.fixture
def runpod(fake: FakeRunPod) -> FakeRunPod:
    fake.reset()
    return fake


@pytest.fixture(scope="module")
def stack(docker_host: Any, fake: FakeRunPod, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    running = start_stack(
        tmp_path_factory.mktemp("cost"),
        docker_env=docker_host.env(),
        extra_env={
            "PROVIDERS": "local-docker,runpod",
            "RUNPOD_API_URL": fake.url,
            "RUNPOD_API_KEY": "stack-key",
            "RUNPOD_RENDERER_TEMPLATE": "tpl-renderer",
            "RUNPOD_ANIM_TEMPLATE": "tpl-anim",
            "RUNPOD_GPU_TYPES_HIGH": f"{H100},{A100},{RTX}",
            "RUNPOD_REGIONS": "eu=EU-RO-1,EU-SE-1;us=US-TX-3",
            "LOCAL_DOCKER_COST_PER_HOUR": "0.25",
            "MAX_COST_PER_HOUR_PER_OWNER": "1.0",
            "SWEEP_INTERVAL_SECONDS": "3600",
            "RECONCILE_INTERVAL_SECONDS": "3600",
        },
    )
    yield running
    running.stop()


def test_a_ceiling_lands_on_the_first_gpu_type_within_it(stack: RunningStack, runpod: FakeRunPod) -> None:
    response = stack.acquire(gpu="high", owner_id="ceiling", max_cost_per_hour=0.9)

    assert response.status_code == 201, response.text
    assert (response.json()["lease"]["cost_per_hour"], response.json()["lease"]["max_cost_per_hour"]) == (0.69, 0.9)
    assert [pod["gpu"]["id"] for pod in runpod.pods.values()] == [RTX]


def test_nothing_within_the_ceiling_is_503_naming_it_and_the_cheapest_price(
    stack: RunningStack, runpod: FakeRunPod
) -> None:
    response = stack.acquire(gpu="high", owner_id="too-cheap", max_cost_per_hour=0.5)

    assert response.status_code == 503
    details = response.json()["error"]["details"]
    assert (details["max_cost_per_hour"], details["cheapest_cost_per_hour"]) == (0.5, 0.69)
    assert runpod.pods == {}


def test_a_region_places_the_pod_there_and_an_unknown_one_is_400(stack: RunningStack, runpod: FakeRunPod) -> None:
    placed = stack.acquire(gpu="high", owner_id="eu-user", region="eu", max_cost_per_hour=0.9)
    unknown = stack.acquire(gpu="high", owner_id="eu-user", region="mars")

    assert placed.status_code == 201, placed.text
    assert [pod["dataCenterId"] for pod in runpod.pods.values()] == ["EU-RO-1"]
    assert unknown.status_code == 400 and "eu, us" in unknown.json()["error"]["message"]


def test_the_owners_hourly_budget_refuses_with_429_and_usage_counts_what_ended(
    stack: RunningStack, runpod: FakeRunPod
) -> None:
    granted = [stack.acquire(kind="renderer", owner_id="budget", ttl_seconds=600) for _ in range(5)]
    statuses = [response.status_code for response in granted]
    for response in granted:
        if response.status_code == 201:
            lease = response.json()["lease"]
            stack.request("DELETE", f"/v1/lease/{lease['lease_id']}", headers={"X-Lease-Owner": "budget"})
    usage = stack.request("GET", "/v1/usage", params={"owner_id": "budget", "group_by": "provider"}).json()

    assert statuses == [201, 201, 201, 201, 429]  # 4 × 0.25 USD/h fit in 1.00
    assert granted[-1].json()["error"]["details"]["budget"] == "MAX_COST_PER_HOUR_PER_OWNER"
    (row,) = usage["usage"]
    assert (row["owner_id"], row["provider"], row["leases"]) == ("budget", "local-docker", 4)
