"""What the queue's store code works with, loaded when the queue is first used (a read function never loads it):
the queue's records (QueueWait, QueuedLease, Handover), its index's order key, and how a queued item, a running
lease and a preempted lease's end are read and written. Shared by LeaseStore (`store/queue.py`) and the memory
store (`store/memory/queue.py`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import NamedTuple

from scheduler import budgets
from scheduler.costs import accrued_usd
from scheduler.fairness import Running
from scheduler.models import Lease
from scheduler.owner_policies import MAX_PRIORITY
from scheduler.store.claims import Claim
from scheduler.store.conditions import Inputs
from scheduler.store.counters import Limit
from scheduler.store.items import DEFAULT_PRIORITY, Item, epoch, lease_from_item
from scheduler.store.queue_records import QUEUE_WAITS, QueueEntry

QUEUE_INDEX = "queued-by-order"
PRIORITY_SPAN = 10**10  # epoch seconds stay below it until the year 2286
# A lease whose admission failed (no provider had room after all: an uncapped one that cannot serve it now) is not
# tried again before a backoff, doubling with each failure: every pass would otherwise admit and requeue it again.
RETRY_FIRST_SECONDS = 2
RETRY_MAX_SECONDS = 60
CANCELLED = "cancelled while queued: no worker was ever made for it"
# What `running_leases` reads of each (a projection: the admission reads every live lease).
RUNNING_PROJECTION = (
    "lease_id, owner_id, provider, priority, preemptible, created_epoch, expires_epoch, preempt_epoch, preempted_for"
)


def retry_backoff(failures: int) -> int:
    """How long a lease waits before its next admission after `failures` failed ones: 2 s, 4 s, 8 s … 60 s."""
    if failures <= 0:
        return 0
    return min(RETRY_MAX_SECONDS, RETRY_FIRST_SECONDS << min(failures - 1, 6))


def queue_order(priority: int, queued_epoch: int) -> int:
    """The queue index's sort key: priority (highest first), then age (oldest first)."""
    return (MAX_PRIORITY - priority) * PRIORITY_SPAN + queued_epoch


class QueueWait(NamedTuple):
    """Why a lease waits and for what: `reason` as a caller is told, `providers` the ones that could serve it (in
    policy order), `capacity` whether it waits for their room (else for its owner's quota or budget), and the
    worker environment it is provisioned with once admitted (None: the one it was queued with); `failures`: a
    requeue's failed admissions so far, this one included (0: none, it is tried at the next pass)."""

    reason: str
    providers: tuple[str, ...]
    capacity: bool
    env: Mapping[str, str] | None = None
    failures: int = 0


class QueuedLease(NamedTuple):
    """A queued lease with what its admission needs."""

    lease: Lease
    env: dict[str, str]
    providers: tuple[str, ...]
    capacity: bool
    queued_epoch: int
    failures: int = 0  # failed admissions so far (RETRY_LATER)
    retry_epoch: int = 0  # no admission before it (0: none due)


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
    """Where `lease` sits in the queue (its queued_at kept from its first time there) and what it waits for; after a
    failed admission (`wait.failures`), when it may be tried again, which its reason says."""
    if lease.queued_until is None:
        raise ValueError("a lease without queued_until cannot wait in the queue")
    until = epoch(lease.queued_until)
    order = queue_order(lease.priority, epoch(lease.queued_at or now))
    env = None if wait.env is None else json.dumps(dict(wait.env), separators=(",", ":"), sort_keys=True)
    backoff, reason = retry_backoff(wait.failures), wait.reason
    if wait.failures:
        reason = f"attempt {wait.failures} failed, {reason}; the next one in {backoff} s at the earliest"
    return QueueEntry(
        shard,
        order,
        until,
        until + retention_seconds,
        reason,
        wait.providers,
        wait.capacity,
        env,
        created=epoch(lease.created_at),
        failures=wait.failures,
        retry_at=epoch(now) + backoff,
    )


def admit_inputs(lease: Lease, held: tuple[str, ...], shard: str) -> Inputs:
    """ADMIT's inputs for `lease` as admitted (created now, expiring ttl later, on `provider`, holding `held`), with
    an id of this admission's own: two admitters in the same second write the same times, so only the id tells a
    resent write of ours that had landed from another admitter's admission (which must not be provisioned twice)."""
    created = epoch(lease.created_at)
    return Inputs(
        now=created,
        start=epoch(lease.expires_at) - lease.ttl_seconds,
        ttl_seconds=lease.ttl_seconds,
        held=held,
        provider=lease.provider,
        shard=shard,
        admission_id=uuid.uuid4().hex,
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
        item.get("queue_wait", {}).get("S") == QUEUE_WAITS[True],
        int(item.get("queued_epoch", item["created_epoch"])["N"]),
        int(item.get("failed_admissions", {}).get("N", 0)),
        int(item.get("retry_epoch", {}).get("N", 0)),
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
