"""Scheduled sweep: release every live lease past its expiry (TTL deletion can lag by days), and end
every lease whose worker stopped (one cheap listing per provider that offers one)."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from scheduler.leases.liveness import fail_stopped_workers
from scheduler.leases.sweep import sweep
from scheduler.observability.metrics import count, lease_ended
from scheduler.runtime import Runtime, background_deadline

logger = Logger()
metrics = Metrics()
runtime = Runtime.from_environment().warm("store", "providers", "limits")


@logger.inject_lambda_context(clear_state=True, log_event=False)
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    """Run one sweep; report what it ended, how late, and how many leases are live."""
    deadline = background_deadline(context)
    store, providers, emitted = runtime.store, runtime.providers, runtime.metrics
    report = sweep(store, providers, runtime.clock, deadline=deadline)
    for lease, lag in zip(report.ended, report.lag_seconds, strict=True):
        lease_ended(emitted, lease)
        emitted.emit("SweepLag", MetricUnit.Seconds, lag, provider=lease.provider, kind=lease.kind.value)
    stopped = fail_stopped_workers(store, providers, runtime.clock, deadline=deadline)
    for lease in stopped.ended:
        lease_ended(emitted, lease)
        count(emitted, "GhostLease", provider=lease.provider, kind=lease.kind.value)
    metrics.add_metric(name="ReleaseRetryPending", unit=MetricUnit.Count, value=len(report.failed_releases))
    if runtime.limits.provider_caps:  # counted providers: an exact figure every minute (else the reconciler's)
        capped = [f"provider#{name}" for name in runtime.limits.provider_caps]
        for counter, live in store.counters(capped).items():
            emitted.emit("ActiveLeases", MetricUnit.Count, live, provider=counter.removeprefix("provider#"))
    logger.info(
        "sweep finished",
        extra={"ended": len(report.ended), "failed": len(report.failed_releases), "stopped": len(stopped.ended)},
    )
    return {
        "ended": len(report.ended),
        "failed_releases": len(report.failed_releases),
        "stopped_workers_failed": len(stopped.ended),
    }
