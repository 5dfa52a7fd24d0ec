"""Scheduled sweep: release every live lease past its expiry (TTL deletion can lag by days), and end
every lease whose worker stopped (one cheap listing per provider that offers one)."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from scheduler import expiry, liveness
from scheduler.observability import emit, lease_ended
from scheduler.runtime import background_deadline, lease_limits, lease_store, provider_registry

logger = Logger()
metrics = Metrics()
store = lease_store()
providers = provider_registry()
limits = lease_limits()


@logger.inject_lambda_context(clear_state=True, log_event=False)
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    """Run one sweep; report what it ended, how late, and how many leases are live."""
    deadline = background_deadline(context)
    report = expiry.sweep(store, providers, deadline=deadline)
    for lease, lag in zip(report.ended, report.lag_seconds, strict=True):
        lease_ended(lease)
        emit("SweepLag", MetricUnit.Seconds, lag, provider=lease.provider, kind=lease.kind.value)
    stopped = liveness.fail_stopped_workers(store, providers, deadline=deadline)
    for lease in stopped.ended:
        lease_ended(lease)
        emit("GhostLease", MetricUnit.Count, 1, provider=lease.provider, kind=lease.kind.value)
    metrics.add_metric(name="ReleaseRetryPending", unit=MetricUnit.Count, value=len(report.failed_releases))
    if limits.provider_caps:  # counted providers: an exact figure every minute (else the reconciler's)
        capped = [f"provider#{name}" for name in limits.provider_caps]
        for counter, live in store.counters(capped).items():
            emit("ActiveLeases", MetricUnit.Count, live, provider=counter.removeprefix("provider#"))
    logger.info(
        "sweep finished",
        extra={"ended": len(report.ended), "failed": len(report.failed_releases), "stopped": len(stopped.ended)},
    )
    return {
        "ended": len(report.ended),
        "failed_releases": len(report.failed_releases),
        "stopped_workers_failed": len(stopped.ended),
    }
