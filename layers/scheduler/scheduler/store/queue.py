"""The queue in DynamoDB: queued leases, their admission, and the preemption that hands a slot over.

A queued lease is an item of the leases table like any other (`lifecycle.QUEUED`), live (in `live-by-due`, due at
its queued_until) and in the sparse index `queued-by-order` (`queue_shard`, `queue_order`): the order key is
(100 − priority) · 10¹⁰ + the epoch second it joined the queue, so one ascending Query per shard reads the queue
by priority, then age — the static part of the admission order (`scheduler.fairness` adds the owners' shares).
It holds no counter: `admit` takes the lease's slots in the same transaction that moves it to `pending`, exactly
as `create_pending` takes a new lease's, so no cap, quota or budget is ever passed however many admitters run,
and its condition (still queued, before queued_until) admits it once.

`finish_preempted` ends a preempted lease and admits the queued lease it was preempted for in one transaction:
the provider slot moves from one to the other (neither given back nor taken), the rest of the victim's counters
come back, the preemptor's quota and budgets are taken — so nobody else can take that slot in between.

What the methods work with (`store/queue_model.py`) loads on first use: a function that only reads leases never
loads it, nor the scheduling rules.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from scheduler import budgets, lifecycle
from scheduler.costs import micros, spend_micros
from scheduler.lifecycle import LeaseStatus
from scheduler.models import Lease
from scheduler.store import conditions, counters
from scheduler.store.claims import Claim, LeaseStateChanged
from scheduler.store.conditions import Inputs, render
from scheduler.store.counters import Limit, parse_held
from scheduler.store.items import Item, epoch, lease_from_item, number_attr, queued_item, string_attr
from scheduler.store.queries import LeaseReads
from scheduler.store.refusals import refusal_error
from scheduler.store.usage import UsageBook

if TYPE_CHECKING:
    from scheduler.fairness import Running
    from scheduler.store.queue_model import Handover, QueuedLease, QueueWait
    from scheduler.store.queue_records import NoticeRecord
    from scheduler.store.retries import Backoff

QUEUE_INDEX = "queued-by-order"


class LeaseQueue(LeaseReads, UsageBook):
    """The queue's transitions and reads on the leases table (`LeaseStore.queue`: its table, client and settings)."""

    def __init__(
        self,
        table_name: str,
        client: Any,
        *,
        shards: int = 1,
        retention_seconds: int = 7 * 24 * 3600,
        counters_table: str | None = None,
        retry: Backoff | None = None,
        usage_table: str | None = None,
    ) -> None:
        super().__init__(table_name, client, shards=shards, counters_table=counters_table, retry=retry)
        self.usage_table = usage_table
        self._retention = retention_seconds

    def enqueue(self, lease: Lease, wait: QueueWait) -> None:
        """Record a new lease `queued` (no counter, no worker); LeaseStateChanged if its id is taken."""
        from scheduler.store.queue_model import queue_entry

        entry = queue_entry(lease, wait, self._shard_of(lease.lease_id), self._retention, lease.created_at)
        item = queued_item(lease, self._shard_of(lease.lease_id), entry)
        condition = conditions.condition(lifecycle.ENQUEUE, Inputs()).request()
        try:
            self._call(
                "PutItem",
                TableName=self.table_name,
                Item=item,
                **condition,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except self._errors.ConditionalCheckFailedException as lost:
            if self._lost_item(lost, lease.lease_id).get("created_epoch") != item["created_epoch"]:
                raise LeaseStateChanged(lease.lease_id) from lost  # not a resent put of ours: the id is taken

    def admit(self, lease: Lease, limits: Sequence[Limit] = ()) -> Limit | None:
        """Move a queued lease to `pending` as `lease` says (provider, created_at, expires_at) with a slot of each
        limit, in one transaction; the limit that is full instead (nothing written). LeaseStateChanged when it is
        no longer queued, or past its queued_until."""
        from scheduler.store.queue_model import admit_inputs

        held = tuple(sorted({limit.held for limit in limits}))
        inputs = admit_inputs(lease, held, self._shard_of(lease.lease_id))
        update = {**self._key(lease.lease_id), **render(lifecycle.ADMIT, inputs).request()}
        try:
            if not limits:
                self._call("UpdateItem", **update, ReturnValuesOnConditionCheckFailure="ALL_OLD")
                return None
            full = self._transact([{"Update": update}, *(counters.take(self._counters(), limit) for limit in limits)])
        except self._errors.ConditionalCheckFailedException as lost:
            old = self._lost_item(lost, lease.lease_id) if not limits else {}
            if old.get("status", {}).get("S") == LeaseStatus.PENDING and old.get("admission_id") == string_attr(
                str(inputs.admission_id)
            ):
                return None  # a resent admission of ours, which had landed (not another admitter's)
            raise LeaseStateChanged(lease.lease_id) from lost
        return None if full is None else limits[full]

    def requeue(self, lease: Lease, now: datetime, held: tuple[str, ...], wait: QueueWait) -> bool:
        """Put a `pending` lease (no worker made) back in the queue until its queued_until, as `lease` was made
        (created_at), not to be admitted before a backoff, giving back its slots in the same transaction; False when
        it is no longer pending, or its queued_until has passed."""
        from scheduler.store.queue_model import queue_entry

        entry = queue_entry(lease, wait, self._shard_of(lease.lease_id), self._retention, now)
        update = {
            **self._key(lease.lease_id),
            **render(lifecycle.REQUEUE, Inputs(now=epoch(now), queue=entry)).request(),
        }
        try:
            if held:
                self._transact([{"Update": update}, *(counters.give_back(self._counters(), slot) for slot in held)])
            else:
                self._call("UpdateItem", **update)
        except self._errors.ConditionalCheckFailedException:
            return False
        return True

    def cancel_queued(self, lease_id: str, owner: str | None, now: datetime, *, by: str | None = None) -> Lease:
        """End a queued lease `released` for its owner (`owner`: as the release's OWNER guard holds it), no worker
        ever made; LeaseNotFound / NotLeaseOwner / LeaseConflict as a release is refused."""
        from scheduler.store.queue_model import CANCELLED

        inputs = Inputs(now=epoch(now), owner=owner, reason=CANCELLED, retain_until=epoch(now) + self._retention, by=by)
        try:
            return self._queued_end(lifecycle.CANCEL, lease_id, inputs)
        except self._errors.ConditionalCheckFailedException as lost:
            raise refusal_error(
                lifecycle.CANCEL, lease_id, self._lost_item(lost, lease_id), epoch(now), owner
            ) from lost

    def expire_queued(self, lease_id: str, now: datetime, reason: str, *, by: str | None = None) -> Lease | None:
        """End a queued lease whose queued_until has passed `expired`, saying why; None if it is not one (any more)."""
        inputs = Inputs(now=epoch(now), reason=reason, retain_until=epoch(now) + self._retention, by=by)
        try:
            return self._queued_end(lifecycle.EXPIRE_QUEUED, lease_id, inputs)
        except self._errors.ConditionalCheckFailedException:
            return None

    def notice(self, lease_id: str, now: datetime, record: NoticeRecord, ran_since: int) -> Lease | None:
        """Give an active lease its preemption notice (only a preemptible one of strictly lower priority that has
        run since `ran_since`, has no notice and outlives this one); None when it may not be noticed."""
        inputs = Inputs(now=epoch(now), notice=record, priority=record.priority, ran_since=ran_since)
        try:
            response = self._call("UpdateItem", **self._update(lease_id, render(lifecycle.NOTICE, inputs).request()))
        except self._errors.ConditionalCheckFailedException:
            return None
        return lease_from_item(response["Attributes"])

    def finish_preempted(
        self, claim: Claim, now: datetime, handover: Handover, reason: str | None = None
    ) -> Lease | None:
        """End the claimed preempted lease and admit its preemptor on its provider slot, in one transaction; None
        (nothing written) when the preemptor cannot take it (no longer queued, past its queued_until, its own quota
        or budget full): then the lease is to be finished as any other. LeaseStateChanged if the claim was lost."""
        from scheduler.store.queue_model import admit_inputs, net_moves, preempted

        victim = claim.lease
        spent, usage = 0, None
        if victim.cost_per_hour is not None:
            seconds = max(0, epoch(now) - epoch(victim.created_at))
            spent = spend_micros(micros(victim.cost_per_hour), seconds)
            usage = self._usage_update(victim, seconds, now)
        bound = Inputs(
            now=epoch(now),
            reason=reason,
            claim_id=claim.claim_id,
            outcome=claim.outcome,
            retain_until=epoch(now) + self._retention,
            by=claim.by,
        )
        admitted = handover.lease
        admit = admit_inputs(admitted, handover.held, self._shard_of(admitted.lease_id))
        kept = [entry for entry in claim.held_counters if parse_held(entry)[0] != handover.moved]
        moves = net_moves(budgets.settlement(kept, spent, epoch(now)), handover.limits)
        items: list[dict[str, Any]] = [
            {"Update": {**self._key(victim.lease_id), **render(lifecycle.FINISH, bound).request()}},
            {"Update": {**self._key(admitted.lease_id), **render(lifecycle.ADMIT, admit).request()}},
            *(counters.take(self._counters(), move) for move in moves),
            *([usage] if usage else []),
        ]
        try:
            full = self._transact(items, limits_at=2)
        except self._errors.ConditionalCheckFailedException as lost:
            raise LeaseStateChanged(victim.lease_id) from lost
        except self._errors.TransactionCanceledException:
            return None  # the preemptor's condition failed: it is not queued any more
        return None if full is not None else preempted(claim, now, reason)

    def queued_leases(self) -> Iterator[QueuedLease]:
        """Every queued lease, by priority then age (the queue index, every shard merged)."""
        from scheduler.store.queue_model import queued_of

        shards = [
            self._queue_items("queue_shard = :shard", {":shard": string_attr(str(shard))})
            for shard in range(self._shards)
        ]
        for item in heapq.merge(*shards, key=lambda item: (int(item["queue_order"]["N"]), item["lease_id"]["S"])):
            yield queued_of(item)

    def queued_lease(self, lease_id: str) -> QueuedLease | None:
        """One queued lease with what its admission needs (strongly consistent); None if it is not queued."""
        from scheduler.store.queue_model import queued_of

        item = self._read_item(lease_id)
        if item.get("status", {}).get("S") != LeaseStatus.QUEUED.value:
            return None
        return queued_of(item)

    def queue_ahead(self, priority: int) -> dict[str, int]:
        """How many queued leases of at least `priority` wait for each provider's room."""
        from scheduler.store.queue_model import queue_order
        from scheduler.store.queue_records import QUEUE_WAITS

        bound = number_attr(queue_order(priority - 1, 0))
        found: dict[str, int] = {}
        for shard in range(self._shards):
            values = {
                ":shard": string_attr(str(shard)),
                ":bound": bound,
                ":wait": string_attr(QUEUE_WAITS[True]),
            }
            items = self._queue_items(
                "queue_shard = :shard AND queue_order < :bound", values, "queue_wait = :wait", "queue_providers"
            )
            for item in items:
                for provider in item.get("queue_providers", {}).get("S", "").split(","):
                    if provider:
                        found[provider] = found.get(provider, 0) + 1
        return found

    def running_leases(self) -> Iterator[Running]:
        """Every lease that holds capacity (pending, active, releasing), as the queue's rules see it."""
        from scheduler.store.queue_model import RUNNING_PROJECTION, running_lease

        holding = conditions.holding()
        for shard in range(self._shards):
            request: dict[str, Any] = {
                "TableName": self.table_name,
                "IndexName": "live-by-due",
                "KeyConditionExpression": "live_shard = :shard",
                "FilterExpression": holding.condition,
                "ProjectionExpression": RUNNING_PROJECTION,
                "ExpressionAttributeNames": holding.names,
                "ExpressionAttributeValues": {":shard": string_attr(str(shard)), **holding.values},
            }
            for page in self._pages("Query", request):
                for item in page.get("Items", []):
                    yield running_lease(item)

    def _queue_items(
        self, key: str, values: dict[str, Any], filter_: str | None = None, projection: str | None = None
    ) -> Iterator[Item]:
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": QUEUE_INDEX,
            "KeyConditionExpression": key,
            "ExpressionAttributeValues": values,
        }
        if filter_:
            request["FilterExpression"] = filter_
        if projection:
            request["ProjectionExpression"] = projection
        for page in self._pages("Query", request):
            yield from page.get("Items", [])

    def _queued_end(self, transition: lifecycle.Transition, lease_id: str, inputs: Inputs) -> Lease:
        """A queued lease's end (one conditional write: it holds nothing); a resent one of ours answers as it landed."""
        try:
            response = self._call("UpdateItem", **self._update(lease_id, render(transition, inputs).request()))
        except self._errors.ConditionalCheckFailedException as lost:
            old = self._lost_item(lost, lease_id)
            final = transition.target
            landed = final is not None and old.get("status", {}).get("S") == final.value and "live_shard" not in old
            if (
                landed
                and old.get("released_epoch") == number_attr(inputs.now)
                and old.get("ended_by", {}).get("S") == inputs.by
            ):
                return lease_from_item(old)
            raise
        return lease_from_item(response["Attributes"])
