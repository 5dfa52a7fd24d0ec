"""The queue's metrics: QueueDepth, Admitted and TimeInQueue per admission, PreemptionNotice, QueueExpired.

(Preempted is a lease's end, `metrics.lease_ended`.) Emitted by whatever served the queue: the stream function's
admission pass, the sweep's (with its expired queued leases and its preemptions' hand-overs), the acquire that
queued a lease (QueueDepth is the sweep's and the passes' view, once a run).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from aws_lambda_powertools.metrics import MetricUnit

from scheduler.leases.outcomes import Acquired, AcquireOutcome
from scheduler.observability.metrics import Metrics, count

if TYPE_CHECKING:
    from scheduler.leases.admission import AdmissionReport
    from scheduler.models import Lease


def admitted(metrics: Metrics, lease: Lease) -> None:
    """Admitted (by provider and kind) and TimeInQueue (seconds from joining the queue to the admission)."""
    count(metrics, "Admitted", provider=lease.provider, kind=lease.kind.value)
    if lease.queued_at is not None and lease.admitted_at is not None:
        waited = max(0.0, (lease.admitted_at - lease.queued_at).total_seconds())
        metrics.emit("TimeInQueue", MetricUnit.Seconds, waited, kind=lease.kind.value)


def admission_metrics(metrics: Metrics, report: AdmissionReport) -> None:
    """What one admission pass did."""
    metrics.emit("QueueDepth", MetricUnit.Count, report.depth)
    for lease in report.admitted:
        admitted(metrics, lease)
    for lease in report.noticed:
        count(metrics, "PreemptionNotice", provider=lease.provider, kind=lease.kind.value)


def handed_over(metrics: Metrics, outcomes: Iterable[AcquireOutcome]) -> None:
    """The preemptors a preemption's end admitted on its slot and provisioned."""
    for outcome in outcomes:
        if isinstance(outcome, Acquired):
            admitted(metrics, outcome.lease)


def queue_expired(metrics: Metrics, leases: Iterable[Lease]) -> None:
    """QueueExpired: queued leases that were never admitted by their queued_until."""
    for lease in leases:
        count(metrics, "QueueExpired", kind=lease.kind.value)
