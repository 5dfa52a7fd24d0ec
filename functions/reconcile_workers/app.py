"""Scheduled reconciler: orphan workers removed, ghost leases failed, stuck pending leases cleaned up."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from scheduler.leases.reconcile import reconcile
from scheduler.observability.metrics import count, lease_ended
from scheduler.runtime import Runtime, background_deadline

logger = Logger()
metrics = Metrics()
runtime = Runtime.from_environment().warm("store", "providers", "limits")


@logger.inject_lambda_context(clear_state=True, log_event=False)
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    """Run one reconcile pass and count what it repaired."""
    settings, emitted = runtime.settings, runtime.metrics
    report = reconcile(
        runtime.store,
        runtime.providers,
        orphan_grace_seconds=settings.orphan_grace_seconds,
        pending_deadline_seconds=settings.pending_deadline_seconds,
        limits=runtime.limits,
        clock=runtime.clock,
        deadline=background_deadline(context),
    )
    for provider in runtime.providers.names:
        emitted.emit("OrphanRemoved", MetricUnit.Count, report.orphans_by_provider.get(provider, 0), provider=provider)
        emitted.emit("ActiveLeases", MetricUnit.Count, report.live_by_provider.get(provider, 0), provider=provider)
    for lease in report.ended:
        lease_ended(emitted, lease)
        if lease.lease_id in report.ghosts_failed or lease.lease_id in report.stopped_failed:
            count(emitted, "GhostLease", provider=lease.provider, kind=lease.kind.value)
    metrics.add_metric(name="GhostLeases", unit=MetricUnit.Count, value=len(report.ghosts_failed))
    metrics.add_metric(name="StuckPendingFailed", unit=MetricUnit.Count, value=len(report.stuck_pending_failed))
    metrics.add_metric(name="CounterRepaired", unit=MetricUnit.Count, value=len(report.counters_repaired))
    logger.info("reconcile finished", extra={"errors": report.errors})
    return {
        "orphans_removed": len(report.orphans_removed),
        "ghosts_failed": len(report.ghosts_failed),
        "stopped_failed": len(report.stopped_failed),
        "stuck_pending_failed": len(report.stuck_pending_failed),
        "starting_indexed": len(report.starting_indexed),
        "errors": len(report.errors),
    }
