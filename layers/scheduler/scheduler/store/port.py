"""What the use cases need from the lease store: one interface, two implementations.

`store.LeaseStore` keeps leases in DynamoDB (every state change one conditional write or transaction);
`store.memory.MemoryLeaseStore` keeps them in a dict under a lock, for the use cases' fast tests. Both
pass `tests/unit/test_store.py` and the other store contract tests. The use cases name only this
interface, so a rule of theirs can be tested without any database.

Every state change follows a transition of `scheduler.lifecycle`, and its refusals are the same on both:
LeaseNotFound, NotLeaseOwner and LeaseConflict for what a caller is told; LeaseStateChanged (or None)
where another actor won the lease first.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from scheduler.budgets import OwnerBudgets, Reweighing
    from scheduler.events.model import LifecycleEvent
    from scheduler.fairness import Running
    from scheduler.lifecycle import LeaseStatus
    from scheduler.models import Lease, ListFilter
    from scheduler.providers.base import ProvisionedWorker
    from scheduler.store.api_budget import QuotaWindow, Reserve
    from scheduler.store.claims import Claim
    from scheduler.store.counters import CounterState, Limit
    from scheduler.store.history import Cursor
    from scheduler.store.items import Item
    from scheduler.store.queue_model import Handover, QueuedLease, QueueWait
    from scheduler.store.queue_records import NoticeRecord
    from scheduler.store.usage import UsageRow
    from scheduler.webhooks.model import WebhookRecord


class LeaseReadsPort(Protocol):
    """Reading leases: one by id, the listing, and the sweep's and reconciler's views of the live ones."""

    def get(self, lease_id: str) -> Lease:
        """The lease (ended ones too, for their retention); LeaseNotFound otherwise."""

    def held_counters(self, lease_id: str) -> tuple[str, ...]:
        """The counter entries the lease holds now."""

    def list_live(
        self, query: ListFilter, now: datetime, owners: tuple[str, ...] | None = None
    ) -> tuple[list[Lease], str | None]:
        """One page of the live listing and the token of the next (None: done; a page may be short); `owners`:
        only those owners' leases (at least one; None: as `query` says)."""

    def live_leases(self) -> Iterator[Lease]:
        """Every live lease (pending, active, releasing)."""

    def starting_leases(self) -> Iterator[Lease]:
        """The active leases whose worker is still starting."""

    def due_leases(self, now: datetime, limit: int = 500) -> Iterator[Lease]:
        """Live leases past their due time (expiry, or a stale claim's deadline), at most `limit`."""

    def live_holds(self) -> list[tuple[str, ...]]:
        """The held counter entries of every live lease (what the counters should add up to)."""

    def expiring_leases(self, now: datetime, until: datetime) -> Iterator[Lease]:
        """Active leases expiring after `now` and by `until` whose current expiry no warning was written for."""


class LeaseWritesPort(Protocol):
    """The lease's state changes, each a transition of `scheduler.lifecycle`."""

    def create_pending(self, lease: Lease, limits: Sequence[Limit] = ()) -> Limit | None:
        """Record the lease `pending` with a slot of each limit; the full limit instead (nothing written)."""

    def move_slot(
        self, lease_id: str, held: tuple[str, ...], give_back: str | None, take: Limit | None
    ) -> tuple[str, ...] | Limit:
        """Move a pending lease's slot from one counter to another; the full limit instead."""

    def activate(
        self,
        lease_id: str,
        provider: str,
        worker: ProvisionedWorker,
        now: datetime | None = None,
        reweighed: Reweighing | None = None,
    ) -> Lease | Limit:
        """`pending` → `active` with its worker (budgets re-weighed); the budget that would not take it."""

    def fail_pending(
        self,
        lease_id: str,
        now: datetime,
        held: tuple[str, ...] = (),
        reason: str | None = None,
        *,
        by: str | None = None,
    ) -> bool:
        """End a pending lease `failed`, giving its slots back, ended `by` whom; False if it is no longer pending."""

    # Each claim records `by` whom it was taken (claimed_by; None: nothing recorded), and the end that finishes it
    # records that as the lease's ended_by: a caller's name, or the service's own (sweep, ttl-stream, reconciler).

    def claim_release(self, lease_id: str, owner: str | None, now: datetime, *, by: str | None = None) -> Claim:
        """The caller's claim on an active lease (LeaseNotFound / NotLeaseOwner / LeaseConflict)."""

    def claim_due(self, lease_id: str, now: datetime, *, by: str | None = None) -> Claim | None:
        """The sweep's claim on a lease past its due time (a stale claim's claimant stays); None if another has it."""

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
        """A claim ending the lease `failed` (its worker stopped or vanished); None if it changed meanwhile."""

    def reclaim_ttl_deleted(self, old_image: Item, now: datetime, *, by: str | None = None) -> Claim | None:
        """Put back a live lease TTL deleted (its stream image), claimed for release as `expired`; None if back."""

    def claim_preempted(self, lease_id: str, now: datetime, *, by: str | None = None) -> Claim | None:
        """The sweep's claim on a lease whose preemption notice ran out (outcome `preempted`); None if taken."""

    def finish_release(self, claim: Claim, now: datetime, reason: str | None = None) -> Lease:
        """Record the claim's outcome once the worker is gone, ended by its claimant; LeaseStateChanged if the
        claim was taken over."""

    def claim_readiness_check(self, lease_id: str, now: datetime, interval_seconds: float) -> Lease | None:
        """Elect this caller to ask the provider about a starting worker; None if another asked lately."""

    def mark_ready(self, lease_id: str, token: str, now: datetime, *, by: str | None = None) -> Lease | None:
        """Record the starting worker `token` ready (once), found so `by` whom; None if it is not starting any more."""

    def index_starting(self, lease_id: str) -> bool:
        """Enter a starting lease into the starting index; False if it is in it (or not starting)."""

    def claim_boot_failed(
        self, lease_id: str, now: datetime, *, token: str, reason: str, by: str | None = None
    ) -> Claim | None:
        """A claim ending a still-starting lease `failed` (it never booted); None if it changed meanwhile."""

    def warn_expiry(self, lease_id: str, expires_epoch: int, now: datetime) -> bool:
        """Mark an active lease warned of its expiry `expires_epoch`; False if it changed meanwhile."""

    def renew(
        self, lease_id: str, owner: str | None, ttl_seconds: int | None, now: datetime, *, by: str | None = None
    ) -> Lease:
        """Extend an active lease to now + ttl, renewed `by` whom (LeaseNotFound / NotLeaseOwner / LeaseConflict)."""

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
        """Renew, reserving the extension's spend in the same write; the budget that would not take it."""


class LeaseQueuePort(Protocol):
    """The queue: queued leases, their admission and requeue, their end without a worker, and preemption."""

    def enqueue(self, lease: Lease, wait: QueueWait) -> None:
        """Record a new lease `queued` (no counter, no worker); LeaseStateChanged if its id is taken."""

    def admit(self, lease: Lease, limits: Sequence[Limit] = ()) -> Limit | None:
        """`queued` → `pending` as `lease` says, with a slot of each limit; the full limit instead (nothing written);
        LeaseStateChanged when it is no longer queued or past its queued_until."""

    def requeue(self, lease: Lease, now: datetime, held: tuple[str, ...], wait: QueueWait) -> bool:
        """`pending` (no worker) → `queued` until its queued_until, giving back `held`; False if it may not."""

    def cancel_queued(self, lease_id: str, owner: str | None, now: datetime, *, by: str | None = None) -> Lease:
        """End a queued lease `released` for its owner (refused as a release is: LeaseNotFound, NotLeaseOwner)."""

    def expire_queued(self, lease_id: str, now: datetime, reason: str, *, by: str | None = None) -> Lease | None:
        """End a queued lease past its queued_until `expired`, saying why; None if it is not one."""

    def notice(self, lease_id: str, now: datetime, record: NoticeRecord, ran_since: int) -> Lease | None:
        """Give an active, preemptible lease of lower priority its preemption notice; None if it may not get one."""

    def finish_preempted(
        self, claim: Claim, now: datetime, handover: Handover, reason: str | None = None
    ) -> Lease | None:
        """End the preempted lease and admit its preemptor on its slot, in one step; None (nothing written) when
        the preemptor cannot take it. LeaseStateChanged if the claim was taken over."""

    def queued_leases(self) -> Iterator[QueuedLease]:
        """Every queued lease, by priority then age."""

    def queued_lease(self, lease_id: str) -> QueuedLease | None:
        """One queued lease (None: it is not queued)."""

    def queue_ahead(self, priority: int) -> dict[str, int]:
        """How many queued leases of at least `priority` wait for each provider's room."""

    def running_leases(self) -> Iterator[Running]:
        """Every lease holding capacity (pending, active, releasing), as the queue's rules see it."""


class CountersPort(Protocol):
    """The cap, quota and budget counters, and what was seen of workers' prices."""

    def counters(self, names: Sequence[str]) -> dict[str, int]:
        """The values of the named counters (0 where absent)."""

    def counter_states(self) -> dict[str, CounterState]:
        """Every counter with its version and repair marks."""

    def suspect_counter(self, counter: str, version: int, expected: int, now: datetime) -> bool:
        """Note that a counter at `version` seems to disagree with the live leases (`expected`)."""

    def repair_counter(self, counter: str, version: int, actual: int) -> bool:
        """Set a counter still at `version` to `actual`; False if it moved meanwhile."""

    def seen_prices(self, keys: Sequence[str], now: datetime) -> dict[str, int]:
        """Worker prices (micro-dollars per hour) seen lately, of those of `keys` there are."""

    def note_price(self, key: str, price_micros: int, now: datetime) -> None:
        """Record what a worker of one sort was seen to cost."""


class UsagePort(Protocol):
    """What ended leases cost, per owner and UTC day."""

    def usage_rows(self, owner_id: str | None, since: str, until: str) -> Iterator[UsageRow]:
        """The stored totals of the days `since`..`until` (one owner, or all)."""


class ApiBudgetPort(Protocol):
    """A provider account's request budget shared by every invocation (RunPod's rate limit)."""

    def take(self, key: str, windows: Sequence[QuotaWindow], reserve: Reserve, now_ms: int) -> int:
        """0 when one request was taken, else milliseconds until one frees up (nothing taken)."""

    def observe(
        self, key: str, windows: Sequence[QuotaWindow], reported: Mapping[str, tuple[int, float]], now_ms: int
    ) -> None:
        """Correct the budget from what the provider reported."""


class HistoryPort(Protocol):
    """Each lease's history (`store/history.py`): its events numbered in transition order."""

    def record(
        self, events: Sequence[LifecycleEvent], now: datetime, memo: dict[str, Cursor] | None = None
    ) -> list[dict[str, Any]]:
        """Number one stream record's events (one lease's); their documents (a record again: the same numbers);
        `memo`: what one batch learnt of each lease's history."""

    def page(self, lease_id: str, after: int, limit: int) -> tuple[list[dict[str, Any]], int | None]:
        """The events numbered after `after`, in order, at most `limit`; the number to go on after (None: done)."""

    def purge(self, lease_id: str) -> int:
        """Delete the lease's history; how many events went."""


class WebhooksPort(Protocol):
    """The webhooks registry (`store/webhooks.py`)."""

    def create(self, record: WebhookRecord, secret: str) -> None:
        """Add a webhook with its signing secret."""

    def get(self, webhook_id: str) -> tuple[WebhookRecord, str] | None:
        """The webhook and its secret (None: none of that id)."""

    def find(self, webhook_id: str) -> WebhookRecord | None:
        """The webhook without its secret (None: none of that id)."""

    def by_owner(self, owner_id: str) -> list[WebhookRecord]:
        """The owner's webhooks (no secret read)."""

    def every(self) -> list[WebhookRecord]:
        """Every webhook (no secret read)."""

    def delete(self, webhook_id: str) -> None:
        """Remove a webhook (nothing when there is none)."""


class LeaseStorePort(LeaseReadsPort, LeaseWritesPort, CountersPort, UsagePort, Protocol):
    """Everything the use cases ask of the lease store."""

    @property
    def queue(self) -> LeaseQueuePort:
        """The queue's part (LeaseStore loads it when first used)."""


if TYPE_CHECKING:  # mypy checks that both stores are what the use cases ask for (nothing runs here)
    from scheduler.store.api_budget import ApiBudget
    from scheduler.store.history import HistoryStore
    from scheduler.store.leases import LeaseStore
    from scheduler.store.memory import MemoryApiBudget, MemoryLeaseStore
    from scheduler.store.memory.history import MemoryHistory
    from scheduler.store.memory.webhooks import MemoryWebhooks
    from scheduler.store.queue import LeaseQueue
    from scheduler.store.webhooks import WebhookStore

    def _both_conform(
        dynamodb: LeaseStore, memory: MemoryLeaseStore, budget: ApiBudget, memory_budget: MemoryApiBudget
    ) -> tuple[LeaseStorePort, LeaseStorePort, ApiBudgetPort, ApiBudgetPort]:
        return dynamodb, memory, budget, memory_budget

    def _both_histories_conform(dynamodb: HistoryStore, memory: MemoryHistory) -> tuple[HistoryPort, HistoryPort]:
        return dynamodb, memory

    def _both_registries_conform(dynamodb: WebhookStore, memory: MemoryWebhooks) -> tuple[WebhooksPort, WebhooksPort]:
        return dynamodb, memory

    def _queues_conform(dynamodb: LeaseQueue, memory: MemoryLeaseStore) -> tuple[LeaseQueuePort, LeaseQueuePort]:
        return dynamodb, memory
