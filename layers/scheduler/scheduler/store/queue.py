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
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from scheduler import budgets, lifecycle
from scheduler.costs import accrued_usd, micros, spend_micros
from scheduler.fairness import Running
from scheduler.lifecycle import LeaseStatus
from scheduler.models import Lease
from scheduler.owner_policies import MAX_PRIORITY
from scheduler.store import conditions, counters
from scheduler.store.claims import Claim, LeaseStateChanged
from scheduler.store.conditions import Inputs, render
from scheduler.store.counters import Limit, parse_held
from scheduler.store.items import (
    DEFAULT_PRIORITY,
    Item,
    NoticeRecord,
    QueueEntry,
    epoch,
    lease_from_item,
    number_attr,
    queued_item,
    string_attr,
)
from scheduler.store.queries import LeaseReads
from scheduler.store.refusals import refusal_error
from scheduler.store.usage import UsageBook

QUEUE_INDEX = "queued-by-order"
PRIORITY_SPAN = 10**10  # epoch seconds stay below it until the year 2286
CANCELLED = "cancelled while queued: no worker was ever made for it"
# What `running_leases` reads of each (a projection: the admission reads every live lease).
_RUNNING = (
    "lease_id, owner_id, provider, priority, preemptible, created_epoch, expires_epoch, preempt_epoch, preempted_for"
)


def queue_order(priority: int, queued_epoch: int) -> int:
    """The queue index's sort key: priority (highest first), then age (oldest first)."""
    return (MAX_PRIORITY - priority) * PRIORITY_SPAN + queued_epoch


class QueueWait(NamedTuple):
    """Why a lease waits and for what: `reason` as a caller is told, `providers` the ones that could serve it (in
    policy order), `capacity` whether it waits for their room (else for its owner's quota or budget), and the
    worker environment it is provisioned with once admitted (None: the one it was queued with)."""

    reason: str
    providers: tuple[str, ...]
    capacity: bool
    env: Mapping[str, str] | None = None


class QueuedLease(NamedTuple):
    """A queued lease with what its admission needs."""

    lease: Lease
    env: dict[str, str]
    providers: tuple[str, ...]
    capacity: bool
    queued_epoch: int


class Handover(NamedTuple):
    """What a preempted lease's end hands its preemptor: `lease` as admitted (its provider the victim's), the
    provider slot it takes over (`moved`, a counter), and what else it takes (its owner's quota, budgets)."""

    lease: Lease
    moved: str
    limits: tuple[Limit, ...] = ()

    @property
    def held(self) -> tuple[str, ...]:
        return tuple(sorted({self.moved, *(limit.held for limit in self.limits)}))


def queue_entry(lease: Lease, wait: QueueWait, shard: str, retention_seconds: int, now: datetime) -> QueueEntry:
    """Where `lease` sits in the queue (its queued_at kept from its first time there) and what it waits for."""
    if lease.queued_until is None:
        raise ValueError("a lease without queued_until cannot wait in the queue")
    until = epoch(lease.queued_until)
    order = queue_order(lease.priority, epoch(lease.queued_at or now))
    env = None if wait.env is None else json.dumps(dict(wait.env), separators=(",", ":"), sort_keys=True)
    return QueueEntry(shard, order, until, until + retention_seconds, wait.reason, wait.providers, wait.capacity, env)


def admit_inputs(lease: Lease, held: tuple[str, ...], shard: str) -> Inputs:
    """ADMIT's inputs for `lease` as admitted (created now, expiring ttl later, on `provider`, holding `held`)."""
    created = epoch(lease.created_at)
    return Inputs(
        now=created,
        start=epoch(lease.expires_at) - lease.ttl_seconds,
        ttl_seconds=lease.ttl_seconds,
        held=held,
        provider=lease.provider,
        shard=shard,
    )


def net_moves(gives: Sequence[Limit], takes: Sequence[Limit]) -> list[Limit]:
    """One move per counter (a transaction touches an item once): what is given back and taken of it, netted; a
    move that adds is held to the take's maximum."""
    amounts: dict[str, int] = {}
    limits: dict[str, Limit] = {}
    for limit in [*gives, *takes]:
        amounts[limit.counter] = amounts.get(limit.counter, 0) + limit.amount
        if limit.maximum is not None or limit.counter not in limits:
            limits[limit.counter] = limit
    return [
        limits[counter]._replace(amount=amount, maximum=limits[counter].maximum if amount > 0 else None)
        for counter, amount in sorted(amounts.items())
        if amount
    ]


def queued_of(item: Item) -> QueuedLease:
    env = item.get("queue_env", {}).get("S")
    providers = item.get("queue_providers", {}).get("S", "")
    return QueuedLease(
        lease_from_item(item),
        json.loads(env) if env else {},
        tuple(name for name in providers.split(",") if name),
        item.get("queue_wait", {}).get("S") == conditions.QUEUE_WAITS[True],
        int(item.get("queued_epoch", item["created_epoch"])["N"]),
    )


def running_lease(item: Item) -> Running:
    def number(name: str) -> int | None:
        found = item.get(name, {}).get("N")
        return None if found is None else int(float(found))

    return Running(
        lease_id=item["lease_id"]["S"],
        owner=budgets.budget_owner(item.get("owner_id", {}).get("S")),
        provider=item["provider"]["S"],
        priority=DEFAULT_PRIORITY if number("priority") is None else int(number("priority") or 0),
        preemptible=item.get("preemptible", {}).get("BOOL") is True,
        started_epoch=number("created_epoch") or 0,
        expires_epoch=number("expires_epoch") or 0,
        preempt_epoch=number("preempt_epoch"),
        preempted_for=item.get("preempted_for", {}).get("S"),
    )


def preempted(claim: Claim, now: datetime, reason: str | None) -> Lease:
    """The claimed lease as its end records it."""
    lease = claim.lease
    return lease.replace(
        status=claim.outcome,
        released_at=datetime.fromtimestamp(epoch(now), UTC),
        cost_usd=accrued_usd(lease.cost_per_hour, epoch(lease.created_at), epoch(now)),
        failure_reason=reason or lease.failure_reason,
        ended_by=claim.by,
    )


class LeaseQueue(LeaseReads, UsageBook):
    """The queue's transitions and reads on the leases table (LeaseStore's retention and claim window)."""

    _retention: int

    def enqueue(self, lease: Lease, wait: QueueWait) -> None:
        """Record a new lease `queued` (no counter, no worker); LeaseStateChanged if its id is taken."""
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
        held = tuple(sorted({limit.held for limit in limits}))
        rendered = render(lifecycle.ADMIT, admit_inputs(lease, held, self._shard_of(lease.lease_id)))
        update = {**self._key(lease.lease_id), **rendered.request()}
        try:
            if not limits:
                self._call("UpdateItem", **update, ReturnValuesOnConditionCheckFailure="ALL_OLD")
                return None
            full = self._transact([{"Update": update}, *(counters.take(self._counters(), limit) for limit in limits)])
        except self._errors.ConditionalCheckFailedException as lost:
            old = self._lost_item(lost, lease.lease_id) if not limits else {}
            if old.get("status", {}).get("S") == LeaseStatus.PENDING and old.get("admitted_epoch") == number_attr(
                epoch(lease.created_at)
            ):
                return None  # a resent admission of ours, which had landed
            raise LeaseStateChanged(lease.lease_id) from lost
        return None if full is None else limits[full]

    def requeue(self, lease: Lease, now: datetime, held: tuple[str, ...], wait: QueueWait) -> bool:
        """Put a `pending` lease (no worker made) back in the queue until its queued_until, giving back its slots in
        the same transaction; False when it is no longer pending, or its queued_until has passed."""
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
        shards = [
            self._queue_items("queue_shard = :shard", {":shard": string_attr(str(shard))})
            for shard in range(self._shards)
        ]
        for item in heapq.merge(*shards, key=lambda item: (int(item["queue_order"]["N"]), item["lease_id"]["S"])):
            yield queued_of(item)

    def queued_lease(self, lease_id: str) -> QueuedLease | None:
        """One queued lease with what its admission needs (strongly consistent); None if it is not queued."""
        item = self._read_item(lease_id)
        if item.get("status", {}).get("S") != LeaseStatus.QUEUED.value:
            return None
        return queued_of(item)

    def queue_ahead(self, priority: int) -> dict[str, int]:
        """How many queued leases of at least `priority` wait for each provider's room."""
        bound = number_attr(queue_order(priority - 1, 0))
        found: dict[str, int] = {}
        for shard in range(self._shards):
            values = {
                ":shard": string_attr(str(shard)),
                ":bound": bound,
                ":wait": string_attr(conditions.QUEUE_WAITS[True]),
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
        holding = conditions.holding()
        for shard in range(self._shards):
            request: dict[str, Any] = {
                "TableName": self.table_name,
                "IndexName": "live-by-due",
                "KeyConditionExpression": "live_shard = :shard",
                "FilterExpression": holding.condition,
                "ProjectionExpression": _RUNNING,
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
