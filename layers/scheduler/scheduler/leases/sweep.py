"""The scheduled sweep: release every live lease past its due time (TTL deletion can lag by days)."""

from __future__ import annotations

from dataclasses import dataclass, field

from aws_lambda_powertools import Logger

from scheduler.clock import Clock, utc_now
from scheduler.deadline import Deadline, or_never
from scheduler.leases.workers import release_claimed
from scheduler.models import Lease
from scheduler.providers.base import ProviderRequestFailed
from scheduler.providers.configured import ConfiguredProviders
from scheduler.store import LeaseStore

logger = Logger(child=True)


@dataclass
class SweepReport:
    """What one sweep did."""

    ended: list[Lease] = field(default_factory=list)
    lost_claims: int = 0
    failed_releases: list[str] = field(default_factory=list)
    lag_seconds: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def sweep(
    store: LeaseStore,
    providers: ConfiguredProviders,
    clock: Clock = utc_now,
    limit: int = 200,
    deadline: Deadline | None = None,
) -> SweepReport:
    """Release every live lease past its due time: expired ones, and release claims gone stale.

    Reads go through the sparse `live-by-due` index, so the cost follows the number of due leases,
    not the size of the table. Each lease is claimed with a conditional write first, so a concurrent
    sweep, DELETE or stream handler never releases the same worker twice.
    """
    report = SweepReport()
    deadline = or_never(deadline)
    now = clock()
    for due in list(store.due_leases(now, limit=limit)):
        if deadline.expired:
            break  # unclaimed, so the next sweep takes it up at once
        try:
            claim = store.claim_due(due.lease_id, now)
            if claim is None:
                report.lost_claims += 1
                continue
            ended = release_claimed(claim, store, providers, clock, deadline)
        except ProviderRequestFailed as error:
            # The claim keeps a due time, so the next sweep retries; nothing is forgotten.
            logger.warning("release failed; will retry", extra={"lease_id": due.lease_id, "error": str(error)})
            report.failed_releases.append(due.lease_id)
            continue
        except Exception as error:  # one lease's failure must not stop the batch
            # Still due (unclaimed, or claimed with a due time): the next sweep takes it up again.
            logger.exception("sweeping a lease failed; will retry", extra={"lease_id": due.lease_id})
            report.failed_releases.append(due.lease_id)
            report.errors.append(f"lease {due.lease_id}: {error}")
            continue
        report.ended.append(ended)
        released_at = ended.released_at or clock()
        report.lag_seconds.append(max(0.0, (released_at - ended.expires_at).total_seconds()))
        logger.info(
            "lease ended by sweep",
            extra={"lease_id": ended.lease_id, "status": ended.status.value, "provider": ended.provider},
        )
    return report
