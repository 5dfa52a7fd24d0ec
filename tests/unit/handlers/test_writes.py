"""POST /v1/lease/{id}/renew and DELETE /v1/lease/{id}: answers, owners, and the metric a release counts."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta

from scheduler.providers.memory import MemoryProvider
from tests.support.metrics import RecordedMetrics

from ..builders import NOW, Leases
from .conftest import Function, event, with_header


def test_renew_answers_200_with_the_new_expiry(function: Callable[[str], Function], leases: Leases) -> None:
    lease = leases.active(owner_id="anim-service")
    status, body = function("renew_lease").http(
        event("renew_lease", lease.lease_id, body=json.dumps({"ttl_seconds": 900}))
    )
    assert (status, body["lease"]["ttl_seconds"]) == (200, 900)


def test_renew_by_another_owner_answers_403(function: Callable[[str], Function], leases: Leases) -> None:
    lease = leases.active(owner_id="someone-else")
    assert function("renew_lease").http(event("renew_lease", lease.lease_id))[0] == 403


def test_renew_of_a_pending_lease_answers_409(function: Callable[[str], Function], leases: Leases) -> None:
    lease = leases.pending(owner_id="anim-service")
    assert function("renew_lease").http(event("renew_lease", lease.lease_id))[0] == 409


def test_renew_past_the_end_the_provider_gave_the_worker_answers_409_naming_it(
    function: Callable[[str], Function], leases: Leases
) -> None:
    lease = leases.ending(NOW + timedelta(seconds=3900), owner_id="anim-service", ttl_seconds=3600)
    renew = function("renew_lease")

    status, body = renew.http(event("renew_lease", lease.lease_id, body=json.dumps({"ttl_seconds": 3901})))

    assert (status, body["error"]["code"]) == (409, "conflict")
    assert "cannot be renewed past 2026-11-30T05:05:00Z" in body["error"]["message"]
    assert body["error"]["details"] == {"worker_ends_at": "2026-11-30T05:05:00Z"}
    within = renew.http(event("renew_lease", lease.lease_id, body=json.dumps({"ttl_seconds": 3900})))
    assert (within[0], within[1]["lease"]["expires_at"]) == (200, "2026-11-30T05:05:00Z")


def test_release_answers_204_and_removes_the_worker(
    function: Callable[[str], Function], leases: Leases, provider: MemoryProvider
) -> None:
    lease = leases.active(owner_id="anim-service")
    provider.add_worker(lease.lease_id, str(lease.provider_token))
    assert function("release_lease").http(event("release_lease", lease.lease_id))[0] == 204
    assert provider.workers == {}


def test_a_release_counts_one_lease_released(
    function: Callable[[str], Function], leases: Leases, metrics: RecordedMetrics
) -> None:
    lease = leases.active(owner_id="anim-service")
    function("release_lease").http(event("release_lease", lease.lease_id))
    assert metrics.of("LeaseReleased") == [{"provider": "local-docker", "kind": "renderer", "value": 1}]


def test_a_release_whose_worker_stays_answers_502_and_counts_no_release(
    function: Callable[[str], Function], leases: Leases, provider: MemoryProvider, metrics: RecordedMetrics
) -> None:
    lease = leases.active(owner_id="anim-service")
    provider.unreachable = True  # unreachable on release: a failed request, retried by the sweep

    status, body = function("release_lease").http(event("release_lease", lease.lease_id))

    assert (status, body["error"]["code"], body["error"]["details"]["lease_id"]) == (
        502,
        "provider_error",
        lease.lease_id,
    )
    assert metrics.names() == ["ReleaseFailure"]


def test_release_without_the_owner_header_of_an_owned_lease_answers_403(
    function: Callable[[str], Function], leases: Leases
) -> None:
    lease = leases.active(owner_id="anim-service")
    sample = with_header(event("release_lease", lease.lease_id), "x-lease-owner", None)
    assert function("release_lease").http(sample)[0] == 403


def test_release_of_a_released_lease_answers_404(function: Callable[[str], Function], leases: Leases) -> None:
    lease = leases.released(owner_id="anim-service")
    assert function("release_lease").http(event("release_lease", lease.lease_id))[0] == 404
