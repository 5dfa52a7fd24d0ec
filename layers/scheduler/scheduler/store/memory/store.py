"""MemoryLeaseStore: the lease store of `store/port.py` in memory, for the use cases' fast tests.

Each state change is one transition of `scheduler.lifecycle`, applied under one lock with the counters it
takes or gives back: what DynamoDB does in one conditional write or transaction. The transition's source
statuses, guards and writes are evaluated from its declaration (`rules.py`), refusals are told by the same
`refusal_error` as `LeaseStore`'s, and where LeaseStore recognises a write of its own that had landed (a
resent activate, an end within a minute), this store answers the same, so the two pass the same contract
tests. Times come from the callers' `now`; the wall clock only where LeaseStore reads it too (activate
without `now`).

Items keep DynamoDB's layout (`store/items.py`), `ttl` included. Nothing deletes them on its own: an ended
lease reads back until TTL would delete it, which `expire_ttl` (and `ttl_delete`, one lease) plays for tests,
answering the old images a stream would carry.
"""

from __future__ import annotations

import copy
import math
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING

from scheduler import budgets, lifecycle
from scheduler.costs import accrued_usd, micros, spend_micros
from scheduler.lifecycle import LeaseStatus, Transition
from scheduler.models import Lease
from scheduler.store import counters
from scheduler.store.claims import Claim, LeaseStateChanged
from scheduler.store.conditions import Inputs, WorkerRecord
from scheduler.store.counters import Limit
from scheduler.store.items import Item, claimed_by, epoch, lease_from_item, new_item
from scheduler.store.memory.queue import MemoryQueue
from scheduler.store.memory.rules import applied, holds, number, text
from scheduler.store.memory.steps import Lost, claim_ttl
from scheduler.store.memory.tables import Change
from scheduler.store.refusals import refusal_error
from scheduler.store.renewals import passes_an_end

if TYPE_CHECKING:
    from scheduler.budgets import OwnerBudgets, Reweighing
    from scheduler.providers.base import ProvisionedWorker


class MemoryLeaseStore(MemoryQueue):
    """Leases in memory, changed only through the transitions of `scheduler.lifecycle`.

    `counters_table` / `usage_table` False: as a LeaseStore without COUNTERS_TABLE / USAGE_TABLE (limits
    refused with RuntimeError, no prices seen, no usage kept).
    """

    @property
    def queue(self) -> MemoryLeaseStore:
        """The queue's transitions and reads: this store's own (LeaseStore keeps them apart, to load them late)."""
        return self

    def create_pending(self, lease: Lease, limits: Sequence[Limit] = ()) -> Limit | None:
        """Record the lease `pending` with a slot of each limit; the full limit instead (nothing written)."""
        item = new_item(lease, self._shard_of(lease.lease_id))
        held = counters.held_set(limit.held for limit in limits)
        if held is not None:
            item["held_counters"] = held
        with self._lock:
            book = self._book() if limits else None
            old = self._items.get(lease.lease_id, {})
            if not holds(lifecycle.RECORD, Inputs(), old):
                if not limits and old.get("created_epoch") == item["created_epoch"]:
                    return None  # as LeaseStore takes a resent put whose first attempt landed
                # LeaseStore lets DynamoDB's ConditionalCheckFailedException out here (a lease id used twice).
                raise LeaseStateChanged(lease.lease_id)
            full = book.transact([Change.take(limit) for limit in limits]) if book else None
            if full is not None:
                return limits[full]
            self._items[lease.lease_id] = item
        return None

    def move_slot(
        self, lease_id: str, held: tuple[str, ...], give_back: str | None, take: Limit | None
    ) -> tuple[str, ...] | Limit:
        """Swap the provider slot a `pending` lease holds; the full limit instead (nothing changed)."""
        now_held = tuple(sorted({*held, *([take.held] if take else [])} - {give_back}))
        changes = [*([Change.give_back(give_back)] if give_back else []), *([Change.take(take)] if take else [])]
        try:
            moved = self._transact(lifecycle.MOVE_SLOT, lease_id, Inputs(held=now_held), changes)
        except Lost:
            raise LeaseStateChanged(lease_id) from None
        if isinstance(moved, int) and take is not None:
            return take
        return now_held

    def activate(
        self,
        lease_id: str,
        provider: str,
        worker: ProvisionedWorker,
        now: datetime | None = None,
        reweighed: Reweighing | None = None,
    ) -> Lease | Limit:
        """`pending` → `active` with its worker; with `reweighed`, the budgets re-weighed in the same step."""
        ends = None if worker.ends_at is None else epoch(worker.ends_at)
        record = WorkerRecord(provider, worker.token, worker.endpoint, worker.cost_per_hour, worker.ready, ends)
        at = epoch(now) if now is not None else int(datetime.now(UTC).timestamp())
        if reweighed is not None and reweighed.deltas:
            return self._activate_reweighed(lease_id, record, reweighed, at)
        try:
            item = self._write(lifecycle.ACTIVATE, lease_id, Inputs(worker=record, now=at))
        except Lost as lost:
            if text(lost.item, "status") == LeaseStatus.ACTIVE and text(lost.item, "provider_token") == worker.token:
                return lease_from_item(lost.item)  # as LeaseStore takes its own resent activate
            raise LeaseStateChanged(lease_id) from None
        return lease_from_item(item)

    def _activate_reweighed(self, lease_id: str, record: WorkerRecord, reweighed: Reweighing, at: int) -> Lease | Limit:
        takes = [limit for limit in reweighed.limits if limit.amount > 0]
        gives = [Change.give_back(limit.counter, -limit.amount) for limit in reweighed.limits if limit.amount < 0]
        inputs = Inputs(worker=record, reweighed=reweighed.held, now=at)
        try:
            done = self._transact(lifecycle.ACTIVATE, lease_id, inputs, [*gives, *map(Change.take, takes)])
        except Lost:
            raise LeaseStateChanged(lease_id) from None
        if isinstance(done, int):
            return takes[done - len(gives)]
        return self.get(lease_id)

    def fail_pending(
        self,
        lease_id: str,
        now: datetime,
        held: tuple[str, ...] = (),
        reason: str | None = None,
        *,
        by: str | None = None,
    ) -> bool:
        """End a `pending` lease `failed`, giving its slots back; False if it is no longer pending."""
        try:
            self._end(lifecycle.FAIL_PENDING, lease_id, now, Inputs(reason=reason, by=by), held)
        except LeaseStateChanged:
            return False
        return True

    # --- release claims ------------------------------------------------------------------------

    def claim_release(self, lease_id: str, owner: str | None, now: datetime, *, by: str | None = None) -> Claim:
        try:
            return self._claim(lifecycle.CLAIM_RELEASE, lease_id, now, Inputs(owner=owner, by=by))
        except Lost as lost:
            raise refusal_error(lifecycle.CLAIM_RELEASE, lease_id, lost.item, epoch(now), owner) from None

    def claim_due(self, lease_id: str, now: datetime, *, by: str | None = None) -> Claim | None:
        return self._claim_or_none(lifecycle.CLAIM_DUE, lease_id, now, Inputs(by=by))

    def claim_failed(
        self,
        lease_id: str,
        now: datetime,
        *,
        status: LeaseStatus,
        token: str | None,
        reason: str | None = None,
        by: str | None = None,
    ) -> Claim | None:
        inputs = Inputs(expected=status, token=token, reason=reason, by=by)
        return self._claim_or_none(lifecycle.CLAIM_FAILED, lease_id, now, inputs)

    def claim_boot_failed(
        self, lease_id: str, now: datetime, *, token: str, reason: str, by: str | None = None
    ) -> Claim | None:
        inputs = Inputs(token=token, reason=reason, by=by)
        return self._claim_or_none(lifecycle.CLAIM_BOOT_FAILED, lease_id, now, inputs)

    def reclaim_ttl_deleted(self, old_image: Item, now: datetime, *, by: str | None = None) -> Claim | None:
        """Write a live lease TTL deleted (its stream image) back as `releasing`, claimed as `expired`."""
        transition = lifecycle.RECLAIM_TTL_DELETED
        claim_id = uuid.uuid4().hex
        lease_id = old_image["lease_id"]["S"]
        inputs = Inputs(claim_id=claim_id, claim_due=epoch(now) + self._claim_seconds, claim_ttl=claim_ttl(now), by=by)
        # ENTER_INDEX is the store's, as for a new item; the claim is the transition's own writes.
        item = applied(transition, inputs, {**old_image, "live_shard": {"S": self._shard_of(lease_id)}})
        with self._lock:
            if not holds(transition, inputs, self._items.get(lease_id, {})):
                return None
            self._items[lease_id] = item
        outcome = transition.outcome or LeaseStatus.EXPIRED
        return Claim(lease_from_item(item), claim_id, outcome, counters.held_by(item), claimed_by(item))

    def finish_release(self, claim: Claim, now: datetime, reason: str | None = None) -> Lease:
        """Record the claim's outcome, giving back its slots; LeaseStateChanged if the claim was taken over."""
        inputs = Inputs(claim_id=claim.claim_id, outcome=claim.outcome, reason=reason, by=claim.by)
        ended = self._end(lifecycle.FINISH, claim.lease.lease_id, now, inputs, claim.held_counters, claim.lease)
        lease = claim.lease
        return ended or lease.replace(
            status=claim.outcome,
            released_at=datetime.fromtimestamp(epoch(now), UTC),
            cost_usd=accrued_usd(lease.cost_per_hour, epoch(lease.created_at), epoch(now)),
            failure_reason=reason or lease.failure_reason,
            ended_by=claim.by,
        )

    # --- readiness -----------------------------------------------------------------------------

    def claim_readiness_check(self, lease_id: str, now: datetime, interval_seconds: float) -> Lease | None:
        inputs = Inputs(now=epoch(now), checked_before=epoch(now) - max(1, math.ceil(interval_seconds)))
        return self._lease_or_none(lifecycle.CHECK_READINESS, lease_id, inputs)

    def mark_ready(self, lease_id: str, token: str, now: datetime, *, by: str | None = None) -> Lease | None:
        return self._lease_or_none(lifecycle.MARK_READY, lease_id, Inputs(now=epoch(now), token=token, by=by))

    def index_starting(self, lease_id: str) -> bool:
        """Enter a starting lease into the starting index; False if it is there (or not starting)."""
        with self._lock:
            item = self._items.get(lease_id, {})
            starting = holds(lifecycle.CLAIM_BOOT_FAILED, Inputs(), item)
            if not starting or "live_shard" not in item or "starting_shard" in item:
                return False
            self._items[lease_id] = {**item, "starting_shard": item["live_shard"]}
        return True

    # --- expiry warnings ---------------------------------------------------------------------------

    def warn_expiry(self, lease_id: str, expires_epoch: int, now: datetime) -> bool:
        """Mark the lease warned of its expiry `expires_epoch`; False when it changed meanwhile."""
        inputs = Inputs(now=epoch(now), seen_expiry=expires_epoch)
        return self._lease_or_none(lifecycle.WARN_EXPIRY, lease_id, inputs) is not None

    # --- renew ---------------------------------------------------------------------------------

    def renew(
        self, lease_id: str, owner: str | None, ttl_seconds: int | None, now: datetime, *, by: str | None = None
    ) -> Lease:
        start = math.ceil(now.timestamp())
        inputs = Inputs(now=epoch(now), start=start, owner=owner, ttl_seconds=ttl_seconds, by=by)
        try:
            item = self._write(lifecycle.RENEW, lease_id, inputs)
        except Lost as lost:
            raise refusal_error(
                lifecycle.RENEW, lease_id, lost.item, epoch(now), owner, _renewed_until(lost.item, start, ttl_seconds)
            ) from None
        return lease_from_item(item)

    def renew_reserving(
        self,
        lease_id: str,
        owner: str | None,
        ttl_seconds: int | None,
        now: datetime,
        budget: OwnerBudgets,
        *,
        by: str | None = None,
    ) -> Lease | Limit:
        """Renew, reserving the extension's spend in the same step (`OwnerBudgets.renewal`, as LeaseStore)."""
        with self._lock:
            item = self._items.get(lease_id, {})
            if budget.per_day is None or "cost_per_hour" not in item:
                return self.renew(lease_id, owner, ttl_seconds, now, by=by)
            start = math.ceil(now.timestamp())
            old_expiry = int(item["expires_epoch"]["N"])
            ttl = ttl_seconds if ttl_seconds is not None else int(item["ttl_seconds"]["N"])
            new_expiry = start + ttl
            if passes_an_end(item, new_expiry):
                raise refusal_error(lifecycle.RENEW, lease_id, item, epoch(now), owner, new_expiry)
            if new_expiry <= old_expiry:
                return self.renew(lease_id, owner, ttl_seconds, now, by=by)
            rate, created = float(item["cost_per_hour"]["N"]), int(float(item["created_epoch"]["N"]))
            lease_owner = budgets.budget_owner(text(item, "owner_id"))
            renewing = budget.renewal(counters.held_by(item), lease_owner, rate, created, new_expiry, epoch(now))
            inputs = Inputs(
                now=epoch(now),
                start=start,
                owner=owner,
                ttl_seconds=ttl,
                seen_expiry=old_expiry,
                reweighed=renewing.held,
                by=by,
            )
            try:
                changes = [Change.take(limit) for limit in renewing.limits]
                done = self._transact(lifecycle.RENEW, lease_id, inputs, changes)
            except Lost as lost:
                raise refusal_error(lifecycle.RENEW, lease_id, lost.item, epoch(now), owner, new_expiry) from None
            return renewing.limits[done] if isinstance(done, int) else self.get(lease_id)

    # --- what DynamoDB does behind the store's back, for tests ---------------------------------

    def stored_item(self, lease_id: str) -> Item:
        """The lease's item as stored (DynamoDB's layout); KeyError if there is none."""
        with self._lock:
            return copy.deepcopy(self._items[lease_id])

    def stored_items(self) -> list[Item]:
        """Every lease item as stored."""
        with self._lock:
            return copy.deepcopy(list(self._items.values()))

    def put_stored_item(self, item: Item) -> None:
        """Write an item as it is, as a PutItem behind the store's back (code of another version) would."""
        with self._lock:
            self._items[item["lease_id"]["S"]] = copy.deepcopy(item)

    def ttl_delete(self, lease_id: str) -> Item:
        """Delete the lease as DynamoDB's TTL process would: the old image its stream record carries."""
        with self._lock:
            return self._items.pop(lease_id)

    def expire_ttl(self, now: datetime) -> list[Item]:
        """One pass of DynamoDB's TTL process at `now`: every lease whose `ttl` has passed is deleted."""
        with self._lock:
            gone = [lease_id for lease_id, item in self._items.items() if _past(number(item, "ttl"), epoch(now))]
            return [self._items.pop(lease_id) for lease_id in gone]

    # --- internals -----------------------------------------------------------------------------

    def _end(
        self,
        transition: Transition,
        lease_id: str,
        now: datetime,
        inputs: Inputs,
        held: tuple[str, ...],
        ended: Lease | None = None,
    ) -> Lease | None:
        """End a lease, giving back what it holds and adding what it billed to its owner's day in the same step
        (`budgets.settlement`) and to the usage table; None when it held counters, as LeaseStore answers."""
        spent, billed = 0, None
        if ended is not None and ended.cost_per_hour is not None:
            billed = max(0, epoch(now) - epoch(ended.created_at))
            spent = spend_micros(micros(ended.cost_per_hour), billed)
        usage = self._usage_table if billed is not None else None
        bound = Inputs(
            now=epoch(now),
            reason=inputs.reason,
            claim_id=inputs.claim_id,
            outcome=inputs.outcome,
            retain_until=epoch(now) + self._retention,
            by=inputs.by,
        )
        moves = [Change.take(move) for move in budgets.settlement(held, spent, epoch(now))] if held else []
        final = transition.target or inputs.outcome
        with self._lock:
            try:
                item = self._transact(transition, lease_id, bound, moves, others=2 if usage else 1)
            except Lost as lost:
                old = lost.item
                landed = final is not None and text(old, "status") == final.value and "live_shard" not in old
                if landed and abs(int(number(old, "released_epoch") or 0) - epoch(now)) <= 60:
                    return lease_from_item(old)  # as LeaseStore takes its own resent end, within a minute
                raise LeaseStateChanged(lease_id) from None
            if usage is not None and ended is not None and billed is not None:
                usage.add(ended, billed, now)
        return None if held or not isinstance(item, dict) else lease_from_item(item)


def _past(ttl: Decimal | None, now: int) -> bool:
    """Whether DynamoDB's TTL process may delete an item with this `ttl` at `now` (never one without)."""
    return ttl is not None and ttl < now


def _renewed_until(item: Item, start: int, ttl_seconds: int | None) -> int | None:
    """The expiry a renewal from `start` asked for (the lease's own ttl when none was given), if known."""
    own = item.get("ttl_seconds", {}).get("N")
    ttl = ttl_seconds if ttl_seconds is not None else (int(own) if own is not None else None)
    return None if ttl is None else start + ttl
