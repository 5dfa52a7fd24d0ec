"""The scheduled sweep: release every live lease past its due time (TTL deletion can lag by days).

Due leases are claimed and released concurrently by a bounded pool of threads (provider calls are
mostly waiting on the network), so a burst of expiries takes (leases / concurrency) × release time
rather than leases × release time. A run stops claiming when its deadline comes; whatever it could
not reach is still due, unclaimed, and `SweepReport.more` tells the caller to hand it on at once.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

from aws_lambda_powertools import Logger

from scheduler.leases.workers import release_claimed
from scheduler.models import Lease
from scheduler.providers.base import ProviderNotConfigured, ProviderRequestFailed

if TYPE_CHECKING:
    from scheduler.leases.context import Context

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


class _Outcome(NamedTuple):
    lease_id: str
    ended: Lease | None = None
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

    def one(lease: Lease) -> _Outcome:
        return _sweep_one(ctx, lease, now)

    workers = max(1, min(ctx.settings.sweep_concurrency, len(due)))
    if workers == 1:
        outcomes = [one(lease) for lease in due]
    else:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sweep") as pool:
            outcomes = list(pool.map(one, due))
    for outcome in outcomes:
        _record(ctx, report, outcome)
    report.more = report.more or report.unreached > 0
    return report


def _sweep_one(ctx: Context, due: Lease, now: datetime) -> _Outcome:
    if ctx.deadline.expired:
        return _Outcome(due.lease_id, unreached=True)  # unclaimed, so the next sweep (or the hand-off) takes it up
    try:
        claim = ctx.store.claim_due(due.lease_id, now)
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


def _record(ctx: Context, report: SweepReport, outcome: _Outcome) -> None:
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
