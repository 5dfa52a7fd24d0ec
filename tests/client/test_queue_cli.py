"""`leasectl` and the queue, against the fake lease API with a cap: `queue`, `acquire --queue … --wait` and its
progress, and preemption notices in `get`, `list` and `watch`."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from openalice_scheduler_client import Lease, SchedulerClient
from openalice_scheduler_client.cli_queue import format_queue
from openalice_scheduler_client.cli_style import format_table

from tests.client.fake_scheduler import FakeScheduler
from tests.client.test_cli import run
from tests.client.test_queue_client import later, release_holder

LEASE_LINE = "lease {}: "


def queued_lease(fake: FakeScheduler, owner: str, priority: int = 50) -> str:
    with SchedulerClient(fake.url, fake.secret) as client:
        return client.acquire("anim", owner_id=owner, queue_seconds=600, priority=priority).lease_id


# --- leasectl queue ----------------------------------------------------------------------------------------


def test_queue_prints_the_queued_leases_in_admission_order(capped: FakeScheduler) -> None:
    low, high = queued_lease(capped, "batch", 10), queued_lease(capped, "live", 90)

    code, out, _ = run(capped, "queue")

    header, first, second = out.splitlines()
    assert code == 0 and header.split() == ["POS", "ID", "PRI", "OWNER", "KIND", "GPU", "AGE", "QUEUED_UNTIL", "REASON"]
    assert first.split()[:7] == ["1", high, "90", "live", "anim", "none", "0s"]
    assert second.split()[:4] == ["2", low, "10", "batch"] and "at its cap of 1" in second


def test_queue_json_is_the_apis_body_and_owner_and_limit_are_sent(capped: FakeScheduler) -> None:
    mine = queued_lease(capped, "batch")

    code, out, _ = run(capped, "--json", "queue", "--owner", "batch", "--limit", "3")

    assert code == 0 and [lease["lease_id"] for lease in json.loads(out)["queue"]] == [mine]
    assert capped.calls("GET", "/v1/queue")[-1].query == {"owner_id": "batch", "limit": "3"}


def test_an_empty_queue_says_so(fake: FakeScheduler) -> None:
    assert run(fake, "queue")[:2] == (0, "The queue is empty.\n")


def test_the_queue_table_shows_each_leases_age_and_deadline() -> None:
    now = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    wire = {"lease_id": "l-1", "kind": "anim", "status": "queued", "ttl_seconds": 60, "queue_position": 3}
    wire |= {"created_at": "2026-12-01T09:58:30Z", "expires_at": "2026-12-01T10:10:00Z", "priority": 70}
    wire |= {"queued_at": "2026-12-01T09:58:30Z", "queued_until": "2026-12-01T10:10:00Z", "queue_reason": "why"}

    (_, row) = format_queue([Lease.from_wire(wire)], now)

    assert row.split() == ["3", "l-1", "70", "-", "anim", "none", "1m30s", "2026-12-01T10:10:00Z", "why"]


# --- acquire --queue ---------------------------------------------------------------------------------------


def test_acquire_sends_the_queue_its_priority_and_preemptible(capped: FakeScheduler) -> None:
    code, out, _ = run(capped, "acquire", "--kind", "anim", "--queue", "10m", "--priority", "80", "--preemptible")

    (request,) = capped.calls("POST", "/v1/lease")
    assert (request.body["queue_seconds"], request.body["priority"], request.body["preemptible"]) == (600, 80, True)
    assert code == 0 and "status          queued" in out and "queue_position  1" in out


@pytest.mark.parametrize(
    "argv",
    [["--queue", "2d"], ["--queue", "ten"], ["--priority", "101"], ["--priority", "-1"], ["--priority", "high"]],
)
def test_a_queue_or_priority_out_of_bounds_is_a_usage_error(fake: FakeScheduler, argv: list[str]) -> None:
    code, _, err = run(fake, "acquire", "--kind", "anim", *argv)

    assert code == 2 and argv[0] in err and fake.requests == []


def test_acquire_queue_wait_shows_its_place_the_changes_the_admission_and_the_worker_ready(
    capped: FakeScheduler,
) -> None:
    ahead = queued_lease(capped, "live", 90)
    with SchedulerClient(capped.url, capped.secret) as client:
        later(0.4, lambda: client.copy().release(ahead, owner_id="live"))  # the lease ahead is cancelled
        later(0.8, release_holder, client, capped)  # a slot frees

        code, out, err = run(capped, "--json", "acquire", "--kind", "anim", "--owner", "me", "--queue", "10m", "--wait")

    lease_id = json.loads(out)["lease"]["lease_id"]
    lines = [line.removeprefix(LEASE_LINE.format(lease_id)).rsplit(" (", 1)[0] for line in err.splitlines()]
    assert code == 0 and json.loads(out)["lease"]["status"] == "active"
    assert lines[0].startswith("queued at position 2 (every provider is at its lease cap")
    assert lines[1] == "queued at position 1"
    assert re.fullmatch(r"admitted after [01]s in the queue", lines[2]) and lines[3:] == ["worker ready"]


def test_acquire_queue_wait_exits_4_when_the_lease_is_never_admitted(capped: FakeScheduler) -> None:
    later(0.3, lambda: capped.end_queued(next(i for i, lease in capped.leases.items() if lease["status"] == "queued")))

    code, out, err = run(capped, "--json", "acquire", "--kind", "anim", "--queue", "1m", "--wait")

    error = json.loads(out)["error"]
    assert code == 4 and error["code"] == "not_admitted"
    assert error["details"]["lease"]["status"] == "expired" and "never admitted from the queue" in err


def test_ctrl_c_while_queued_cancels_the_queued_lease(capped: FakeScheduler, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*_: object, **__: object) -> Lease:
        raise KeyboardInterrupt

    monkeypatch.setattr(SchedulerClient, "wait_ready", interrupted)

    code, _, err = run(capped, "acquire", "--kind", "anim", "--owner", "me", "--queue", "10m", "--wait")

    (queued,) = [lease for lease in capped.leases.values() if lease["owner_id"] == "me"]
    assert code == 130 and queued["status"] == "released" and "cancelled the queued lease" in err


# --- preemption notices ------------------------------------------------------------------------------------


def test_get_shows_a_preemption_notice_with_its_time_left_and_its_priority(fake: FakeScheduler) -> None:
    lease = fake.add_lease(owner_id="batch", ttl_seconds=3600, preemptible=True, priority=10)
    at = fake.notice(lease["lease_id"], seconds=115, priority=80)

    code, out, _ = run(fake, "get", lease["lease_id"])

    (line,) = [line for line in out.splitlines() if line.startswith("preempt_at")]
    assert code == 0 and "priority        10, preemptible" in out
    assert line.split(None, 1)[1].startswith(f"{at} (in 1m5")
    assert line.endswith("for a lease of priority 80: the lease ends preempted then")


def test_list_and_watch_show_each_notice_under_the_table(fake: FakeScheduler) -> None:
    kept = fake.add_lease(owner_id="live")
    noticed = fake.add_lease(owner_id="batch", preemptible=True)
    fake.notice(noticed["lease_id"], seconds=90, priority=80)

    for argv in (["list"], ["watch", "--once"]):
        code, out, _ = run(fake, *argv)
        notices = [line for line in out.splitlines() if line.startswith("! ")]
        assert code == 0 and len(notices) == 1 and kept["lease_id"] not in notices[0]
        assert notices[0].startswith(f"! {noticed['lease_id']} (batch): preempted at ")
        assert notices[0].endswith("for a lease of priority 80")


def test_a_noticed_leases_remaining_time_runs_to_its_preempt_at() -> None:
    now = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    wire = {"lease_id": "l-1", "kind": "anim", "status": "active", "ttl_seconds": 3600}
    wire |= {"created_at": "2026-12-01T09:00:00Z", "expires_at": "2026-12-01T11:00:00Z"}

    plain = format_table([Lease.from_wire(wire)], now)[1]
    noticed = format_table([Lease.from_wire(wire | {"preempt_at": "2026-12-01T10:02:00Z"})], now)[1]

    assert "1h00m" in plain and "2m00s" in noticed and "1h00m" not in noticed


def test_the_notices_are_in_the_preempted_colour_on_a_terminal(fake: FakeScheduler) -> None:
    from openalice_scheduler_client.cli_style import STATUS_COLOURS, format_notices, paint_status

    lease = Lease.from_wire(
        {"lease_id": "l-1", "kind": "anim", "status": "active", "ttl_seconds": 60, "preempt_at": "2026-12-01T10:02:00Z"}
        | {"created_at": "2026-12-01T09:00:00Z", "expires_at": "2026-12-01T11:00:00Z"}
    )

    (line,) = format_notices([lease], datetime(2026, 12, 1, 10, 0, tzinfo=UTC), paint_status)

    assert line.startswith(STATUS_COLOURS["preempted"]) and "for a lease of higher priority" in line


def test_a_lease_without_a_notice_or_that_ended_shows_none(fake: FakeScheduler) -> None:
    from openalice_scheduler_client.cli_style import format_notice

    wire = {"lease_id": "l-1", "kind": "anim", "ttl_seconds": 60, "preempt_at": "2026-12-01T10:02:00Z"}
    wire |= {"created_at": "2026-12-01T09:00:00Z", "expires_at": "2026-12-01T11:00:00Z"}
    now = datetime(2026, 12, 1, 10, 0, tzinfo=UTC) + timedelta(0)

    assert format_notice(Lease.from_wire(wire | {"status": "preempted"}), now) is None
    assert format_notice(Lease.from_wire(wire | {"status": "active", "preempt_at": None}), now) is None
