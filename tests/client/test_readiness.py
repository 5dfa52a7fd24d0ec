"""Waiting for a worker: `wait_ready`, the context manager's default wait, `leasectl acquire --wait` and `wait`."""

from __future__ import annotations

import io

import pytest
from openalice_scheduler_client import BootFailed, ReadyTimeout, SchedulerClient
from openalice_scheduler_client.cli import CLEAR_EOL, WaitProgress
from openalice_scheduler_client.models import Lease

from tests.client.fake_scheduler import FakeScheduler
from tests.client.test_cli import run

CRASHED = "the RunPod pod p1 is ERROR (it failed to boot)"


def test_wait_ready_long_polls_until_the_worker_is_ready(fake: FakeScheduler, client: SchedulerClient) -> None:
    fake.boot_gets = 3
    lease = client.acquire("renderer")
    seen: list[str] = []

    patient = client.copy(timeout=30.0)  # long polls need a request timeout above the 25 s they may take
    ready = patient.wait_ready(lease.lease_id, 60, on_progress=lambda answer, _: seen.append(answer.worker_state))

    assert lease.worker_state == "starting" and ready.is_ready and ready.ready_at is not None
    assert seen == ["starting", "starting", "ready"]
    assert {call.query.get("wait_ready") for call in fake.calls("GET", "/v1/lease/.*")} == {"25"}


def test_wait_ready_raises_boot_failed_with_the_services_reason(fake: FakeScheduler, client: SchedulerClient) -> None:
    fake.boot_gets, fake.boot_failure = 2, CRASHED
    lease = client.acquire("renderer")
    with pytest.raises(BootFailed, match="ERROR") as failed:
        client.wait_ready(lease.lease_id, 60)
    assert failed.value.lease.status == "failed" and failed.value.lease.failure_reason == CRASHED


def test_wait_ready_raises_ready_timeout_when_the_worker_is_still_starting(
    fake: FakeScheduler, client: SchedulerClient
) -> None:
    fake.boot_gets = 10_000
    lease = client.acquire("renderer")
    with pytest.raises(ReadyTimeout) as timed_out:
        client.wait_ready(lease.lease_id, 0.3)
    assert timed_out.value.lease.is_starting


def test_the_context_manager_runs_the_block_once_the_worker_is_ready(
    fake: FakeScheduler, client: SchedulerClient
) -> None:
    fake.boot_gets = 2
    with client.lease("renderer", ttl_seconds=60) as held:
        assert held.lease.is_ready
    assert fake.leases[held.lease_id]["status"] == "released"


def test_the_context_manager_can_skip_the_wait(fake: FakeScheduler, client: SchedulerClient) -> None:
    fake.boot_gets = 2
    with client.lease("renderer", ttl_seconds=60, wait_ready=False) as held:
        assert held.lease.worker_state == "starting"


def test_the_context_manager_releases_a_lease_that_never_becomes_ready(
    fake: FakeScheduler, client: SchedulerClient
) -> None:
    fake.boot_gets = 10_000
    ran = False
    with pytest.raises(ReadyTimeout), client.lease("renderer", ttl_seconds=60, ready_timeout=0.3):
        ran = True
    assert not ran and [lease["status"] for lease in fake.leases.values()] == ["released"]


def test_a_lease_from_a_service_without_readiness_counts_as_ready() -> None:
    wire = {"lease_id": "x", "kind": "renderer", "status": "active", "created_at": "2026-11-30T04:00:00Z"}
    lease = Lease.from_wire({**wire, "expires_at": "2026-11-30T05:00:00Z", "ttl_seconds": 3600})
    assert lease.is_ready


def test_leasectl_acquire_wait_prints_one_line_per_change_without_a_terminal(fake: FakeScheduler) -> None:
    fake.boot_gets = 3
    code, out, err = run(fake, "acquire", "--kind", "renderer", "--wait")
    lines = err.strip().splitlines()
    assert code == 0 and "worker_state    ready" in out
    assert len(lines) == 2 and "active, worker starting" in lines[0] and "worker ready" in lines[1]


def test_leasectl_acquire_wait_exits_4_with_the_reason_when_the_worker_fails(fake: FakeScheduler) -> None:
    fake.boot_gets, fake.boot_failure = 2, CRASHED
    code, out, err = run(fake, "acquire", "--kind", "renderer", "--wait", "30")
    assert code == 4 and CRASHED in err and out == ""


def test_leasectl_acquire_wait_releases_a_lease_not_ready_in_time(fake: FakeScheduler) -> None:
    fake.boot_gets = 10_000
    code, _, err = run(fake, "acquire", "--kind", "renderer", "--wait", "1")
    assert code == 4 and "still starting after 1 s" in err and "released" in err
    assert [lease["status"] for lease in fake.leases.values()] == ["released"]


def test_leasectl_wait_waits_for_an_existing_lease(fake: FakeScheduler, client: SchedulerClient) -> None:
    fake.boot_gets = 2
    lease = client.acquire("renderer")
    code, out, err = run(fake, "--json", "wait", lease.lease_id)
    assert code == 0 and '"worker_state": "ready"' in out and "worker ready" in err


def test_leasectl_wait_json_failure_carries_the_lease(fake: FakeScheduler, client: SchedulerClient) -> None:
    fake.boot_gets, fake.boot_failure = 2, CRASHED
    lease = client.acquire("renderer")
    code, out, _ = run(fake, "--json", "wait", lease.lease_id)
    assert code == 4 and '"code": "boot_failed"' in out and CRASHED in out


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_redrawn_in_place_on_a_terminal(fake: FakeScheduler, client: SchedulerClient) -> None:
    fake.boot_gets = 2
    lease = client.acquire("renderer")
    stream = _Terminal()
    with WaitProgress(stream) as progress:
        progress.update(lease, 0.0)
        client.wait_ready(lease.lease_id, 60, on_progress=progress.update)
    text = stream.getvalue()
    assert text.startswith("\r") and CLEAR_EOL in text and text.endswith("\n") and text.count("\n") == 1
    assert "worker ready" in text.rsplit("\r", 1)[-1]
