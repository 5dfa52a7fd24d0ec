"""The runpod driver's readiness against the fake's lifecycle: PROVISIONING → STARTING → RUNNING, ERROR, stuck."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scheduler.models import GpuClass, WorkerKind
from scheduler.providers.base import ReadinessState
from scheduler.providers.runpod.driver import RetryPolicy, RunPodApi, RunPodProvider
from tests.fakes.runpod import FakeRunPod, start_fake_runpod

from .test_runpod import H100, KEY, TEMPLATES, new_lease

BOOT = {"provisioning_seconds": 4.0, "starting_seconds": 6.0}  # a boot of about 10 s, moved by age_pods


@pytest.fixture(scope="module")
def server() -> Iterator[FakeRunPod]:
    with start_fake_runpod(KEY, TEMPLATES) as fake:
        yield fake


@pytest.fixture
def fake(server: FakeRunPod) -> FakeRunPod:
    server.reset()
    server.configure(**BOOT)
    return server


@pytest.fixture
def driver(fake: FakeRunPod) -> RunPodProvider:
    return RunPodProvider(
        api=RunPodApi(fake.url, lambda: KEY),
        templates={WorkerKind.RENDERER: "tpl-renderer", WorkerKind.ANIM: "tpl-anim"},
        gpu_types={GpuClass.HIGH: (H100,)},
        http_port=8080,
        retry=RetryPolicy(sleep=lambda _: None, release_confirm_seconds=5),
    )


def test_a_new_pod_is_not_ready_and_says_it_is_provisioning(driver: RunPodProvider) -> None:
    lease = new_lease(GpuClass.HIGH)
    worker = driver.provision(lease, {})
    said = driver.readiness(lease.lease_id, worker.token)
    assert worker.ready is False and (said.state, said.detail) == (ReadinessState.STARTING, "pod PROVISIONING")


def test_a_pod_is_ready_once_running_with_its_http_port_mapped(driver: RunPodProvider, fake: FakeRunPod) -> None:
    lease = new_lease(GpuClass.HIGH)
    worker = driver.provision(lease, {})
    fake.age_pods(5)
    assert driver.readiness(lease.lease_id, worker.token).detail == "pod STARTING"
    fake.age_pods(6)
    assert driver.readiness(lease.lease_id, worker.token).state is ReadinessState.READY


def test_a_running_pod_without_its_http_port_is_still_starting(fake: FakeRunPod) -> None:
    other_port = RunPodProvider(
        api=RunPodApi(fake.url, lambda: KEY),
        templates={WorkerKind.RENDERER: "tpl-renderer"},
        gpu_types={GpuClass.HIGH: (H100,)},
        http_port=7860,
        retry=RetryPolicy(sleep=lambda _: None),
    )
    lease = new_lease(GpuClass.HIGH)
    worker = other_port.provision(lease, {})
    fake.age_pods(30)
    said = other_port.readiness(lease.lease_id, worker.token)
    assert (said.state, said.detail) == (ReadinessState.STARTING, "pod RUNNING, port 7860 not mapped yet")


def test_a_pod_that_ends_in_error_failed_to_boot(driver: RunPodProvider, fake: FakeRunPod) -> None:
    fake.configure(fail_boot_next=1)
    lease = new_lease(GpuClass.HIGH)
    worker = driver.provision(lease, {})
    fake.age_pods(30)
    said = driver.readiness(lease.lease_id, worker.token)
    assert said.state is ReadinessState.FAILED and f"pod {worker.token} is ERROR" in said.detail


def test_a_pod_stuck_starting_never_becomes_ready(driver: RunPodProvider, fake: FakeRunPod) -> None:
    fake.configure(stuck_starting_next=1)
    lease = new_lease(GpuClass.HIGH)
    worker = driver.provision(lease, {})
    fake.age_pods(3600)
    assert driver.readiness(lease.lease_id, worker.token).detail == "pod STARTING"


def test_the_sweeps_batch_asks_with_one_listing_for_every_booting_pod(driver: RunPodProvider, fake: FakeRunPod) -> None:
    fake.configure(fail_boot_next=1)
    workers = {}
    for _ in range(3):
        lease = new_lease(GpuClass.HIGH)
        workers[driver.provision(lease, {}).token] = lease.lease_id
    fake.age_pods(30)
    fake.clear_requests()

    said = driver.readiness_of(workers)

    assert len(fake.request_log) == 1 and fake.request_log[0]["path"] == "/v2/pods"
    assert sorted(answer.state.value for answer in said.values()) == ["failed", "ready", "ready"]
