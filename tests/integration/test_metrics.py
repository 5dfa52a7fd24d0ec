"""Every CloudWatch metric the operators rely on appears in the EMF output of a full run, with sane values."""

from __future__ import annotations

import json
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.runpod import FakeRunPod, start_fake_runpod
from tests.support.stack import RunningStack, start_stack
from tests.support.waiting import wait_for

H100 = "NVIDIA H100 80GB HBM3"


def emf_documents(logs: str) -> list[dict[str, Any]]:
    """The EMF documents the functions printed (each line prefixed with its function's name)."""
    documents = []
    for line in logs.splitlines():
        _, _, payload = line.partition("] ")
        if payload.startswith("{") and '"_aws"' in payload:
            documents.append(json.loads(payload))
    return documents


def metric_values(documents: list[dict[str, Any]]) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Each metric name → (its dimensions, each value)."""
    found: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    for document in documents:
        for directive in document["_aws"]["CloudWatchMetrics"]:
            assert directive["Namespace"] == "OpenAliceScheduler"
            dimension_names = {name for group in directive["Dimensions"] for name in group}
            dimensions = {name: str(document[name]) for name in dimension_names}
            for metric in directive["Metrics"]:
                values = document[metric["Name"]]
                for value in values if isinstance(values, list) else [values]:
                    found[metric["Name"]].append((dimensions, float(value)))
    return found


@pytest.fixture(scope="module")
def run(docker_host: Any, docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A stack doing a bit of everything: acquire, release, expire, a RunPod pod, an orphan, a ghost, a failure."""
    with start_fake_runpod("metrics-key", {"tpl-renderer": {}, "tpl-anim": {}}) as fake:
        stack = start_stack(
            tmp_path_factory.mktemp("metrics"),
            docker_env=docker_host.env(),
            extra_env={
                "PROVIDERS": "local-docker,runpod",
                "RUNPOD_API_URL": fake.url,
                "RUNPOD_API_KEY": "metrics-key",
                "RUNPOD_RENDERER_TEMPLATE": "tpl-renderer",
                "RUNPOD_ANIM_TEMPLATE": "tpl-anim",
                "RUNPOD_GPU_TYPES_HIGH": H100,
                "SWEEP_INTERVAL_SECONDS": "1",
                "RECONCILE_INTERVAL_SECONDS": "2",
                "ORPHAN_GRACE_SECONDS": "1",
                "PENDING_DEADLINE_SECONDS": "1",
            },
        )
        try:
            yield _exercise(stack, fake, docker_client)
        finally:
            stack.stop()


def _exercise(stack: RunningStack, fake: FakeRunPod, docker_client: Any) -> dict[str, Any]:
    released = stack.acquire(kind="renderer").json()["lease"]
    stack.request("DELETE", f"/v1/lease/{released['lease_id']}")
    expiring = stack.acquire(kind="anim", ttl_seconds=1).json()["lease"]
    gpu = stack.acquire(kind="renderer", gpu="high").json()["lease"]
    ghost = stack.acquire(kind="anim", ttl_seconds=600).json()["lease"]
    docker_client.api.remove_container(ghost["provider_token"], force=True)
    orphan_id = str(uuid.uuid4())
    docker_client.containers.run(
        "openalice/renderer:dev",
        detach=True,
        network_mode="none",
        labels={"openalice.scheduler/managed": "true", "openalice.scheduler/lease-id": orphan_id},
    )
    fake.configure(insufficient_balance=True)
    stack.acquire(kind="renderer", gpu="high")  # a provider failure
    fake.configure(insufficient_balance=False)

    def status(lease: dict[str, Any]) -> str:
        return str(stack.request("GET", f"/v1/lease/{lease['lease_id']}").json()["lease"]["status"])

    wait_for(lambda: status(expiring) == "expired" and status(ghost) == "failed", timeout=20, what="expiry and ghost")
    time.sleep(2.5)  # one more sweep and reconcile pass flush their metrics
    return {"metrics": metric_values(emf_documents(stack.logs())), "gpu": gpu}


def _values(run: dict[str, Any], name: str) -> list[tuple[dict[str, str], float]]:
    values = run["metrics"].get(name, [])
    assert values, f"{name} was never emitted"
    return list(values)


@pytest.mark.parametrize("name", ["LeaseAcquired", "LeaseReleased", "LeaseExpired", "LeaseFailed"])
def test_lease_outcomes_are_counted_by_provider_and_kind(run: dict[str, Any], name: str) -> None:
    values = _values(run, name)
    assert all(value >= 1 and {"provider", "kind"} <= set(dims) for dims, value in values)


def test_provision_latency_is_in_milliseconds_per_provider(run: dict[str, Any]) -> None:
    values = _values(run, "ProvisionLatency")
    assert {dims["provider"] for dims, _ in values} == {"local-docker", "runpod"}
    assert all(0 < value < 30_000 for _, value in values)


def test_release_latency_is_recorded(run: dict[str, Any]) -> None:
    assert all(0 <= value < 30_000 for _, value in _values(run, "ReleaseLatency"))


def test_provision_failures_carry_a_reason(run: dict[str, Any]) -> None:
    reasons = {dims["reason"] for dims, _ in _values(run, "ProvisionFailure")}
    assert "provider_error" in reasons


def test_orphans_and_ghosts_are_counted(run: dict[str, Any]) -> None:
    assert sum(value for _, value in _values(run, "OrphanRemoved")) >= 1
    assert sum(value for _, value in _values(run, "GhostLease")) >= 1


def test_active_leases_are_reported_by_the_sweep(run: dict[str, Any]) -> None:
    values = _values(run, "ActiveLeases")
    assert {dims["provider"] for dims, _ in values} >= {"local-docker"}
    assert all(value >= 0 for _, value in values)


def test_runpod_cost_per_hour_is_recorded(run: dict[str, Any]) -> None:
    values = _values(run, "LeaseCostPerHour")
    assert (run["gpu"]["cost_per_hour"]) in [value for dims, value in values if dims["provider"] == "runpod"]


def test_sweep_lag_is_small_and_non_negative(run: dict[str, Any]) -> None:
    assert all(0 <= value <= 5 for _, value in _values(run, "SweepLag"))
