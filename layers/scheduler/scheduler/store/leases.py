"""LeaseStore: the lease's state changes, each one conditional write rendered from `scheduler.lifecycle`.

Every state change is one conditional write (with the counters it touches, one transaction), so two
actors (a DELETE, a sweep, the stream handler, the reconciler) can never both act on one lease: the
loser's condition fails and it walks away. A write whose answer was lost and that botocore resent
recognises its own first attempt (the claim id, the worker token, the end time) instead of failing.

Item layout (key `lease_id`): the wire fields, with times as epoch seconds; `ttl` is the table's TTL
attribute; `live_shard` + `due_at` exist only while the lease is live (see `queries.py`).
"""

from __future__ import annotations

import contextlib
import math
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any

from scheduler import budgets, lifecycle
from scheduler.costs import accrued_usd, micros, spend_micros
from scheduler.errors import SchedulerError
from scheduler.lifecycle import LeaseStatus, Transition
from scheduler.models import Lease
from scheduler.store import counters
from scheduler.store.claims import CLAIM_TTL_SECONDS, Claim, LeaseStateChanged, claim_of
from scheduler.store.conditions import Inputs, WorkerRecord, condition, render
from scheduler.store.counters import CounterBook, Limit
from scheduler.store.items import Item, claimed_by, epoch, lease_from_item, new_item, number_attr, string_attr
from scheduler.store.prices import PriceBook
from scheduler.store.refusals import refusal_error
from scheduler.store.renewals import LeaseRenewals
from scheduler.store.retries import Backoff
from scheduler.store.usage import UsageBook

if TYPE_CHECKING:
    from scheduler.budgets import Reweighing
    from scheduler.providers.base import ProvisionedWorker
    from scheduler.store.queue import LeaseQueue


class LeaseStore(LeaseRenewals, CounterBook, UsageBook, PriceBook):
    """Leases in DynamoDB, changed only through the transitions of `scheduler.lifecycle`."""

    def __init__(
        self,
        table_name: str,
        client: Any,
        *,
        shards: int = 1,
        retention_seconds: int = 7 * 24 * 3600,
        release_claim_seconds: int = 120,
        counters_table: str | None = None,
        retry: Backoff | None = None,
        usage_table: str | None = None,
    ) -> None:
        super().__init__(table_name, client, shards=shards, counters_table=counters_table, retry=retry)
        self.usage_table = usage_table
        self._retention = retention_seconds
        self._claim_seconds = release_claim_seconds

    @cached_property
    def queue(self) -> LeaseQueue:
        """The queue's transitions and reads on the same table and client, loaded when first used: a function that
        only reads leases never loads the queue's code."""
        from scheduler.store.queue import LeaseQueue

        return LeaseQueue(
            self.table_name,
            self.client,
            shards=self._shards,
            retention_seconds=self._retention,
            counters_table=self.counters_table,
            retry=self._retry,
            usage_table=self.usage_table,
        )

    # --- acquire -------------------------------------------------------------------------------

    def create_pending(self, lease: Lease, limits: Sequence[Limit] = ()) -> Limit | None:
        """Record the lease as `pending` before any provider is asked for a worker.

        With limits, the same transaction takes a slot of each; the limit that is full comes back
        (and nothing is written), None once the lease is recorded.
        """
        item = new_item(lease, self._shard_of(lease.lease_id))
        put = {"TableName": self.table_name, "Item": item, **condition(lifecycle.RECORD, Inputs()).request()}
        if not limits:
            try:
                self._call("PutItem", **put, ReturnValuesOnConditionCheckFailure="ALL_OLD")
            except self._errors.ConditionalCheckFailedException as lost:
                # botocore retried a put whose first attempt landed (its answer timed out): that row is ours.
                if self._lost_item(lost, lease.lease_id).get("created_epoch") != item["created_epoch"]:
                    raise
            return None
        held = counters.held_set(limit.held for limit in limits)
        if held is not None:
            item["held_counters"] = held
        full = self._transact([{"Put": put}, *(counters.take(self._counters(), limit) for limit in limits)])
        return None if full is None else limits[full]

    def move_slot(
        self, lease_id: str, held: tuple[str, ...], give_back: str | None, take: Limit | None
    ) -> tuple[str, ...] | Limit:
        """Swap the provider slot a `pending` lease holds (failover): the counters it now holds, or the
        limit that is full (nothing changed). LeaseStateChanged if the lease is no longer pending."""
        now_held = tuple(sorted({*held, *([take.held] if take else [])} - {give_back}))
        rendered = render(lifecycle.MOVE_SLOT, Inputs(held=now_held))
        items: list[dict[str, Any]] = [{"Update": {**self._key(lease_id), **rendered.request()}}]
        if give_back:
            items.append(counters.give_back(self._counters(), give_back))
        if take:
            items.append(counters.take(self._counters(), take))
        try:
            full = self._transact(items, limits_at=len(items) - 1 if take else len(items))
        except self._errors.ConditionalCheckFailedException as lost:
            raise LeaseStateChanged(lease_id) from lost
        if full is not None and take is not None:
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
        """Move a `pending` lease to `active` with its worker (`ready` at `now` when the provider says it
        runs already, else `starting`); LeaseStateChanged if it is no longer pending.

        With `reweighed` (owner budgets held at an estimate), the same transaction sets the held entries
        to the worker's own price and takes or gives back the difference: the budget limit that would
        not take it comes back instead (and nothing is written).
        """
        ends = None if worker.ends_at is None else epoch(worker.ends_at)
        record = WorkerRecord(provider, worker.token, worker.endpoint, worker.cost_per_hour, worker.ready, ends)
        at = epoch(now) if now is not None else int(datetime.now(UTC).timestamp())
        if reweighed is not None and reweighed.deltas:
            return self._activate_reweighed(lease_id, record, reweighed, at)
        rendered = render(lifecycle.ACTIVATE, Inputs(worker=record, now=at))
        try:
            response = self._call("UpdateItem", **self._update(lease_id, rendered.request()))
        except self._errors.ConditionalCheckFailedException as lost:
            old = self._lost_item(lost, lease_id)
            if old.get("status", {}).get("S") == LeaseStatus.ACTIVE and old.get("provider_token", {}).get("S") == (
                worker.token
            ):
                return lease_from_item(old)  # a retry of our own write, which had landed
            raise LeaseStateChanged(lease_id) from lost
        return lease_from_item(response["Attributes"])

    def _activate_reweighed(self, lease_id: str, record: WorkerRecord, reweighed: Reweighing, at: int) -> Lease | Limit:
        rendered = render(lifecycle.ACTIVATE, Inputs(worker=record, reweighed=reweighed.held, now=at))
        takes = [limit for limit in reweighed.limits if limit.amount > 0]
        gives = [(limit.counter, -limit.amount) for limit in reweighed.limits if limit.amount < 0]
        items: list[dict[str, Any]] = [{"Update": {**self._key(lease_id), **rendered.request()}}]
        items += [counters.give_back(self._counters(), counter, amount) for counter, amount in gives]
        items += [counters.take(self._counters(), limit) for limit in takes]
        try:
            full = self._transact(items, limits_at=1 + len(gives))
        except self._errors.ConditionalCheckFailedException as lost:
            raise LeaseStateChanged(lease_id) from lost
        if full is not None:
            return takes[full]
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
        """End a `pending` lease as `failed` (its worker was cleaned up), recording why and `by` whom; False when
        someone else (sweep, reconciler) had already ended it."""
        with contextlib.suppress(LeaseStateChanged):
            self._end(lifecycle.FAIL_PENDING, lease_id, now, Inputs(reason=reason, by=by), held)
            return True
        return False

    # --- release claims ------------------------------------------------------------------------

    def claim_release(self, lease_id: str, owner: str | None, now: datetime, *, by: str | None = None) -> Claim:
        """Claim an `active` lease for a caller's release (`by`: its name), checking the owner in the same write.

        An expired lease the sweep has not reached yet is already over for its caller (404, as renew
        says); the sweep releases its worker and records it as `expired`.
        """
        try:
            return self._claim(lifecycle.CLAIM_RELEASE, lease_id, now, Inputs(owner=owner, by=by))
        except self._errors.ConditionalCheckFailedException as lost:
            raise self._refused(lifecycle.CLAIM_RELEASE, lease_id, lost, now, owner) from lost

    def claim_due(self, lease_id: str, now: datetime, *, by: str | None = None) -> Claim | None:
        """Claim a lease whose `due_at` has passed (expired, or a release claim gone stale: its claimant stays)."""
        try:
            return self._claim(lifecycle.CLAIM_DUE, lease_id, now, Inputs(by=by))
        except self._errors.ConditionalCheckFailedException:
            return None

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
        """Claim a lease found broken (its worker gone or stopped, or `pending` past its deadline), recording why."""
        try:
            return self._claim(
                lifecycle.CLAIM_FAILED, lease_id, now, Inputs(expected=status, token=token, reason=reason, by=by)
            )
        except self._errors.ConditionalCheckFailedException:
            return None

    def claim_preempted(self, lease_id: str, now: datetime, *, by: str | None = None) -> Claim | None:
        """Claim a lease whose preemption notice has run out (its preempt_at passed), to end it `preempted`."""
        try:
            return self._claim(lifecycle.CLAIM_PREEMPTED, lease_id, now, Inputs(by=by))
        except self._errors.ConditionalCheckFailedException:
            return None

    def reclaim_ttl_deleted(self, old_image: Item, now: datetime, *, by: str | None = None) -> Claim | None:
        """Write a live lease that TTL deleted back as `releasing`, so its release is claimed and recorded."""
        transition = lifecycle.RECLAIM_TTL_DELETED
        claim_id = uuid.uuid4().hex
        outcome = transition.outcome or LeaseStatus.EXPIRED
        item = dict(old_image)
        item.update(
            {
                "status": string_attr(LeaseStatus.RELEASING.value),
                "claim_id": string_attr(claim_id),
                "release_outcome": string_attr(outcome.value),
                "live_shard": string_attr(self._shard_of(old_image["lease_id"]["S"])),
                "due_at": number_attr(epoch(now) + self._claim_seconds),
                "ttl": number_attr(epoch(now) + CLAIM_TTL_SECONDS),
            }
        )
        if by is not None:
            item["claimed_by"] = string_attr(by)
        try:
            self._call("PutItem", TableName=self.table_name, Item=item, **condition(transition, Inputs()).request())
        except self._errors.ConditionalCheckFailedException:
            return None
        return Claim(lease_from_item(item), claim_id, outcome, counters.held_by(item), claimed_by(item))

    def finish_release(self, claim: Claim, now: datetime, reason: str | None = None) -> Lease:
        """Record the claimed release as done (giving back its slots), ended by the claimant; only the claim's
        holder can. `reason`: recorded as the lease's failure_reason (None: the claim's stays)."""
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
        """Take the right to ask the provider about a starting worker now: only if nobody did within
        `interval_seconds` (however many callers poll). None: someone did, or the lease is no longer starting."""
        inputs = Inputs(now=epoch(now), checked_before=epoch(now) - max(1, math.ceil(interval_seconds)))
        try:
            response = self._call(
                "UpdateItem", **self._update(lease_id, render(lifecycle.CHECK_READINESS, inputs).request())
            )
        except self._errors.ConditionalCheckFailedException:
            return None
        return lease_from_item(response["Attributes"])

    def mark_ready(self, lease_id: str, token: str, now: datetime, *, by: str | None = None) -> Lease | None:
        """Record the worker `token` ready (ready_at = now, and `by` whom, written once); None if the lease is no
        longer starting on that worker (someone recorded it first, or it ended)."""
        inputs = Inputs(now=epoch(now), token=token, by=by)
        try:
            response = self._call(
                "UpdateItem", **self._update(lease_id, render(lifecycle.MARK_READY, inputs).request())
            )
        except self._errors.ConditionalCheckFailedException:
            return None
        return lease_from_item(response["Attributes"])

    def index_starting(self, lease_id: str) -> bool:
        """Enter an active lease whose worker is starting into the starting index, if it is not there: a
        lease recorded before the index existed. False when it is there already, or no longer starting."""
        starting = condition(lifecycle.CLAIM_BOOT_FAILED, Inputs())
        request = {
            **self._key(lease_id),
            "ConditionExpression": f"({starting.condition}) AND attribute_exists(live_shard) "
            "AND attribute_not_exists(starting_shard)",
            "UpdateExpression": "SET starting_shard = live_shard",
            "ExpressionAttributeValues": starting.values,
        }
        if starting.names:
            request["ExpressionAttributeNames"] = starting.names
        try:
            self._call("UpdateItem", **request)
        except self._errors.ConditionalCheckFailedException:
            return False
        return True

    def claim_boot_failed(
        self, lease_id: str, now: datetime, *, token: str, reason: str, by: str | None = None
    ) -> Claim | None:
        """Claim a lease whose worker failed to boot (only while it is still starting on `token`), recording why."""
        try:
            return self._claim(lifecycle.CLAIM_BOOT_FAILED, lease_id, now, Inputs(token=token, reason=reason, by=by))
        except self._errors.ConditionalCheckFailedException:
            return None

    # --- expiry warnings ---------------------------------------------------------------------------

    def warn_expiry(self, lease_id: str, expires_epoch: int, now: datetime) -> bool:
        """Mark the lease warned of its expiry `expires_epoch` (the sweep's write; the stream makes it the
        lease.expiring event); False when it was renewed, ended or warned of that expiry meanwhile."""
        inputs = Inputs(now=epoch(now), seen_expiry=expires_epoch)
        try:
            self._call("UpdateItem", **self._key(lease_id), **render(lifecycle.WARN_EXPIRY, inputs).request())
        except self._errors.ConditionalCheckFailedException:
            return False
        return True

    # --- internals -----------------------------------------------------------------------------

    def _claim(self, transition: Transition, lease_id: str, now: datetime, inputs: Inputs) -> Claim:
        claim_id = uuid.uuid4().hex
        bound = Inputs(
            now=epoch(now),
            owner=inputs.owner,
            token=inputs.token,
            expected=inputs.expected,
            reason=inputs.reason,
            claim_id=claim_id,
            claim_due=epoch(now) + self._claim_seconds,
            claim_ttl=epoch(now) + CLAIM_TTL_SECONDS,
            by=inputs.by,
        )
        try:
            response = self._call("UpdateItem", **self._update(lease_id, render(transition, bound).request()))
        except self._errors.ConditionalCheckFailedException as lost:
            old = self._lost_item(lost, lease_id)
            if old.get("claim_id", {}).get("S") != claim_id:
                raise
            response = {"Attributes": old}  # a retry of our own claim, which had landed
        item = response["Attributes"]
        return claim_of(item, claim_id)

    def _end(
        self,
        transition: Transition,
        lease_id: str,
        now: datetime,
        inputs: Inputs,
        held: tuple[str, ...],
        ended: Lease | None = None,
    ) -> Lease | None:
        """End a lease; with held counters the same transaction gives back their slots and reservations
        (then None) and adds what it billed to its owner's day it ended on (`budgets.settlement`), as it
        adds it to that day in the usage table (`ended`: the lease as claimed, which had a worker)."""
        spent = 0
        usage = None
        if ended is not None and ended.cost_per_hour is not None:
            seconds = max(0, epoch(now) - epoch(ended.created_at))
            spent = spend_micros(micros(ended.cost_per_hour), seconds)
            usage = self._usage_update(ended, seconds, now)
        bound = Inputs(
            now=epoch(now),
            reason=inputs.reason,
            claim_id=inputs.claim_id,
            outcome=inputs.outcome,
            retain_until=epoch(now) + self._retention,
            by=inputs.by,
        )
        update = {**self._key(lease_id), **render(transition, bound).request()}
        final = transition.target or inputs.outcome
        try:
            if held:
                moves = [counters.take(self._counters(), move) for move in budgets.settlement(held, spent, epoch(now))]
                self._transact([{"Update": update}, *moves, *([usage] if usage else [])])
                return None
            response = self._call(
                "UpdateItem", **update, ReturnValues="ALL_NEW", ReturnValuesOnConditionCheckFailure="ALL_OLD"
            )
            if usage:
                self._add_usage(usage)
        except self._errors.ConditionalCheckFailedException as lost:
            old = self._lost_item(lost, lease_id)
            landed = final is not None and old.get("status", {}).get("S") == final.value and "live_shard" not in old
            if landed and abs(int(old.get("released_epoch", {}).get("N", "0")) - epoch(now)) <= 60:
                return lease_from_item(old)  # a retry of our own write, which had landed
            raise LeaseStateChanged(lease_id) from lost
        return lease_from_item(response["Attributes"])

    def _refused(
        self, transition: Transition, lease_id: str, lost: Exception, now: datetime, owner: str | None
    ) -> SchedulerError:
        """What the caller is told when `transition` lost: the state machine's one classification."""
        return refusal_error(transition, lease_id, self._lost_item(lost, lease_id), epoch(now), owner)
