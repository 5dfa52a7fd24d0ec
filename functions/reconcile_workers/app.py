"""Scheduled reconciler: orphan workers removed, ghost leases failed, stuck pending leases cleaned up."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from scheduler import reconcile
from scheduler.config import get_settings
from scheduler.runtime import lease_limits, lease_store, provider_registry

logger = Logger()
metrics = Metrics()
settings = get_settings()
store = lease_store(settings)
providers = provider_registry(settings)


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    """Run one reconcile pass and count what it repaired."""
    report = reconcile.reconcile(
        store,
        providers,
        orphan_grace_seconds=settings.orphan_grace_seconds,
        pending_deadline_seconds=settings.pending_deadline_seconds,
        limits=lease_limits(settings),
    )
    metrics.add_metric(name="OrphanRemoved", unit=MetricUnit.Count, value=len(report.orphans_removed))
    metrics.add_metric(name="GhostLease", unit=MetricUnit.Count, value=len(report.ghosts_failed))
    metrics.add_metric(name="StuckPendingFailed", unit=MetricUnit.Count, value=len(report.stuck_pending_failed))
    metrics.add_metric(name="CounterRepaired", unit=MetricUnit.Count, value=len(report.counters_repaired))
    logger.info("reconcile finished", extra={"errors": report.errors})
    return {
        "orphans_removed": len(report.orphans_removed),
        "ghosts_failed": len(report.ghosts_failed),
        "stuck_pending_failed": len(report.stuck_pending_failed),
        "errors": len(report.errors),
    }
