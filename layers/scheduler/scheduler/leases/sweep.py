"""The scheduled sweep: one run's passes (`run_sweep`), and the one over due leases (`sweep`).

A scheduled run (hop 0) makes six passes:

1. readiness, FIRST and within its own slice of the run (READINESS_PASS_SECONDS): booting workers recorded
   ready, the leases of those that failed to boot ended (`readiness.check_starting_leases`), so that a
   backlog of due leases never starves the boot-failure checks;
2. due leases: every live lease past its expiry (TTL deletion can lag by days) or its stale release claim,
   released; a queued lease past its queued_until ended `expired` (no worker was ever made); a lease whose
   preemption notice ran out ended `preempted`, its slot handed to its preemptor (`preemption`); what the run
   could not reach is handed on at once to another invocation, as hop + 1;
3. expiry warnings: each active lease about to expire marked warned, once per expiry (`expiry_warnings`);
   the leases table's stream makes each mark a `lease.expiring` event;
4. the queue: an admission pass (`admission.serve_queue`), the backstop of the stream's;
5. stopped workers: the leases of workers their provider reports stopped, ended (`liveness`);
6. gauges: the live leases of each capped provider and of each place a provider keeps a counter for (a
   fleet's hosts), from their counters (one BatchGetItem).

A handed-on run (hop > 0) only carries on with the due leases. The caller turns the result into metrics.

Due leases are claimed and released concurrently by a bounded pool of threads (provider calls are
mostly waiting on the network), so a burst of expiries takes (leases / concurrency) × release time
rather than leases × release time. A run stops claiming when its deadline comes; whatever it could
not reach is still due, unclaimed, and `SweepReport.more` says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

from scheduler.leases.admission import AdmissionReport, serve_queue
from scheduler.leases.concurrently import map_bounded
from scheduler.leases.expiry_warnings import warn_expiring
from scheduler.leases.liveness import StoppedReport, fail_stopped_workers
from scheduler.leases.outcomes import AcquireOutcome
from scheduler.leases.preemption import preempt
from scheduler.leases.readiness import BootReport, check_starting_leases
from scheduler.leases.workers import release_claimed
from scheduler.lifecycle import LeaseStatus
from scheduler.models import Lease, format_time
from scheduler.observability.log import Logger
from scheduler.providers.base import ProviderNotConfigured, ProviderRequestFailed
from scheduler.store.counters import Limit

if TYPE_CHECKING:
    from scheduler.leases.context import Context
    from scheduler.leases.readiness import ReadinessPolicy

logger = Logger(child=True)


@dataclass
class SweepReport:
    """What one sweep did."""

    ended: list[Lease] = field(default_factory=list)
    lost_claims: int = 0
    failed_releases: list[str] = field(default_factory=list)
    # Providers PROVIDERS no longer names on which a failed release's worker lives: alarmed, since it may still bill.
    unconfigured: list[str] = field(default_factory=list)
    lag_seconds: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # Due leases this run did not reach (deadline), or a full batch read (there may be more behind it).
    unreached: int = 0
    more: bool = False
    queue_expired: list[Lease] = field(default_factory=list)  # queued leases never admitted by queued_until
    preempted: list[Lease] = field(default_factory=list)  # leases whose preemption notice ran out
    preemptors: list[AcquireOutcome] = field(default_factory=list)  # the leases handed their slots, provisioned


# The readiness pass (one listing per provider) runs before the due leases, within this slice of the run.
READINESS_PASS_SECONDS = 15.0

HandOn = Callable[[int], bool]
"""Start another invocation as hop `hop` with what is left; False when it could not be started."""


class SweepRun:
    """What one run did, pass by pass (a pass it did not make: empty)."""

    __slots__ = ("admission", "booted", "by_place", "by_provider", "due", "handed_on", "hop", "stopped", "warned")

    def __init__(
        self,
        hop: int,
        booted: BootReport,
        due: SweepReport,
        handed_on: bool,
        stopped: StoppedReport,
        by_provider: dict[str, int],
        by_place: dict[str, int],
        admission: AdmissionReport | None = None,
        warned: list[Lease] | None = None,
    ) -> None:
        self.admission = admission or AdmissionReport()
        self.hop = hop
        self.booted = booted
        self.due = due
        self.handed_on = handed_on
        self.stopped = stopped
        self.by_provider = by_provider  # live leases of each provider with a cap (<NAME>_MAX_LEASES)
        self.by_place = by_place  # live leases on each place a provider keeps a counter for (a fleet's host)
        self.warned = warned or []  # active leases warned of their coming expiry by this run

    @property
    def scheduled(self) -> bool:
        """A run the schedule started (hop 0), not a hand-off."""
        return self.hop == 0


def run_sweep(ctx: Context, hop: int, readiness: ReadinessPolicy, hand_on: HandOn) -> SweepRun:
    """Run the sweep's passes as hop `hop` (0: the scheduled run, which makes all six; a hand-off makes the
    due-lease pass only), handing the rest on as hop + 1 when the due leases did not all fit."""
    if hop != 0:  # a hand-off carries on with the due leases only
        due = sweep(ctx)
        return SweepRun(hop, BootReport(), due, due.more and hand_on(hop + 1), StoppedReport(), {}, {})
    booted = check_starting_leases(ctx.sooner(READINESS_PASS_SECONDS), readiness)
    due = sweep(ctx)
    handed_on = due.more and hand_on(hop + 1)
    warned = warn_expiring(ctx)
    try:
        admission = serve_queue(ctx)
    except Exception as error:  # the stream and the next sweep serve it again
        logger.exception("the sweep's admission pass failed")
        admission = AdmissionReport(errors=[f"admission: {error}"])
    stopped = fail_stopped_workers(ctx)
    by_provider, by_place = read_gauges(ctx)
    return SweepRun(hop, booted, due, handed_on, stopped, by_provider, by_place, admission, warned)


def read_gauges(ctx: Context) -> tuple[dict[str, int], dict[str, int]]:
    """The counted live leases of each capped provider and of each place with a counter (one BatchGetItem)."""
    providers = {Limit.for_provider(name, cap).counter: name for name, cap in ctx.limits.provider_caps.items()}
    places = {counter.counter: counter.place for counter in ctx.providers.place_counters()}
    if not providers and not places:
        return {}, {}
    live = ctx.store.counters([*providers, *places])
    return (
        {name: live.get(counter, 0) for counter, name in providers.items()},
        {place: live.get(counter, 0) for counter, place in places.items()},
    )


class _Outcome(NamedTuple):
    lease_id: str
    ended: Lease | None = None
    queue_expired: Lease | None = None
    preempted: Lease | None = None
    preemptor: AcquireOutcome | None = None
    lost_claim: bool = False
    unreached: bool = False
    failed: bool = False
    error: str | None = None
    unconfigured: str | None = None


def sweep(ctx: Context) -> SweepReport:
    """Release every live lease past its due time: expired ones, and release claims gone stale.

    Reads go through the sparse `live-by-due` index, so the cost follows the number of due leases,
    not the size of the table. Each lease is claimed with a conditional write first, so a concurrent
    sweep, DELETE or stream handler never releases the same worker twice; that same claim makes it
    safe to release up to SWEEP_CONCURRENCY leases at once. At most SWEEP_BATCH_SIZE leases a run.
    """
    report = SweepReport()
    limit = ctx.settings.sweep_batch_size
    now = ctx.clock()
    due = list(ctx.store.due_leases(now, limit=limit))
    report.more = len(due) >= limit
    if not due:
        return report

    outcomes = map_bounded(lambda lease: _sweep_one(ctx, lease, now), due, ctx.settings.sweep_concurrency, "sweep")
    for outcome in outcomes:
        _record(ctx, report, outcome)
    report.more = report.more or report.unreached > 0
    return report


def _sweep_one(ctx: Context, due: Lease, now: datetime) -> _Outcome:
    if ctx.deadline.expired:
        return _Outcome(due.lease_id, unreached=True)  # unclaimed, so the next sweep (or the hand-off) takes it up
    try:
        if due.status is LeaseStatus.QUEUED:
            return _expire_queued(ctx, due, now)
        if due.status is LeaseStatus.ACTIVE and due.preempt_at is not None and due.preempt_at <= now:
            done = preempt(ctx, due.lease_id, now)
            if done is None:
                return _Outcome(due.lease_id, lost_claim=True)
            return _Outcome(due.lease_id, preempted=done.lease, preemptor=done.preemptor)
        claim = ctx.store.claim_due(due.lease_id, now, by=ctx.caller.name)
        if claim is None:
            return _Outcome(due.lease_id, lost_claim=True)
        ended = release_claimed(ctx, claim)
    except ProviderRequestFailed as error:
        # The claim keeps a due time, so the next sweep retries; nothing is forgotten.
        logger.warning("release failed; will retry", extra={"lease_id": due.lease_id, "error": str(error)})
        # (a driver reports its own unconfigured hosts; a provider no longer configured has no driver to)
        unconfigured = error.host if isinstance(error, ProviderNotConfigured) else None
        return _Outcome(due.lease_id, failed=True, unconfigured=unconfigured)
    except Exception as error:  # one lease's failure must not stop the batch
        # Still due (unclaimed, or claimed with a due time): the next sweep takes it up again.
        logger.exception("sweeping a lease failed; will retry", extra={"lease_id": due.lease_id})
        return _Outcome(due.lease_id, failed=True, error=f"lease {due.lease_id}: {error}")
    logger.info(
        "lease ended by sweep",
        extra={"lease_id": ended.lease_id, "status": ended.status.value, "provider": ended.provider},
    )
    return _Outcome(due.lease_id, ended=ended)


def _expire_queued(ctx: Context, due: Lease, now: datetime) -> _Outcome:
    """A queued lease not admitted by its queued_until ends `expired`, saying so (no worker was ever made)."""
    until = format_time(due.queued_until or due.expires_at)
    reason = f"not admitted within queue_seconds (queued until {until}): {due.queue_reason or 'no capacity freed'}"
    ended = ctx.store.queue.expire_queued(due.lease_id, now, reason, by=ctx.caller.name)
    if ended is None:
        return _Outcome(due.lease_id, lost_claim=True)
    logger.info("queued lease expired unadmitted", extra={"lease_id": due.lease_id})
    return _Outcome(due.lease_id, queue_expired=ended)


def _record(ctx: Context, report: SweepReport, outcome: _Outcome) -> None:
    if outcome.queue_expired is not None:
        report.queue_expired.append(outcome.queue_expired)
    if outcome.preempted is not None:
        report.preempted.append(outcome.preempted)
    if outcome.preemptor is not None:
        report.preemptors.append(outcome.preemptor)
    if outcome.unreached:
        report.unreached += 1
    elif outcome.lost_claim:
        report.lost_claims += 1
    elif outcome.ended is not None:
        ended = outcome.ended
        report.ended.append(ended)
        released_at = ended.released_at or ctx.clock()
        report.lag_seconds.append(max(0.0, (released_at - ended.expires_at).total_seconds()))
    if outcome.failed:
        report.failed_releases.append(outcome.lease_id)
    if outcome.unconfigured is not None:
        report.unconfigured.append(outcome.unconfigured)
    if outcome.error:
        report.errors.append(outcome.error)
