"""The owner's hourly budget through `make run` when RunPod's pods bill above the catalog price (the fake's
`cost_markup`): ten concurrent `gpu=entry` acquires grant every pod that fits, and none that does not."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.fakes.runpod import FakeRunPod, start_fake_runpod
from tests.support.stack import RunningStack, start_stack

RTX = "NVIDIA GeForce RTX 4090"  # 0.69 USD/h in the fake's catalog; 1.035 with a 1.5 markup


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeRunPod]:
    with start_fake_runpod("budget-key", {"tpl-renderer": {"ports": ["8080/http"]}, "tpl-anim": {}}) as server:
        server.configure(cost_markup=1.5)
        yield server


@pytest.fixture(scope="module")
def stack(docker_host: Any, fake: FakeRunPod, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    running = start_stack(
        tmp_path_factory.mktemp("budget-runpod"),
        docker_env=docker_host.env(),
        extra_env={
            "PROVIDERS": "runpod",
            "RUNPOD_API_URL": fake.url,
            "RUNPOD_API_KEY": "budget-key",
            "RUNPOD_RENDERER_TEMPLATE": "tpl-renderer",
            "RUNPOD_ANIM_TEMPLATE": "tpl-anim",
            "RUNPOD_GPU_TYPES_ENTRY": RTX,
            "MAX_COST_PER_HOUR_PER_OWNER": "5",  # 4 pods at 1.035 fit (4.14), 5 do not
            "SWEEP_INTERVAL_SECONDS": "3600",
            "RECONCILE_INTERVAL_SECONDS": "3600",
        },
    )
    yield running
    running.stop()


def _ten_at_once(stack: RunningStack) -> list[int]:
    with ThreadPoolExecutor(max_workers=10) as pool:
        answers = list(pool.map(lambda _: stack.acquire(gpu="entry", owner_id="gpu-team", ttl_seconds=600), range(10)))
    return [answer.status_code for answer in answers]


def _release_all(stack: RunningStack) -> None:
    for lease in stack.request("GET", "/v1/leases", params={"owner_id": "gpu-team"}).json()["leases"]:
        stack.request("DELETE", f"/v1/lease/{lease['lease_id']}", owner="gpu-team")


def test_ten_concurrent_acquires_grant_the_four_pods_that_fit_then_make_none_for_nothing(
    stack: RunningStack, fake: FakeRunPod
) -> None:
    first = _ten_at_once(stack)
    first_deleted = len(fake.deleted_pod_ids)
    live = stack.request("GET", "/v1/leases", params={"owner_id": "gpu-team"}).json()["leases"]
    _release_all(stack)
    second = _ten_at_once(stack)
    second_deleted = len(fake.deleted_pod_ids) - first_deleted - 4

    print(f"\nfirst: {first.count(201)} granted, {first_deleted} pods deleted; then {second_deleted}")
    assert (first.count(201), first.count(429)) == (4, 6)
    assert sum(lease["cost_per_hour"] for lease in live) == pytest.approx(4.14)
    assert (second.count(201), second.count(429), len(fake.pods)) == (4, 6, 4)
    assert second_deleted == 0  # the price seen in the first round is what the second reserves
    _release_all(stack)
