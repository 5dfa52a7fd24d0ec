"""Scheduled sweep: release every live lease past its expiry (TTL deletion can lag by days), and end
every lease whose worker stopped (one cheap listing per provider that offers one), and record booting
workers ready or end the leases of those that failed to boot (one readiness listing per provider).

Due leases are released concurrently (SWEEP_CONCURRENCY at a time, at most SWEEP_BATCH_SIZE per run);
a run that cannot finish hands the rest on to another invocation of this function at once.
"""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from scheduler.handoff import hop_of
from scheduler.leases.liveness import fail_stopped_workers
from scheduler.leases.readiness import check_starting_leases
from scheduler.leases.sweep import sweep
from scheduler.observability.metrics import boot_failed, count, lease_ended, worker_ready
from scheduler.providers.local_docker import LocalDockerSettings
from scheduler.runtime import Runtime, background_deadline

logger = Logger()
metrics = Metrics()
runtime = Runtime.from_environment().warm("store", "providers", "limits")
# The readiness pass (one listing per provider) runs before the due leases, within this slice of the run.
READINESS_PASS_SECONDS = 15.0


@logger.inject_lambda_context(clear_state=True, log_event=False)
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    """Run one sweep; report what it ended, how late, and how many leases are live."""
    deadline = background_deadline(context)
    store, providers, emitted, settings = runtime.store, runtime.providers, runtime.metrics, runtime.settings
    hop = hop_of(event)
    ready = boot_failures = 0
    if hop == 0:  # once per scheduled run, FIRST: a backlog of due leases must not starve boot-failure checks
        booted = check_starting_leases(
            store, providers, runtime.readiness, runtime.clock, deadline=deadline.sooner(READINESS_PASS_SECONDS)
        )
        ready, boot_failures = len(booted.ready), len(booted.failed)
        for lease in booted.ready:
            worker_ready(emitted, lease)
        for lease, reason in booted.failed:
            boot_failed(emitted, lease, reason)
    report = sweep(
        store,
        providers,
        runtime.clock,
        limit=settings.sweep_batch_size,
        deadline=deadline,
        concurrency=settings.sweep_concurrency,
    )
    handed_on = report.more and runtime.handoff.hand_on(context.function_name, hop + 1)
    for lease, lag in zip(report.ended, report.lag_seconds, strict=True):
        lease_ended(emitted, lease)
        emitted.emit("SweepLag", MetricUnit.Seconds, lag, provider=lease.provider, kind=lease.kind.value)
    stopped_ended = 0
    if hop == 0:  # once per scheduled run; a hand-off only carries on with due leases
        stopped = fail_stopped_workers(store, providers, runtime.clock, deadline=deadline)
        stopped_ended = len(stopped.ended)
        for lease in stopped.ended:
            lease_ended(emitted, lease)
            count(emitted, "GhostLease", provider=lease.provider, kind=lease.kind.value)
    metrics.add_metric(name="ReleaseRetryPending", unit=MetricUnit.Count, value=len(report.failed_releases))
    for place in report.unconfigured:  # a worker nothing configured can remove: it may still bill
        count(emitted, "UnconfiguredHostRelease", host=place)
    if handed_on:
        metrics.add_metric(name="SweepHandoff", unit=MetricUnit.Count, value=1)
    if hop == 0 and runtime.limits.provider_caps:  # counted providers: an exact figure every minute
        capped = [f"provider#{name}" for name in runtime.limits.provider_caps]
        for counter, live in store.counters(capped).items():
            emitted.emit("ActiveLeases", MetricUnit.Count, live, provider=counter.removeprefix("provider#"))
    if hop == 0:
        host_leases(store, emitted)
    logger.info(
        "sweep finished",
        extra={
            "ended": len(report.ended),
            "failed": len(report.failed_releases),
            "stopped": stopped_ended,
            "ready": ready,
            "boot_failures": boot_failures,
            "unreached": report.unreached,
            "handed_on": handed_on,
            "hop": hop,
        },
    )
    answer = {
        "ended": len(report.ended),
        "failed_releases": len(report.failed_releases),
        "stopped_workers_failed": stopped_ended,
        "workers_ready": ready,
        "boot_failures": boot_failures,
    }
    if report.more:
        answer["handed_on"] = int(handed_on)
    return answer


def host_leases(store: Any, emitted: Any) -> None:
    """HostLeases per Docker host of a fleet, from the hosts' counters (one BatchGetItem), every minute."""
    if "local-docker" not in runtime.settings.providers:
        return
    hosts = runtime.settings.section("local-docker", LocalDockerSettings).fleet()
    if hosts:
        live = store.counters([spec.counter("local-docker") for spec in hosts])
        for spec in hosts:
            emitted.emit("HostLeases", MetricUnit.Count, live[spec.counter("local-docker")], host=spec.name)
