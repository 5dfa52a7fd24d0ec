"""GET /v1/lease/{id}?wait_ready=N, the sweep's boot-failure pass, and the readiness metrics."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from scheduler.models import WorkerKind
from scheduler.providers.memory import MemoryProvider
from scheduler.request_models import LeaseRequest
from scheduler.store import LeaseStore
from tests.support.metrics import RecordedMetrics

from ..builders import NOW, acquire, context, memory_provider, registry_of
from .conftest import Function, event, runtime_of

REQUEST = LeaseRequest(kind=WorkerKind.RENDERER, ttl_seconds=3600)


def get_event(lease_id: str, **query: str) -> dict[str, object]:
    return event(
        "get_lease",
        lease_id,
        queryStringParameters=query,
        rawQueryString="&".join(f"{key}={value}" for key, value in query.items()),
    )


@pytest.fixture
def booting() -> MemoryProvider:
    return memory_provider(boots=True)


def _starting(store: LeaseStore, provider: MemoryProvider) -> str:
    return acquire(context(store, registry_of(provider), clock=lambda: NOW), REQUEST).lease_id


def test_a_lease_answers_its_worker_state_and_ready_time(
    function: Callable[..., Function], store: LeaseStore, booting: MemoryProvider, metrics: RecordedMetrics
) -> None:
    lease_id = _starting(store, booting)
    get = function("get_lease", runtime_of(store, booting, metrics=metrics))
    status, body = get.http(get_event(lease_id))
    assert (status, body["lease"]["worker_state"], body["lease"]["ready_at"]) == (200, "starting", None)


def test_wait_ready_answers_the_ready_lease_and_counts_its_time_to_ready(
    function: Callable[..., Function], store: LeaseStore, booting: MemoryProvider, metrics: RecordedMetrics
) -> None:
    lease_id = _starting(store, booting)
    booting.boot(next(iter(booting.workers)))
    get = function("get_lease", runtime_of(store, booting, metrics=metrics))

    status, body = get.http(get_event(lease_id, wait_ready="25"))

    assert (status, body["lease"]["worker_state"], body["lease"]["ready_at"]) == (200, "ready", "2026-11-30T04:00:00Z")
    assert "TimeToReady" in metrics.names()


def test_a_read_that_finds_a_boot_failure_answers_it_failed_and_counts_it(
    function: Callable[..., Function], store: LeaseStore, booting: MemoryProvider, metrics: RecordedMetrics
) -> None:
    lease_id = _starting(store, booting)
    booting.fail_boot(next(iter(booting.workers)), "the RunPod pod p1 is ERROR (it failed to boot)")
    get = function("get_lease", runtime_of(store, booting, metrics=metrics))

    status, body = get.http(get_event(lease_id, wait_ready="5"))

    assert (status, body["lease"]["status"]) == (200, "failed")
    assert body["lease"]["failure_reason"] == "the RunPod pod p1 is ERROR (it failed to boot)"
    assert {"BootFailure", "LeaseFailed"} <= set(metrics.names()) and booting.workers == {}


@pytest.mark.parametrize("value", ["26", "-1", "1.5", "soon", ""])
def test_a_wait_outside_0_to_25_seconds_is_refused_with_400(
    function: Callable[..., Function], store: LeaseStore, booting: MemoryProvider, value: str
) -> None:
    lease_id = _starting(store, booting)
    status, body = function("get_lease").http(get_event(lease_id, wait_ready=value))
    assert (status, body["error"]["code"]) == (400, "invalid_request")
    assert body["error"]["details"]["problems"][0]["field"] == "wait_ready"


def test_the_sweep_ends_a_boot_failure_and_counts_it(
    function: Callable[..., Function], store: LeaseStore, booting: MemoryProvider, metrics: RecordedMetrics
) -> None:
    lease_id = _starting(store, booting)
    booting.fail_boot(next(iter(booting.workers)))

    report = function("sweep_expired", runtime_of(store, booting, metrics=metrics))(event("sweep_expired"))

    assert report["boot_failures"] == 1 and store.get(lease_id).status == "failed" and booting.workers == {}
    assert {"BootFailure", "LeaseFailed"} <= set(metrics.names())
