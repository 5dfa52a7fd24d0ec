"""The client and the queue, against the fake lease API with a cap: a queued acquire, `queue()`, waiting through
the queue, `lease()` waiting for its admission before it renews, and its preemption notice (`on_preemption`)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from openalice_scheduler_client import Lease, NotAdmitted, Preempting, SchedulerClient

from tests.client.fake_scheduler import FakeScheduler
from tests.client.test_leasing import _wait_until


def later(seconds: float, action: Any, *args: Any) -> threading.Timer:
    """Do `action(*args)` in `seconds`, as another caller or the service would meanwhile."""
    timer = threading.Timer(seconds, action, args)
    timer.start()
    return timer


def holder_of(fake: FakeScheduler) -> str:
    return next(lease_id for lease_id, lease in fake.leases.items() if lease["owner_id"] == "holder")


def release_holder(client: SchedulerClient, fake: FakeScheduler) -> None:
    client.copy().release(holder_of(fake), owner_id="holder")


# --- acquiring and reading the queue -----------------------------------------------------------------------


def test_a_queued_acquire_sends_its_queue_fields_and_returns_the_queued_lease_with_its_place(
    client: SchedulerClient, capped: FakeScheduler
) -> None:
    lease = client.acquire("renderer", owner_id="anim", queue_seconds=600, priority=80, preemptible=True)

    (request,) = capped.calls("POST", "/v1/lease")
    assert {key: request.body[key] for key in ("queue_seconds", "priority", "preemptible")} == {
        "queue_seconds": 600,
        "priority": 80,
        "preemptible": True,
    }
    assert (lease.status, lease.is_queued, lease.queue_position, lease.endpoint) == ("queued", True, 1, None)
    assert lease.queue_reason and "cap" in lease.queue_reason and lease.queued_until is not None


def test_an_acquire_without_queue_fields_sends_none_of_them(client: SchedulerClient, fake: FakeScheduler) -> None:
    client.acquire("renderer")

    (request,) = fake.calls("POST", "/v1/lease")
    assert not {"queue_seconds", "priority", "preemptible"} & set(request.body)


def test_queue_lists_the_queued_leases_in_admission_order_with_their_places(
    client: SchedulerClient, capped: FakeScheduler
) -> None:
    low = client.acquire("anim", owner_id="batch", queue_seconds=60, priority=10)
    high = client.acquire("anim", owner_id="live", queue_seconds=60, priority=90)

    queue = client.queue()
    mine = client.queue(owner_id="batch", limit=5)

    assert [(lease.lease_id, lease.queue_position) for lease in queue] == [(high.lease_id, 1), (low.lease_id, 2)]
    assert [(lease.lease_id, lease.queue_position) for lease in mine] == [(low.lease_id, 2)]
    assert capped.calls("GET", "/v1/queue")[-1].query == {"owner_id": "batch", "limit": "5"}


# --- waiting through the queue -----------------------------------------------------------------------------


def test_wait_ready_waits_through_the_queue_whose_time_does_not_count_toward_its_timeout(
    client: SchedulerClient, capped: FakeScheduler
) -> None:
    lease = client.acquire("renderer", queue_seconds=600)
    later(1.0, release_holder, client, capped)
    seen: list[str] = []

    patient = client.copy(timeout=30.0)  # long polls need a request timeout above the seconds they may take

    ready = patient.wait_ready(
        lease.lease_id, 0.5, lease=lease, on_progress=lambda answer, _: seen.append(answer.status)
    )

    assert ready.is_ready and ready.admitted_at is not None
    # One read, waiting up to 5 s (a queued lease is polled briefly), answered at the admission 1 s in: past the
    # 0.5 s timeout, which counts only once the lease is out of the queue.
    assert seen == ["active"]
    assert [call.query for call in capped.calls("GET", "/v1/lease/.*")] == [{"wait_ready": "5"}]


def test_wait_ready_raises_not_admitted_when_the_lease_ends_in_the_queue(
    client: SchedulerClient, capped: FakeScheduler
) -> None:
    lease = client.acquire("renderer", queue_seconds=600)
    later(0.2, capped.end_queued, lease.lease_id)

    with pytest.raises(NotAdmitted, match="never admitted") as ended:
        client.wait_ready(lease.lease_id, 60, lease=lease)

    assert ended.value.code == "not_admitted" and ended.value.lease.status == "expired"


def test_the_context_manager_waits_for_its_admission_before_it_renews_and_runs_the_block(
    client: SchedulerClient, capped: FakeScheduler
) -> None:
    later(0.5, release_holder, client, capped)
    started = time.monotonic()

    with client.lease(kind="renderer", ttl_seconds=60, queue_seconds=600, priority=70, renew_every=0.05) as held:
        entered = time.monotonic() - started
        assert held.lease.status == "active" and held.lease.admitted_at is not None
        _wait_until(lambda: held.renewals >= 1)

    assert entered >= 0.5
    (acquired,) = capped.calls("POST", "/v1/lease")
    assert acquired.body["queue_seconds"] == 600 and acquired.body["priority"] == 70
    assert capped.leases[held.lease_id]["status"] == "released"


def test_the_context_manager_raises_not_admitted_and_never_runs_the_block(
    client: SchedulerClient, capped: FakeScheduler
) -> None:
    lease_ids: list[str] = []
    later(0.3, lambda: capped.end_queued(next(i for i, lease in capped.leases.items() if lease["status"] == "queued")))

    with pytest.raises(NotAdmitted), client.lease(kind="renderer", queue_seconds=600) as held:
        lease_ids.append(held.lease_id)

    assert lease_ids == [] and capped.calls("POST", ".*/renew") == []


# --- preemption notices ------------------------------------------------------------------------------------


def test_a_preemptible_lease_is_read_for_a_notice_and_on_preemption_is_called_once_with_the_lease(
    client: SchedulerClient, fake: FakeScheduler
) -> None:
    noticed: list[Lease] = []

    with client.lease(
        kind="renderer", preemptible=True, renew_every=60, check_every=0.05, on_preemption=noticed.append
    ) as held:
        preempt_at = fake.notice(held.lease_id, seconds=2, priority=80)  # 1 to 2 s on (whole seconds)
        _wait_until(lambda: held.preempt_at is not None)
        assert not held.lost
        assert held.lease_lost.wait(3)

    (lease,) = noticed
    assert (lease.lease_id, lease.preempt_priority) == (held.lease_id, 80)
    assert held.preempt_at == lease.preempt_at == datetime.fromisoformat(preempt_at).astimezone(UTC)
    assert isinstance(held.renewal_error, Preempting) and held.renewal_error.preempt_at == held.preempt_at
    assert fake.calls("POST", ".*/renew") == []  # renew_every=60: the reads found it


def test_a_renewal_refused_for_a_notice_is_the_notice_not_a_loss_and_renewals_stop(
    client: SchedulerClient, fake: FakeScheduler
) -> None:
    noticed: list[Lease] = []

    with client.lease(kind="renderer", ttl_seconds=60, renew_every=0.05, on_preemption=noticed.append) as held:
        _wait_until(lambda: held.renewals >= 1)
        fake.notice(held.lease_id, seconds=30, priority=90)
        _wait_until(lambda: noticed)
        renewals = len(fake.calls("POST", ".*/renew"))
        time.sleep(0.3)
        assert len(fake.calls("POST", ".*/renew")) == renewals and not held.lost

    assert [lease.preempt_priority for lease in noticed] == [90]


def test_a_failing_on_preemption_callback_is_logged_and_the_lease_goes_on(
    client: SchedulerClient, fake: FakeScheduler, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(_: Lease) -> None:
        raise RuntimeError("checkpoint failed")

    with client.lease(kind="renderer", preemptible=True, check_every=0.05, on_preemption=broken) as held:
        fake.notice(held.lease_id, seconds=30)
        _wait_until(lambda: "on_preemption callback raised" in caplog.text)
        assert not held.lost and held.preempt_at is not None


def test_a_409_preempting_is_raised_as_preempting_with_its_preempt_at(
    client: SchedulerClient, fake: FakeScheduler
) -> None:
    lease = client.acquire("renderer", ttl_seconds=600)
    at = fake.notice(lease.lease_id, seconds=60)

    with pytest.raises(Preempting) as refused:
        client.renew(lease.lease_id)

    assert refused.value.status == 409 and refused.value.code == "preempting"
    assert refused.value.preempt_at == datetime.fromisoformat(at).astimezone(UTC)
