"""Serving the queue: one admission pass (`serve_queue`), run whenever a slot may have freed — from the leases
table's stream (a lease ended or gave its slots back, a lease joined the queue) and by every sweep — and the
provisioning of a queued lease once admitted (shared with the preemption's hand-over, `leases/preemption.py`).

A pass reads the queue (the queue index) and, when it is not empty, the leases that hold capacity (the live
index, a projection) and the capped providers' counters (one BatchGetItem); `scheduler.fairness.plan` orders the
queue and says what fits and whom to preempt. The admissions are made one by one in that order, each one
transaction that takes the lease's slots exactly as an acquire's does (`LeaseStore.admit`): the counters, not
the plan, decide, so however many passes run at once (stream, sweep) no cap, quota or budget is passed and no
lease is admitted twice. The admitted leases are then provisioned concurrently, as an acquire provisions (the
providers in policy order, activation, readiness); one that finds no provider with room goes back to the queue
(its queued_until unchanged, its slots given back) and is left out of the passes until a backoff has passed
(2 s, doubling with each failed admission, up to 60 s): a provider without a cap that cannot serve it now would
otherwise be asked, and the lease admitted and requeued (writes, a created_at moved), on every pass. Then the
plan's preemption notices are given.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

from scheduler import fairness, policy
from scheduler.clock import expiry_after
from scheduler.leases.concurrently import map_bounded
from scheduler.leases.outcomes import Acquired, AcquireOutcome, NotAcquired
from scheduler.leases.provisioning import Slots, provision
from scheduler.leases.queue_view import waiting
from scheduler.lifecycle import LeaseStatus
from scheduler.models import Lease
from scheduler.observability.log import Logger
from scheduler.request_models import LeaseRequest
from scheduler.store import LeaseStateChanged
from scheduler.store.counters import Limit
from scheduler.store.items import epoch
from scheduler.store.queue_model import QueuedLease, QueueWait
from scheduler.store.queue_records import NoticeRecord

if TYPE_CHECKING:
    from scheduler.leases.context import Context
    from scheduler.providers.base import Provider

logger = Logger(child=True)


@dataclass
class AdmissionReport:
    """What one pass did."""

    depth: int = 0  # queued leases seen (QueueDepth)
    admitted: list[Lease] = field(default_factory=list)  # admitted and active
    requeued: list[str] = field(default_factory=list)  # admitted, no provider had room: back in the queue
    failed: list[Lease] = field(default_factory=list)  # admitted, then refused by its provider or its budget
    noticed: list[Lease] = field(default_factory=list)  # preemption notices given
    errors: list[str] = field(default_factory=list)


class Admitted(NamedTuple):
    """A queued lease admitted `pending`, its slots held, before its provider is asked."""

    request: LeaseRequest
    slots: Slots
    recorded: tuple[Lease, list[Provider], dict[str, str]]
    queued: QueuedLease


def serve_queue(ctx: Context) -> AdmissionReport:
    """Admit what fits from the queue in admission order, provision it, and give the preemption notices due."""
    report = AdmissionReport()
    queued = list(ctx.store.queue.queued_leases())
    report.depth = len(queued)
    now = ctx.clock()
    open_ = [
        item
        for item in queued
        if (item.lease.queued_until is None or item.lease.queued_until > now) and item.retry_epoch <= epoch(now)
    ]
    if not open_:
        return report  # an empty queue costs one Query; one past its queued_until is the sweep's to end
    running = list(ctx.store.queue.running_leases())
    settings = ctx.settings
    rules = fairness.Rules(settings.policies, settings.min_runtime_seconds, settings.preemption_notice_seconds)
    plan = fairness.plan((waiting(item) for item in open_), running, _capacity(ctx), rules, epoch(now))
    by_id = {item.lease.lease_id: item for item in open_}
    admitted: list[Admitted] = []
    for lease_id in plan.admit[: settings.sweep_concurrency]:
        try:
            found = admit(ctx, by_id[lease_id], now)
        except Exception as error:
            report.errors.append(f"lease {lease_id}: {error}")
            logger.exception("admitting a queued lease failed", extra={"lease_id": lease_id})
            continue
        if found is not None:
            admitted.append(found)
    if admitted:
        outcomes = map_bounded(lambda one: provision_admitted(ctx, one), admitted, settings.sweep_concurrency, "admit")
        for one, outcome in zip(admitted, outcomes, strict=True):
            _record(report, one, outcome)
    for notice in plan.notices:
        # The plan counts in whole seconds from now's floor: a notice given within a second ends a second later,
        # so that it is never shorter than PREEMPTION_NOTICE_SECONDS.
        preempt_at = notice.preempt_at + (1 if now.microsecond else 0)
        record = NoticeRecord(preempt_at, notice.preemptor, notice.priority)
        try:
            noticed = ctx.store.queue.notice(notice.victim, now, record, epoch(now) - settings.min_runtime_seconds)
        except Exception as error:  # noqa: BLE001 - the next pass plans it again
            report.errors.append(f"notice to {notice.victim}: {error}")
            continue
        if noticed is not None:
            report.noticed.append(noticed)
            logger.info(
                "preemption notice given",
                extra={"lease_id": notice.victim, "preempt_at": noticed.preempt_at, "for": notice.preemptor},
            )
    return report


def request_of(item: QueuedLease) -> LeaseRequest:
    """The acquire a queued lease was made by (its queue budget aside)."""
    lease = item.lease
    return LeaseRequest(
        kind=lease.kind,
        gpu=lease.gpu,
        ttl_seconds=lease.ttl_seconds,
        owner_id=lease.owner_id,
        correlation_id=lease.correlation_id,
        region=lease.region,
        max_cost_per_hour=lease.max_cost_per_hour,
        priority=lease.priority,
        preemptible=lease.preemptible,
        env=item.env,
    )


def draft_of(item: QueuedLease, now: datetime, provider: str) -> Lease:
    """The queued lease as it is admitted now: made now (it bills, and its deadlines count, from its admission)."""
    created = now.replace(microsecond=0)
    return item.lease.replace(
        status=LeaseStatus.PENDING,
        provider=provider,
        created_at=created,
        expires_at=expiry_after(now, item.lease.ttl_seconds),
        admitted_at=created,
        queue_reason=None,
    )


def admit(ctx: Context, item: QueuedLease, now: datetime) -> Admitted | None:
    """Take a queued lease's slots and move it to `pending` (one transaction); None when it does not fit now (it
    stays queued) or was admitted, cancelled or expired by someone else meanwhile."""
    request = request_of(item)
    candidates = policy.candidates_for(ctx.providers.in_order(), request)
    if not candidates:
        return None
    slots = Slots(ctx.store, ctx.limits, draft_of(item, now, candidates[0].name), record=ctx.store.queue.admit)
    try:
        recorded = slots.record_pending(candidates, request, ctx.deadline)
    except LeaseStateChanged:
        return None
    if isinstance(recorded, NotAcquired):
        return None
    return Admitted(request, slots, recorded, item)


def provision_admitted(ctx: Context, one: Admitted) -> AcquireOutcome:
    """Provision an admitted lease as an acquire does; no provider with room: back to the queue."""
    pending = one.recorded[0]

    def requeue(reason: str) -> bool:
        # As it was queued (made when it was, not admitted), with one more failed admission.
        wait = QueueWait(reason, one.queued.providers, True, failures=one.queued.failures + 1)
        return ctx.store.queue.requeue(one.queued.lease, ctx.clock(), one.slots.held, wait)

    try:
        return provision(ctx, one.request, one.slots, one.recorded, requeue)
    except Exception as error:
        logger.exception("provisioning an admitted lease failed", extra={"lease_id": pending.lease_id})
        from scheduler.errors import ProviderFailed

        return NotAcquired(ProviderFailed(str(error)), pending.lease_id)


def _capacity(ctx: Context) -> fairness.Capacity:
    """The capped providers' free slots, from their counters (one BatchGetItem), and the owner quota."""
    caps = dict(ctx.limits.provider_caps)
    counters = {name: Limit.for_provider(name, cap).counter for name, cap in caps.items()}
    live = ctx.store.counters(list(counters.values())) if counters else {}
    free: dict[str, int | None] = {
        name: max(0, caps[name] - live.get(counter, 0)) for name, counter in counters.items()
    }
    return fairness.Capacity(free, ctx.limits.per_owner)


def _record(report: AdmissionReport, one: Admitted, outcome: AcquireOutcome) -> None:
    lease_id = one.queued.lease.lease_id
    if isinstance(outcome, Acquired):
        report.admitted.append(outcome.lease)
        logger.info("queued lease admitted", extra={"lease_id": lease_id, "provider": outcome.lease.provider})
    elif isinstance(outcome, NotAcquired) and outcome.requeued:
        report.requeued.append(lease_id)
    elif isinstance(outcome, NotAcquired):
        if outcome.ended:
            report.failed.append(one.recorded[0].replace(status=LeaseStatus.FAILED))
        report.errors.append(f"lease {lease_id}: {outcome.error.message}")
