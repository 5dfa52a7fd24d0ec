"""POST /v1/lease: what the caller gets back, and which metric each real outcome counts, once."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from scheduler.deadline import Deadline
from scheduler.models import GpuClass, Lease
from scheduler.providers.base import WorkerOutcomeUnknown
from scheduler.providers.memory import MemoryProvider
from scheduler.store import LeaseStore
from tests.support.metrics import RecordedMetrics

from ..builders import memory_provider
from .conftest import Function, event, runtime_of, with_header

IDEMPOTENCY_RECORDS = pytest.mark.dynamodb_only("idempotency records are powertools' DynamoDB table")

BODY = {"kind": "renderer", "ttl_seconds": 600, "owner_id": "anim-service", "correlation_id": "job-1"}


def acquire_event(key: str | None = None, **body: object) -> dict[str, object]:
    sample = event("acquire_lease", body=json.dumps({**BODY, **body}))
    return with_header(sample, "idempotency-key", key)


def test_an_acquire_answers_201_with_the_active_lease(function: Callable[[str], Function]) -> None:
    status, body = function("acquire_lease").http(acquire_event())
    assert status == 201
    assert (body["lease"]["status"], body["provider"]) == ("active", "local-docker")


def test_an_acquire_counts_one_lease_acquired(function: Callable[[str], Function], metrics: RecordedMetrics) -> None:
    function("acquire_lease").http(acquire_event())
    assert metrics.of("LeaseAcquired") == [{"provider": "local-docker", "kind": "renderer", "value": 1}]
    assert metrics.names().count("ProvisionLatency") == 1


def test_an_acquires_log_lines_carry_the_lease_it_made(function: Callable[[str], Function]) -> None:
    acquire = function("acquire_lease")
    _, body = acquire.http(acquire_event())
    keys = acquire.log_keys()
    assert (keys["lease_id"], keys["owner_id"]) == (body["lease"]["lease_id"], "anim-service")


@IDEMPOTENCY_RECORDS
def test_a_replay_answers_the_first_lease_again(function: Callable[[str], Function], provider: MemoryProvider) -> None:
    acquire = function("acquire_lease")
    first = acquire.http(acquire_event(key="job-1-attempt"))
    again = acquire.http(acquire_event(key="job-1-attempt"))
    assert first == again
    assert len(provider.provisioned) == 1


@IDEMPOTENCY_RECORDS
def test_a_replay_counts_no_second_lease_acquired(
    function: Callable[[str], Function], metrics: RecordedMetrics
) -> None:
    acquire = function("acquire_lease")
    acquire.http(acquire_event(key="job-1-attempt"))
    acquire.http(acquire_event(key="job-1-attempt"))
    assert metrics.names().count("LeaseAcquired") == 1


@IDEMPOTENCY_RECORDS
def test_a_replays_log_lines_carry_the_replayed_lease(function: Callable[[str], Function]) -> None:
    acquire = function("acquire_lease")
    _, first = acquire.http(acquire_event(key="job-1-attempt"))
    acquire.http(acquire_event(key="job-1-attempt"))
    assert acquire.log_keys()["lease_id"] == first["lease"]["lease_id"]


@IDEMPOTENCY_RECORDS
def test_a_replay_answers_its_keys_in_the_first_answers_order(function: Callable[[str], Function]) -> None:
    acquire = function("acquire_lease")
    first = acquire(acquire_event(key="job-1-attempt"))["body"]
    again = acquire(acquire_event(key="job-1-attempt"))["body"]
    assert list(json.loads(again)) == list(json.loads(first)) == ["lease", "provider"]
    assert list(json.loads(again)["lease"]) == list(json.loads(first)["lease"])


@IDEMPOTENCY_RECORDS
def test_a_replay_after_a_renew_answers_the_renewed_lease(function: Callable[[str], Function]) -> None:
    acquire = function("acquire_lease")
    _, first = acquire.http(acquire_event(key="job-1-attempt"))
    lease_id = first["lease"]["lease_id"]
    _, renewed = function("renew_lease").http(event("renew_lease", lease_id, body=json.dumps({"ttl_seconds": 900})))

    status, again = acquire.http(acquire_event(key="job-1-attempt"))

    assert status == 201
    assert again["lease"] == renewed["lease"] and again["lease"]["expires_at"] != first["lease"]["expires_at"]


@IDEMPOTENCY_RECORDS
def test_a_replay_after_a_release_answers_409_saying_the_lease_ended(
    function: Callable[[str], Function], provider: MemoryProvider
) -> None:
    acquire = function("acquire_lease")
    _, first = acquire.http(acquire_event(key="job-1-attempt"))
    lease_id = first["lease"]["lease_id"]
    assert function("release_lease").http(event("release_lease", lease_id))[0] == 204

    status, body = acquire.http(acquire_event(key="job-1-attempt"))

    assert (status, body["error"]["code"]) == (409, "conflict")
    ended = "2026-11-30T04:00:00Z"  # NOW, the runtime's clock
    assert body["error"]["details"] == {"lease_id": lease_id, "status": "released", "released_at": ended}
    assert f"has ended: released at {ended}" in body["error"]["message"]
    assert (len(provider.provisioned), provider.workers) == (1, {})  # nothing made again, no worker answered


def test_no_provider_with_capacity_answers_503_naming_the_failed_lease(
    function: Callable[[str], Function], store: LeaseStore, idempotency_table: str
) -> None:
    acquire = function("acquire_lease", runtime_of(store, memory_provider(full=True)))
    status, body = acquire.http(acquire_event())
    assert (status, body["error"]["code"]) == (503, "no_capacity")
    assert store.get(body["error"]["details"]["lease_id"]).status == "failed"


def test_no_provider_with_capacity_counts_one_lease_failed(
    function: Callable[[str], Function], store: LeaseStore
) -> None:
    metrics = RecordedMetrics()
    function("acquire_lease", runtime_of(store, memory_provider(full=True), metrics=metrics)).http(acquire_event())
    assert metrics.of("LeaseFailed") == [{"provider": "none", "kind": "renderer", "value": 1}]
    assert "LeaseAcquired" not in metrics.names()


def test_a_provider_refusal_answers_502_and_counts_one_lease_failed(
    function: Callable[[str], Function], store: LeaseStore
) -> None:
    metrics = RecordedMetrics()
    acquire = function("acquire_lease", runtime_of(store, memory_provider(refuse=True), metrics=metrics))
    status, body = acquire.http(acquire_event())
    assert (status, body["error"]["code"]) == (502, "provider_error")
    assert metrics.names().count("LeaseFailed") == 1


def test_a_worker_that_may_exist_is_not_counted_failed_until_the_reconciler_ends_it(
    function: Callable[[str], Function], store: LeaseStore
) -> None:
    class LostCreate(MemoryProvider):
        def provision(self, lease: Lease, env: object, deadline: Deadline | None = None) -> object:  # type: ignore[override]
            raise WorkerOutcomeUnknown("timed out; a container may have been made")

    metrics = RecordedMetrics()
    status, body = function("acquire_lease", runtime_of(store, LostCreate(), metrics=metrics)).http(acquire_event())
    assert (status, store.get(body["error"]["details"]["lease_id"]).status) == (503, "pending")
    assert "LeaseFailed" not in metrics.names()


def test_a_request_no_provider_offers_answers_503_and_records_nothing(
    function: Callable[[str], Function], store: LeaseStore
) -> None:
    metrics = RecordedMetrics()
    cpu_only = memory_provider(gpus=frozenset({GpuClass.NONE}))
    status, body = function("acquire_lease", runtime_of(store, cpu_only, metrics=metrics)).http(
        acquire_event(gpu="high")
    )
    assert (status, body["error"]["code"], body["error"].get("details")) == (503, "no_capacity", None)
    assert metrics.names() == []


def test_an_invalid_body_answers_400_and_asks_no_provider(
    function: Callable[[str], Function], provider: MemoryProvider, metrics: RecordedMetrics
) -> None:
    status, body = function("acquire_lease").http(acquire_event(ttl_seconds=0))
    assert (status, body["error"]["code"]) == (400, "invalid_request")
    assert (provider.provisioned, metrics.names()) == ([], [])
