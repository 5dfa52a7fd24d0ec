"""Metrics as CloudWatch embedded metric format (EMF) documents written to stdout, one per outcome.

Handlers and use cases emit through a `Metrics` value they are handed (the runtime's), so a test
replaces it with a recording one in one line. It is the one channel: no function uses powertools'
`Metrics` beside it.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Protocol

from aws_lambda_powertools.metrics import MetricUnit

from scheduler.errors import SchedulerError
from scheduler.lifecycle import LeaseStatus
from scheduler.models import Lease

NAMESPACE = "OpenAliceScheduler"
# The metric each way a lease ends (by provider and kind).
ENDED = {
    LeaseStatus.RELEASED: "LeaseReleased",
    LeaseStatus.EXPIRED: "LeaseExpired",
    LeaseStatus.FAILED: "LeaseFailed",
    LeaseStatus.PREEMPTED: "Preempted",
}


class Metrics(Protocol):
    """Where metrics go."""

    def emit(self, name: str, unit: MetricUnit, value: float, **dimensions: str) -> None:
        """One data point of `name`, with its dimensions."""


class EmfMetrics:
    """Each metric written now as an EMF document, published both per dimension and in aggregate.

    Two dimension sets (powertools' own writers allow one): the per-provider/kind/reason series for
    the dashboard, and a dimensionless total that alarms can watch without listing every combination.
    A metric without dimensions (a run's tally) has the one set, empty: it is its own total.
    """

    def __init__(self, namespace: str = NAMESPACE) -> None:
        self.namespace = namespace

    def emit(self, name: str, unit: MetricUnit, value: float, **dimensions: str) -> None:
        document = {
            "_aws": {
                "Timestamp": int(time.time() * 1000),
                "CloudWatchMetrics": [
                    {
                        "Namespace": self.namespace,
                        "Dimensions": [sorted(dimensions), []] if dimensions else [[]],
                        "Metrics": [{"Name": name, "Unit": unit.value}],
                    }
                ],
            },
            **dimensions,
            name: value,
        }
        # One write per document: the sweep's threads emit at once, and lines must not interleave.
        sys.stdout.write(json.dumps(document, separators=(",", ":")) + "\n")
        sys.stdout.flush()


def lease_ended(metrics: Metrics, lease: Lease) -> None:
    """LeaseReleased / LeaseExpired / LeaseFailed for a lease that just ended, by provider and kind."""
    name = ENDED.get(lease.status)
    if name is not None:
        metrics.emit(name, MetricUnit.Count, 1, provider=lease.provider, kind=lease.kind.value)
    if lease.cost_usd is not None:
        # USD (CloudWatch has no currency unit): what the lease billed, from create to confirmed release.
        metrics.emit("LeaseCost", MetricUnit.NoUnit, lease.cost_usd, provider=lease.provider, kind=lease.kind.value)


def count(metrics: Metrics, name: str, **dimensions: str) -> None:
    """One occurrence of `name`."""
    metrics.emit(name, MetricUnit.Count, 1, **dimensions)


def worker_ready(metrics: Metrics, lease: Lease) -> None:
    """TimeToReady (ms from the lease's creation to its worker reported ready), by provider and kind."""
    if lease.ready_at is not None:
        waited_ms = max(0.0, (lease.ready_at - lease.created_at).total_seconds() * 1000)
        metrics.emit("TimeToReady", MetricUnit.Milliseconds, waited_ms, provider=lease.provider, kind=lease.kind.value)


def boot_failed(metrics: Metrics, lease: Lease, reason: str) -> None:
    """BootFailure (provider, kind, reason: worker_error or timeout) and LeaseFailed for a lease ended as one."""
    count(metrics, "BootFailure", provider=lease.provider, kind=lease.kind.value, reason=reason)
    lease_ended(metrics, lease)


def budget_refused(metrics: Metrics, refused: SchedulerError) -> None:
    """BudgetRefused, by the budget that refused (`reason`: its variable)."""
    budget = (refused.details or {}).get("budget")
    metrics.emit("BudgetRefused", MetricUnit.Count, 1, reason=str(budget or "unknown"))
