"""Scheduled reconciler: orphan workers removed, ghost leases failed, stuck pending leases cleaned up."""

from typing import Any

from scheduler.callers.model import RECONCILER
from scheduler.leases.reconcile import reconcile
from scheduler.observability.log import Logger
from scheduler.observability.metrics import MetricUnit, count, lease_ended
from scheduler.runtime import Runtime, background_deadline

logger = Logger()
runtime = Runtime.from_environment().warm("store", "providers", "limits")


@logger.inject_lambda_context(clear_state=True, log_event=False)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    """Run one reconcile pass and count what it repaired."""
    report = reconcile(runtime.context(background_deadline(context), RECONCILER))
    emitted = runtime.metrics
    for provider in runtime.providers.names:
        emitted.emit("OrphanRemoved", MetricUnit.Count, report.orphans_by_provider.get(provider, 0), provider=provider)
        emitted.emit("ActiveLeases", MetricUnit.Count, report.live_by_provider.get(provider, 0), provider=provider)
    for lease in report.ended:
        lease_ended(emitted, lease)
        if lease.lease_id in report.ghosts_failed or lease.lease_id in report.stopped_failed:
            count(emitted, "GhostLease", provider=lease.provider, kind=lease.kind.value)
    emitted.emit("GhostLeases", MetricUnit.Count, len(report.ghosts_failed))
    emitted.emit("StuckPendingFailed", MetricUnit.Count, len(report.stuck_pending_failed))
    emitted.emit("CounterRepaired", MetricUnit.Count, len(report.counters_repaired))
    logger.info("reconcile finished", extra={"errors": report.errors})
    return {
        "orphans_removed": len(report.orphans_removed),
        "ghosts_failed": len(report.ghosts_failed),
        "stopped_failed": len(report.stopped_failed),
        "stuck_pending_failed": len(report.stuck_pending_failed),
        "starting_indexed": len(report.starting_indexed),
        "errors": len(report.errors),
    }
