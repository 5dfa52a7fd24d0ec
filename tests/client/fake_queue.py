"""The fake lease API's queue (`FakeScheduler.cap`): an acquire with `queue_seconds` that finds the cap taken is
answered 202 `queued` with its place and reason; `GET /v1/queue` lists the queue in admission order (priority,
then age); a release admits the next; a read with `wait_ready` waits while the lease is queued (answering early
when the queue changes, so tests need not wait out a poll); `notice()` gives a lease a preemption notice, past
which a renewal is 409 `preempting`. The service's fair share between owners is not modelled."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.client.fake_scheduler import FakeScheduler, Recorded

Answer = tuple[int, dict[str, str], Any]


def _time(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


class FakeQueue:
    """Methods of `FakeScheduler` for its queue (called with its lock held unless said otherwise)."""

    def _holding(self: FakeScheduler) -> int:
        return sum(1 for lease in self.leases.values() if lease["status"] in ("pending", "active", "releasing"))

    def _ordered(self: FakeScheduler) -> list[dict[str, Any]]:
        waiting = [lease for lease in self.leases.values() if lease["status"] == "queued"]
        return sorted(waiting, key=lambda lease: (-lease["priority"], lease["queued_at"], lease["lease_id"]))

    def _placed(self: FakeScheduler, lease: dict[str, Any]) -> dict[str, Any]:
        order = [queued["lease_id"] for queued in self._ordered()]
        return {**lease, "queue_position": order.index(lease["lease_id"]) + 1}

    def _full(self: FakeScheduler) -> bool:
        return self.cap is not None and self._holding() >= self.cap

    def _enqueue(self: FakeScheduler, lease: dict[str, Any], seconds: int, now: datetime) -> Answer:
        until = _time(now + timedelta(seconds=seconds))
        lease.update(
            status="queued",
            endpoint=None,
            provider_token=None,
            worker_state="starting",
            ready_at=None,
            queued_at=_time(now),
            queued_until=until,
            expires_at=until,
            queue_reason=f"every provider is at its lease cap (fake: at its cap of {self.cap} live leases)",
        )
        self.leases[lease["lease_id"]] = lease
        self._changed()
        return 202, {}, {"lease": self._placed(lease), "provider": lease["provider"]}

    def _admit_next(self: FakeScheduler) -> None:
        """Admit what fits, in order (as the service does once a slot frees)."""
        for lease in self._ordered():
            if self._full():
                return
            now = datetime.now(UTC)
            lease.update(
                status="active",
                endpoint=f"http://127.0.0.1:9/{lease['lease_id'][:8]}",
                provider_token="c-" + lease["lease_id"][:12],
                worker_state="ready",
                ready_at=_time(now),
                created_at=_time(now),
                admitted_at=_time(now),
                expires_at=_time(now + timedelta(seconds=lease["ttl_seconds"])),
                queue_reason=None,
            )
        self._changed()

    def _cancel(self: FakeScheduler, lease: dict[str, Any]) -> Answer:
        lease.update(status="released", released_at=_time(datetime.now(UTC)), failure_reason="cancelled while queued")
        self._changed()
        return 204, {}, None

    def _queue(self: FakeScheduler, request: Recorded) -> Answer:
        owner = request.query.get("owner_id")
        limit = int(request.query.get("limit", "100"))
        with self._lock:
            placed = [self._placed(lease) for lease in self._ordered()]
        mine = [lease for lease in placed if owner is None or lease["owner_id"] == owner]
        return 200, {}, {"queue": mine[:limit]}

    def _changed(self: FakeScheduler) -> None:
        self.queue_version += 1

    def _await_queue(self: FakeScheduler, lease_id: str, seconds: int) -> None:
        """A read with wait_ready of a queued lease: until it leaves the queue, the queue changes, or `seconds`
        pass (without the lock)."""
        with self._lock:
            seen = self.queue_version
            lease = self.leases.get(lease_id)
            if lease is None or lease["status"] != "queued":
                return
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            with self._lock:
                if self.queue_version != seen or self.leases[lease_id]["status"] != "queued":
                    return
            time.sleep(0.01)

    def _refuse_past_notice(self: FakeScheduler, lease: dict[str, Any], ttl: int) -> Answer | None:
        notice = lease.get("preempt_at")
        if notice is None or datetime.now(UTC) + timedelta(seconds=ttl) <= datetime.fromisoformat(notice):
            return None
        return self._error(
            409, "preempting", f"lease {lease['lease_id']} has a preemption notice", {"preempt_at": notice}
        )

    # --- what tests do ----------------------------------------------------------------------------------------

    def notice(self: FakeScheduler, lease_id: str, seconds: float = 120, priority: int = 80) -> str:
        """Give a lease a preemption notice ending in `seconds` for a lease of `priority`; its preempt_at."""
        at = _time(datetime.now(UTC) + timedelta(seconds=seconds))
        with self._lock:
            self.leases[lease_id].update(preempt_at=at, preempt_priority=priority)
        return at

    def end_queued(self: FakeScheduler, lease_id: str) -> None:
        """The queued lease's queued_until passed: it ends expired, never admitted."""
        with self._lock:
            self.leases[lease_id].update(
                status="expired",
                released_at=_time(datetime.now(UTC)),
                failure_reason="not admitted within queue_seconds (queued until it ran out)",
            )
            self._changed()
