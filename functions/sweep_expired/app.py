"""Scheduled backstop sweep: release every live lease past its expiry (TTL deletion can lag by days)."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from scheduler import expiry
from scheduler.runtime import lease_store, provider_registry

logger = Logger()
metrics = Metrics()
store = lease_store()
providers = provider_registry()


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    """Run one sweep; report counts (also as metrics)."""
    report = expiry.sweep(store, providers)
    metrics.add_metric(name="LeaseExpired", unit=MetricUnit.Count, value=len(report.ended))
    metrics.add_metric(name="ReleaseRetryPending", unit=MetricUnit.Count, value=len(report.failed_releases))
    for lag in report.lag_seconds:
        metrics.add_metric(name="SweepLag", unit=MetricUnit.Seconds, value=lag)
    logger.info("sweep finished", extra={"ended": len(report.ended), "failed": len(report.failed_releases)})
    return {"ended": len(report.ended), "failed_releases": len(report.failed_releases)}
