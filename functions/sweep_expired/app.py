"""Scheduled sweep: release every live lease past its expiry (TTL deletion can lag by days), and end
every lease whose worker stopped (one cheap listing per provider that offers one), and record booting
workers ready or end the leases of those that failed to boot (one readiness listing per provider)."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from scheduler.leases.liveness import fail_stopped_workers
from scheduler.leases.readiness import check_starting_leases
from scheduler.leases.sweep import sweep
from scheduler.observability.metrics import boot_failed, count, lease_ended, worker_ready
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
    # Booting workers before stopped ones: a worker that died while starting is a boot failure.
    booted = check_starting_leases(store, providers, runtime.readiness, runtime.clock, deadline=deadline)
    for lease in booted.ready:
        worker_ready(emitted, lease)
    for lease, reason in booted.failed:
        boot_failed(emitted, lease, reason)
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
        extra={
            "ended": len(report.ended),
            "failed": len(report.failed_releases),
            "stopped": len(stopped.ended),
            "ready": len(booted.ready),
            "boot_failures": len(booted.failed),
        },
    )
    return {
        "ended": len(report.ended),
        "failed_releases": len(report.failed_releases),
        "stopped_workers_failed": len(stopped.ended),
        "workers_ready": len(booted.ready),
        "boot_failures": len(booted.failed),
    }
