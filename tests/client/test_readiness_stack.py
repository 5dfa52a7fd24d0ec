"""Readiness through the local stack: RunPod pods boot on the fake's clock, Docker workers on the TLS host.

A RunPod lease comes back `starting` and turns `ready` through `?wait_ready`; a pod that ends in ERROR or
never finishes starting is deleted by the sweep with nobody polling; a Docker lease is ready at once, or
once its image's HEALTHCHECK passes; the client's context manager and `leasectl acquire --wait` on both.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from openalice_scheduler_client import BootFailed, SchedulerClient

from tests.client.test_cli import cli_env
from tests.fakes.runpod import FakeRunPod, start_fake_runpod
from tests.support.booting_image import import_booting_image
from tests.support.stack import RunningStack, start_stack
from tests.support.waiting import wait_for

H100 = "NVIDIA H100 80GB HBM3"
BOOT = {"provisioning_seconds": 2.0, "starting_seconds": 2.0}  # a 4 s boot
READY_TIMEOUT_SECONDS = 10
HEALTHCHECK_IMAGE = "openalice-test/anim-healthcheck:v1"


@pytest.fixture(scope="module")
def runpod_server() -> Iterator[FakeRunPod]:
    with start_fake_runpod("stack-key", {"tpl-renderer": {"ports": ["8080/http"]}, "tpl-anim": {}}) as server:
        yield server


@pytest.fixture
def runpod(runpod_server: FakeRunPod) -> FakeRunPod:
    runpod_server.reset()
    runpod_server.configure(**BOOT)
    return runpod_server


@pytest.fixture(scope="module")
def readiness_stack(
    docker_host: Any, docker_client: Any, runpod_server: FakeRunPod, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningStack]:
    # anim workers come from an image with a HEALTHCHECK that passes about 2 s after start
    import_booting_image(docker_client, HEALTHCHECK_IMAGE)
    running = start_stack(
        tmp_path_factory.mktemp("readiness"),
        docker_env=docker_host.env(),
        extra_env={
            "PROVIDERS": "local-docker,runpod",
            "ANIM_IMAGE": HEALTHCHECK_IMAGE,
            "RUNPOD_API_URL": runpod_server.url,
            "RUNPOD_API_KEY": "stack-key",
            "RUNPOD_RENDERER_TEMPLATE": "tpl-renderer",
            "RUNPOD_ANIM_TEMPLATE": "tpl-anim",
            "RUNPOD_GPU_TYPES_HIGH": H100,
            "READY_TIMEOUT_SECONDS": str(READY_TIMEOUT_SECONDS),
            "SWEEP_INTERVAL_SECONDS": "1",
            "RECONCILE_INTERVAL_SECONDS": "3600",
        },
    )
    yield running
    running.stop()


@pytest.fixture
def scheduler(readiness_stack: RunningStack) -> Iterator[SchedulerClient]:
    with SchedulerClient(readiness_stack.url, readiness_stack.secret) as scheduler:
        yield scheduler


def _lease(stack: RunningStack, lease_id: str, **query: str) -> dict[str, Any]:
    response = stack.request("GET", f"/v1/lease/{lease_id}", params=query)
    assert response.status_code == 200, response.text
    return dict(response.json()["lease"])


def _stored(stack: RunningStack, lease_id: str) -> Any:
    """The lease as the table holds it, read without the API (so nobody polls the service)."""
    return stack.lease_store().get(lease_id)


def leasectl(stack: RunningStack, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "openalice_scheduler_client.cli", *argv],
        env=cli_env(SCHEDULER_URL=stack.url, INTERNAL_SECRET=stack.secret),
        capture_output=True,
        text=True,
        timeout=120,
    )


# --- RunPod ---------------------------------------------------------------------------------------------


def test_a_runpod_lease_starts_starting_and_wait_ready_answers_it_ready(
    readiness_stack: RunningStack, runpod: FakeRunPod
) -> None:
    acquired = readiness_stack.acquire(gpu="high").json()["lease"]
    started = time.monotonic()

    ready = _lease(readiness_stack, acquired["lease_id"], wait_ready="20")

    assert (acquired["worker_state"], acquired["ready_at"]) == ("starting", None)
    assert (ready["status"], ready["worker_state"]) == ("active", "ready") and ready["ready_at"]
    assert time.monotonic() - started < 15
    readiness_stack.request("DELETE", f"/v1/lease/{acquired['lease_id']}")


def test_a_crashing_pod_is_deleted_and_its_lease_failed_with_nobody_polling(
    readiness_stack: RunningStack, runpod: FakeRunPod
) -> None:
    runpod.configure(fail_boot_next=1, fail_boot_after_seconds=1.0)
    lease_id = readiness_stack.acquire(gpu="high").json()["lease"]["lease_id"]
    (pod_id,) = runpod.pods

    wait_for(lambda: pod_id in runpod.deleted_pod_ids, timeout=20, what="the sweep to delete the ERROR pod")
    wait_for(lambda: _stored(readiness_stack, lease_id).status == "failed", timeout=10, what="the release recorded")

    ended = _stored(readiness_stack, lease_id)
    assert f"pod {pod_id} is ERROR" in str(ended.failure_reason)
    calls = [(record["method"], record["path"]) for record in runpod.request_log]
    # found by the sweep's listing: the pod itself was never asked about before its deletion
    assert ("GET", f"/v2/pods/{pod_id}") not in calls[: calls.index(("DELETE", f"/v2/pods/{pod_id}"))]


def test_a_pod_stuck_starting_is_deleted_after_the_ready_timeout(
    readiness_stack: RunningStack, runpod: FakeRunPod
) -> None:
    runpod.configure(stuck_starting_next=1)
    started = time.monotonic()
    lease_id = readiness_stack.acquire(gpu="high").json()["lease"]["lease_id"]
    (pod_id,) = runpod.pods

    wait_for(lambda: pod_id in runpod.deleted_pod_ids, timeout=30, what="the sweep to delete the stuck pod")
    wait_for(lambda: _stored(readiness_stack, lease_id).status == "failed", timeout=10, what="the release recorded")

    assert time.monotonic() - started >= READY_TIMEOUT_SECONDS - 1
    assert "READY_TIMEOUT_SECONDS" in str(_stored(readiness_stack, lease_id).failure_reason)


# --- Docker ------------------------------------------------------------------------------------------------


def test_a_docker_lease_is_ready_at_once(readiness_stack: RunningStack) -> None:
    lease = readiness_stack.acquire(kind="renderer").json()["lease"]
    assert (lease["provider"], lease["worker_state"], lease["ready_at"] is not None) == ("local-docker", "ready", True)
    readiness_stack.request("DELETE", f"/v1/lease/{lease['lease_id']}")


def test_a_docker_lease_whose_image_has_a_healthcheck_waits_for_it(readiness_stack: RunningStack) -> None:
    lease = readiness_stack.acquire(kind="anim").json()["lease"]
    ready = _lease(readiness_stack, lease["lease_id"], wait_ready="20")
    assert (lease["worker_state"], ready["worker_state"]) == ("starting", "ready")
    readiness_stack.request("DELETE", f"/v1/lease/{lease['lease_id']}")


# --- client and leasectl, both providers --------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "gpu"), [("renderer", "high"), ("anim", "none")], ids=["runpod", "docker"])
def test_the_client_context_manager_runs_the_block_with_a_ready_worker(
    scheduler: SchedulerClient, runpod: FakeRunPod, kind: str, gpu: str
) -> None:
    with scheduler.lease(kind, ttl_seconds=300, gpu=gpu) as held:
        assert held.lease.worker_state == "ready" and held.lease.ready_at is not None
        lease_id = held.lease_id
    assert scheduler.get(lease_id).status == "released"


def test_the_context_manager_raises_and_leaves_nothing_when_the_worker_never_boots(
    scheduler: SchedulerClient, runpod: FakeRunPod
) -> None:
    runpod.configure(fail_boot_next=1, fail_boot_after_seconds=1.0)
    with pytest.raises(BootFailed, match="ERROR"), scheduler.lease("renderer", ttl_seconds=300, gpu="high"):
        pytest.fail("the block must not run without a ready worker")
    assert all(pod["status"] in ("TERMINATED",) for pod in runpod.pods.values()) or not runpod.pods


@pytest.mark.parametrize(("kind", "gpu"), [("renderer", "high"), ("anim", "none")], ids=["runpod", "docker"])
def test_leasectl_acquire_wait_shows_progress_and_the_ready_lease(
    readiness_stack: RunningStack, runpod: FakeRunPod, kind: str, gpu: str
) -> None:
    done = leasectl(readiness_stack, "acquire", "--kind", kind, "--gpu", gpu, "--wait", "60")

    assert done.returncode == 0, done.stderr
    assert "worker starting" in done.stderr and "worker ready" in done.stderr
    assert "worker_state    ready" in done.stdout
    lease_id = done.stdout.split("lease_id", 1)[1].split()[0]
    readiness_stack.request("DELETE", f"/v1/lease/{lease_id}")


def test_leasectl_acquire_wait_exits_4_with_the_reason_when_the_pod_fails(
    readiness_stack: RunningStack, runpod: FakeRunPod
) -> None:
    runpod.configure(fail_boot_next=1, fail_boot_after_seconds=1.0)
    done = leasectl(readiness_stack, "acquire", "--kind", "renderer", "--gpu", "high", "--wait")
    assert done.returncode == 4 and "ERROR (it failed to boot)" in done.stderr
