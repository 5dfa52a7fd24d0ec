"""The queue in memory, as `store/queue.py` keeps it in DynamoDB: the same items, transitions and order.

The queue index is the items that carry `queue_shard`, by `queue_order` then id (what merging the shards' Queries
gives); `finish_preempted` checks both leases' conditions and the counters under the lock, then writes all or
nothing, as DynamoDB's transaction does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime

from scheduler import budgets, lifecycle
from scheduler.costs import micros, spend_micros
from scheduler.fairness import Running
from scheduler.lifecycle import HOLDING, LeaseStatus, Transition
from scheduler.models import Lease
from scheduler.store.claims import Claim, LeaseStateChanged
from scheduler.store.conditions import Inputs
from scheduler.store.counters import Limit, parse_held
from scheduler.store.items import Item, epoch, lease_from_item, queued_item
from scheduler.store.memory.rules import applied, holds, number, status_of, text
from scheduler.store.memory.steps import Lost, MemorySteps
from scheduler.store.memory.tables import Change
from scheduler.store.queue_model import (
    CANCELLED,
    Handover,
    QueuedLease,
    QueueWait,
    admit_inputs,
    net_moves,
    preempted,
    queue_entry,
    queue_order,
    queued_of,
    running_lease,
)
from scheduler.store.queue_records import QUEUE_WAITS, NoticeRecord
from scheduler.store.refusals import refusal_error


class MemoryQueue(MemorySteps):
    """The queue's transitions and reads (`LeaseQueuePort`)."""

    def enqueue(self, lease: Lease, wait: QueueWait) -> None:
        shard = self._shard_of(lease.lease_id)
        item = queued_item(lease, shard, queue_entry(lease, wait, shard, self._retention, lease.created_at))
        with self._lock:
            old = self._items.get(lease.lease_id, {})
            if not holds(lifecycle.ENQUEUE, Inputs(), old):
                if old.get("created_epoch") == item["created_epoch"]:
                    return  # as LeaseStore takes a resent put of its own
                raise LeaseStateChanged(lease.lease_id)
            self._items[lease.lease_id] = item

    def admit(self, lease: Lease, limits: Sequence[Limit] = ()) -> Limit | None:
        held = tuple(sorted({limit.held for limit in limits}))
        inputs = admit_inputs(lease, held, self._shard_of(lease.lease_id))
        try:
            done = self._transact(lifecycle.ADMIT, lease.lease_id, inputs, [Change.take(limit) for limit in limits])
        except Lost as lost:
            ours = text(lost.item, "admission_id") == inputs.admission_id
            if not limits and status_of(lost.item) is LeaseStatus.PENDING and ours:
                return None  # as LeaseStore takes its own resent admission
            raise LeaseStateChanged(lease.lease_id) from None
        return limits[done] if isinstance(done, int) else None

    def requeue(self, lease: Lease, now: datetime, held: tuple[str, ...], wait: QueueWait) -> bool:
        entry = queue_entry(lease, wait, self._shard_of(lease.lease_id), self._retention, now)
        try:
            self._transact(
                lifecycle.REQUEUE,
                lease.lease_id,
                Inputs(now=epoch(now), queue=entry),
                [Change.give_back(slot) for slot in held],
            )
        except Lost:
            return False
        return True

    def cancel_queued(self, lease_id: str, owner: str | None, now: datetime, *, by: str | None = None) -> Lease:
        inputs = Inputs(now=epoch(now), owner=owner, reason=CANCELLED, retain_until=epoch(now) + self._retention, by=by)
        try:
            return self._queued_end(lifecycle.CANCEL, lease_id, inputs)
        except Lost as lost:
            raise refusal_error(lifecycle.CANCEL, lease_id, lost.item, epoch(now), owner) from None

    def expire_queued(self, lease_id: str, now: datetime, reason: str, *, by: str | None = None) -> Lease | None:
        inputs = Inputs(now=epoch(now), reason=reason, retain_until=epoch(now) + self._retention, by=by)
        try:
            return self._queued_end(lifecycle.EXPIRE_QUEUED, lease_id, inputs)
        except Lost:
            return None

    def notice(self, lease_id: str, now: datetime, record: NoticeRecord, ran_since: int) -> Lease | None:
        inputs = Inputs(now=epoch(now), notice=record, priority=record.priority, ran_since=ran_since)
        return self._lease_or_none(lifecycle.NOTICE, lease_id, inputs)

    def claim_preempted(self, lease_id: str, now: datetime, *, by: str | None = None) -> Claim | None:
        return self._claim_or_none(lifecycle.CLAIM_PREEMPTED, lease_id, now, Inputs(by=by))

    def finish_preempted(
        self, claim: Claim, now: datetime, handover: Handover, reason: str | None = None
    ) -> Lease | None:
        victim, admitted = claim.lease, handover.lease
        billed = None if victim.cost_per_hour is None else max(0, epoch(now) - epoch(victim.created_at))
        spent = (
            0 if billed is None or victim.cost_per_hour is None else spend_micros(micros(victim.cost_per_hour), billed)
        )
        end = Inputs(
            now=epoch(now),
            reason=reason,
            claim_id=claim.claim_id,
            outcome=claim.outcome,
            retain_until=epoch(now) + self._retention,
            by=claim.by,
        )
        admit = admit_inputs(admitted, handover.held, self._shard_of(admitted.lease_id))
        kept = [entry for entry in claim.held_counters if parse_held(entry)[0] != handover.moved]
        moves = [Change.take(move) for move in net_moves(budgets.settlement(kept, spent, epoch(now)), handover.limits)]
        with self._lock:
            old = self._items.get(victim.lease_id, {})
            if not holds(lifecycle.FINISH, end, old):
                raise LeaseStateChanged(victim.lease_id)
            waiting = self._items.get(admitted.lease_id, {})
            if not holds(lifecycle.ADMIT, admit, waiting):
                return None
            if moves and self._book().transact(moves, other_items=2 + (billed is not None)) is not None:
                return None
            self._items[victim.lease_id] = applied(lifecycle.FINISH, end, old)
            self._items[admitted.lease_id] = applied(lifecycle.ADMIT, admit, waiting)
            if billed is not None and self._usage_table is not None:
                self._usage_table.add(victim, billed, now)
        return preempted(claim, now, reason)

    def queued_leases(self) -> Iterator[QueuedLease]:
        with self._lock:
            found = sorted(
                (item for item in self._items.values() if "queue_shard" in item),
                key=lambda item: (int(number(item, "queue_order") or 0), item["lease_id"]["S"]),
            )
        for item in found:
            yield queued_of(item)

    def queued_lease(self, lease_id: str) -> QueuedLease | None:
        with self._lock:
            item = self._items.get(lease_id, {})
        return queued_of(item) if status_of(item) is LeaseStatus.QUEUED else None

    def queue_ahead(self, priority: int) -> dict[str, int]:
        bound = queue_order(priority - 1, 0)
        found: dict[str, int] = {}
        with self._lock:
            for item in self._items.values():
                if "queue_shard" not in item or (number(item, "queue_order") or 0) >= bound:
                    continue
                if text(item, "queue_wait") != QUEUE_WAITS[True]:
                    continue
                for provider in (text(item, "queue_providers") or "").split(","):
                    if provider:
                        found[provider] = found.get(provider, 0) + 1
        return found

    def running_leases(self) -> Iterator[Running]:
        with self._lock:
            found = [item for shard in range(self._shards) for item in self._live(shard) if status_of(item) in HOLDING]
        for item in found:
            yield running_lease(item)

    def _queued_end(self, transition: Transition, lease_id: str, inputs: Inputs) -> Lease:
        """As LeaseStore's: a resent end of ours (same time, same actor) answers as it landed."""
        with self._lock:
            try:
                return lease_from_item(self._write(transition, lease_id, inputs))
            except Lost as lost:
                old: Item = lost.item
                final = transition.target
                landed = final is not None and text(old, "status") == final.value and "live_shard" not in old
                if landed and number(old, "released_epoch") == inputs.now and text(old, "ended_by") == inputs.by:
                    return lease_from_item(old)
                raise
