"""Scheduled sweep: release every live lease past its expiry (TTL deletion can lag by days), end queued leases past
their queued_until and leases whose preemption notice ran out, warn the active leases about to expire (the stream
makes each warning a lease.expiring event), serve the queue, end every lease whose worker stopped, record booting
workers ready or end the leases of those that failed to boot, and report the live leases the counters hold
(`leases/sweep.py`: the passes and the hand-off decision).

Due leases are released concurrently (SWEEP_CONCURRENCY at a time, at most SWEEP_BATCH_SIZE per run);
a run that cannot finish hands the rest on to another invocation of this function at once.
"""

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import MetricUnit

from scheduler.callers.model import SWEEP
from scheduler.handoff import hop_of
from scheduler.leases.sweep import SweepRun, run_sweep
from scheduler.observability.metrics import Metrics, boot_failed, count, lease_ended, worker_ready
from scheduler.observability.queue_metrics import admission_metrics, handed_over, queue_expired
from scheduler.runtime import Runtime, background_deadline

logger = Logger()
runtime = Runtime.from_environment().warm("store", "providers", "limits")


@logger.inject_lambda_context(clear_state=True, log_event=False)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    """Run one sweep; report what it ended, how late, and how many leases are live."""
    ctx = runtime.context(background_deadline(context), SWEEP)
    run = run_sweep(
        ctx, hop_of(event), runtime.readiness, lambda hop: runtime.handoff.hand_on(context.function_name, hop)
    )
    emit(run, runtime.metrics)
    logger.info(
        "sweep finished",
        extra={
            "ended": len(run.due.ended),
            "failed": len(run.due.failed_releases),
            "stopped": len(run.stopped.ended),
            "ready": len(run.booted.ready),
            "boot_failures": len(run.booted.failed),
            "expiry_warnings": len(run.warned),
            "queue_expired": len(run.due.queue_expired),
            "preempted": len(run.due.preempted),
            "admitted": len(run.admission.admitted),
            "queue_depth": run.admission.depth,
            "unreached": run.due.unreached,
            "handed_on": run.handed_on,
            "hop": run.hop,
        },
    )
    answer = {
        "ended": len(run.due.ended),
        "failed_releases": len(run.due.failed_releases),
        "stopped_workers_failed": len(run.stopped.ended),
        "workers_ready": len(run.booted.ready),
        "boot_failures": len(run.booted.failed),
        "expiry_warnings": len(run.warned),
    }
    # The queue's, when it had any (a run without a queue answers as it always did).
    queue = {"queue_expired": len(run.due.queue_expired), "preempted": len(run.due.preempted)}
    queue["admitted"] = len(run.admission.admitted) + len(run.due.preemptors)
    answer.update({name: value for name, value in queue.items() if value})
    if run.due.more:
        answer["handed_on"] = int(run.handed_on)
    return answer


def emit(run: SweepRun, metrics: Metrics) -> None:
    """The run's metrics, pass by pass."""
    for lease in run.booted.ready:
        worker_ready(metrics, lease)
    for lease, reason in run.booted.failed:
        boot_failed(metrics, lease, reason)
    for lease, lag in zip(run.due.ended, run.due.lag_seconds, strict=True):
        lease_ended(metrics, lease)
        metrics.emit("SweepLag", MetricUnit.Seconds, lag, provider=lease.provider, kind=lease.kind.value)
    for lease in run.warned:
        count(metrics, "ExpiryWarning", provider=lease.provider, kind=lease.kind.value)
    for lease in run.due.preempted:
        lease_ended(metrics, lease)  # Preempted
    queue_expired(metrics, run.due.queue_expired)
    handed_over(metrics, run.due.preemptors)
    for lease in run.stopped.ended:
        lease_ended(metrics, lease)
        count(metrics, "GhostLease", provider=lease.provider, kind=lease.kind.value)
    metrics.emit("ReleaseRetryPending", MetricUnit.Count, len(run.due.failed_releases))
    for place in run.due.unconfigured:  # a worker nothing configured can remove: it may still bill
        count(metrics, "UnconfiguredHostRelease", host=place)
    if run.handed_on:
        count(metrics, "SweepHandoff")
    for provider, live in run.by_provider.items():  # counted providers: an exact figure every minute
        metrics.emit("ActiveLeases", MetricUnit.Count, live, provider=provider)
    for host, live in run.by_place.items():
        metrics.emit("HostLeases", MetricUnit.Count, live, host=host)
    if run.scheduled:  # QueueDepth: a gauge every run (0 without a queue), and what its admission pass did
        admission_metrics(metrics, run.admission)
