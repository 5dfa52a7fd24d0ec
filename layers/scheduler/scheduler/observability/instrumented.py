"""Every driver wrapped so that each provision and release is timed, counted and traced.

ProvisionLatency/ProvisionFailure/ReleaseLatency/ReleaseFailure/LeaseCostPerHour with the provider
(and kind) as dimensions, without the drivers or the use cases knowing.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from scheduler.deadline import Deadline
from scheduler.models import Lease
from scheduler.observability.metrics import Metrics, MetricUnit
from scheduler.observability.tracing import provider_span
from scheduler.providers.base import (
    ManagedWorker,
    PlaceCounter,
    Provider,
    ProviderCapacityError,
    ProviderRequestFailed,
    ProviderUnreachable,
    ProvisionedWorker,
    Readiness,
    StoppedWorker,
    WorkerHostNotConfigured,
)

if TYPE_CHECKING:  # only the acquire path builds one; the logs route alone reads logs
    from scheduler.request_models import LeaseRequest
    from scheduler.worker_logs import LogLine, LogQuery


def failure_reason(error: Exception) -> str:
    """The `reason` dimension of ProvisionFailure."""
    text = str(error).lower()
    if isinstance(error, ProviderCapacityError) and not isinstance(error, ProviderUnreachable):
        return "no_capacity"
    if "timed out" in text or "timeout" in text:
        return "timeout"
    if isinstance(error, ProviderUnreachable):
        return "unreachable"
    return "provider_error"


class InstrumentedProvider(Provider):
    """A driver, with metrics and (when `tracing`) spans around its calls."""

    def __init__(self, inner: Provider, metrics: Metrics, *, tracing: bool = False) -> None:
        self._inner = inner
        self._metrics = metrics
        self._tracing = tracing
        self.name = inner.name

    def available(self, request: LeaseRequest) -> bool:
        return self._inner.available(request)

    def provision(self, lease: Lease, env: Mapping[str, str], deadline: Deadline | None = None) -> ProvisionedWorker:
        kind = lease.kind.value
        started = time.perf_counter()
        try:
            with provider_span(self._tracing, "provision", self.name, {"lease_id": lease.lease_id, "kind": kind}):
                worker = self._inner.provision(lease, env, deadline)
        except (ProviderCapacityError, ProviderRequestFailed) as error:
            self._emit("ProvisionFailure", MetricUnit.Count, 1, kind=kind, reason=failure_reason(error))
            raise
        self._emit("ProvisionLatency", MetricUnit.Milliseconds, _ms_since(started), kind=kind)
        if worker.cost_per_hour is not None:
            self._emit("LeaseCostPerHour", MetricUnit.Count, worker.cost_per_hour, kind=kind)
        return worker

    def release(self, lease_id: str, token: str | None, deadline: Deadline | None = None) -> str | None:
        started = time.perf_counter()
        try:
            with provider_span(self._tracing, "release", self.name, {"lease_id": lease_id}):
                note = self._inner.release(lease_id, token, deadline)
        except (ProviderRequestFailed, ProviderUnreachable) as error:
            self._emit("ReleaseFailure", MetricUnit.Count, 1)
            if isinstance(error, WorkerHostNotConfigured):
                # A worker nothing can remove until its host is configured again (or retired): alarmed.
                self._emit("UnconfiguredHostRelease", MetricUnit.Count, 1, host=error.host)
            raise
        self._emit("ReleaseLatency", MetricUnit.Milliseconds, _ms_since(started))
        return note

    def list_managed(self, deadline: Deadline | None = None) -> list[ManagedWorker]:
        with provider_span(self._tracing, "list_managed", self.name, {}):
            return self._inner.list_managed(deadline)

    def vouches_for(self, token: str | None) -> bool:
        return self._inner.vouches_for(token)

    def worker_key(self, token: str) -> str:
        return self._inner.worker_key(token)

    def placement_token(self, held: tuple[str, ...]) -> str | None:
        return self._inner.placement_token(held)

    def place_counters(self) -> tuple[PlaceCounter, ...]:
        return self._inner.place_counters()

    def stopped_workers(self, deadline: Deadline | None = None) -> list[StoppedWorker]:
        with provider_span(self._tracing, "stopped_workers", self.name, {}):
            return self._inner.stopped_workers(deadline)

    def stopped_reason(self, lease_id: str, token: str, deadline: Deadline | None = None) -> str | None:
        with provider_span(self._tracing, "stopped_reason", self.name, {"lease_id": lease_id}):
            return self._inner.stopped_reason(lease_id, token, deadline)

    def readiness(self, lease_id: str, token: str, deadline: Deadline | None = None) -> Readiness:
        with provider_span(self._tracing, "readiness", self.name, {"lease_id": lease_id}):
            return self._inner.readiness(lease_id, token, deadline)

    def readiness_of(self, workers: Mapping[str, str], deadline: Deadline | None = None) -> dict[str, Readiness]:
        with provider_span(self._tracing, "readiness_of", self.name, {}):
            return self._inner.readiness_of(workers, deadline)

    def logs(
        self, lease_id: str, token: str | None, query: LogQuery, deadline: Deadline | None = None
    ) -> list[LogLine]:
        with provider_span(self._tracing, "logs", self.name, {"lease_id": lease_id}):
            return self._inner.logs(lease_id, token, query, deadline)

    def price_bound(self, request: LeaseRequest, deadline: Deadline | None = None) -> float | None:
        return self._inner.price_bound(request, deadline)

    def regions(self) -> tuple[str, ...] | None:
        return self._inner.regions()

    def _emit(self, name: str, unit: MetricUnit, value: float, **dimensions: str) -> None:
        self._metrics.emit(name, unit, value, provider=self.name, **dimensions)


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)
