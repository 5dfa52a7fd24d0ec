"""Metrics and traces around provider calls: CloudWatch embedded metric format, OpenTelemetry spans.

Every driver is wrapped in an InstrumentedProvider, so each provision and release is timed and
counted with its provider (and kind) as dimensions, without the drivers or the use cases knowing.
Spans use the OpenTelemetry API, imported only when tracing is switched on (the ADOT layer's
wrapper is configured): otherwise a span costs nothing, not even the import. The API comes from
the ADOT layer then; the scheduler's layer ships none, so that no other copy can shadow ADOT's.
Without it (tracing switched on but no ADOT layer) the calls run untraced, with one warning.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from functools import cache
from types import ModuleType

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import MetricUnit

from scheduler.deadline import Deadline
from scheduler.models import Lease, LeaseRequest
from scheduler.providers.base import (
    ManagedWorker,
    Provider,
    ProviderCapacityError,
    ProviderRequestFailed,
    ProviderUnreachable,
    ProvisionedWorker,
    StoppedWorker,
)

logger = Logger(child=True)
NAMESPACE = "OpenAliceScheduler"


def emit(name: str, unit: MetricUnit, value: float, **dimensions: str) -> None:
    """One metric, written now as an EMF document, published both per dimension and in aggregate.

    Two dimension sets (powertools' own writers allow one): the per-provider/kind/reason series for
    the dashboard, and a dimensionless total that alarms can watch without listing every combination.
    """
    document = {
        "_aws": {
            "Timestamp": int(time.time() * 1000),
            "CloudWatchMetrics": [
                {
                    "Namespace": os.environ.get("POWERTOOLS_METRICS_NAMESPACE", NAMESPACE),
                    "Dimensions": [sorted(dimensions), []],
                    "Metrics": [{"Name": name, "Unit": unit.value}],
                }
            ],
        },
        **dimensions,
        name: value,
    }
    print(json.dumps(document, separators=(",", ":")), flush=True)


def lease_ended(lease: Lease) -> None:
    """LeaseReleased / LeaseExpired / LeaseFailed for a lease that just ended, by provider and kind."""
    name = {"released": "LeaseReleased", "expired": "LeaseExpired", "failed": "LeaseFailed"}.get(lease.status.value)
    if name is not None:
        emit(name, MetricUnit.Count, 1, provider=lease.provider, kind=lease.kind.value)


def tracing_enabled() -> bool:
    """True when the function runs under the ADOT wrapper (or OTel is otherwise configured)."""
    return bool(os.environ.get("AWS_LAMBDA_EXEC_WRAPPER") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


@cache
def _opentelemetry_trace() -> ModuleType | None:
    """The OpenTelemetry trace API, imported once; None (reported once) when it is not installed."""
    try:
        from opentelemetry import trace
    except ImportError:
        logger.warning(
            "tracing is on but the OpenTelemetry API is missing (no ADOT layer?): provider calls run untraced"
        )
        return None
    return trace


@contextmanager
def provider_span(operation: str, provider: str, attributes: Mapping[str, str]) -> Iterator[None]:
    """An OpenTelemetry span around one provider call (a no-op unless tracing is on)."""
    trace = _opentelemetry_trace() if tracing_enabled() else None
    if trace is None:
        with nullcontext():
            yield
        return

    tracer = trace.get_tracer("openalice-scheduler")
    with tracer.start_as_current_span(
        f"{provider}.{operation}", attributes={"provider": provider, **attributes}
    ) as span:
        try:
            yield
        except Exception as error:
            span.record_exception(error)
            span.set_status(trace.Status(trace.StatusCode.ERROR, str(error)))
            raise


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
    """A driver, with ProvisionLatency/ProvisionFailure/ReleaseLatency/LeaseCostPerHour and spans."""

    def __init__(self, inner: Provider) -> None:
        self._inner = inner
        self.name = inner.name

    def available(self, request: LeaseRequest) -> bool:
        return self._inner.available(request)

    def provision(self, lease: Lease, env: Mapping[str, str], deadline: Deadline | None = None) -> ProvisionedWorker:
        kind = lease.kind.value
        started = time.perf_counter()
        try:
            with provider_span("provision", self.name, {"lease_id": lease.lease_id, "kind": kind}):
                worker = self._inner.provision(lease, env, deadline)
        except (ProviderCapacityError, ProviderRequestFailed) as error:
            emit("ProvisionFailure", MetricUnit.Count, 1, provider=self.name, kind=kind, reason=failure_reason(error))
            raise
        emit("ProvisionLatency", MetricUnit.Milliseconds, _ms_since(started), provider=self.name, kind=kind)
        if worker.cost_per_hour is not None:
            emit("LeaseCostPerHour", MetricUnit.Count, worker.cost_per_hour, provider=self.name, kind=kind)
        return worker

    def release(self, lease_id: str, token: str | None, deadline: Deadline | None = None) -> None:
        started = time.perf_counter()
        try:
            with provider_span("release", self.name, {"lease_id": lease_id}):
                self._inner.release(lease_id, token, deadline)
        except ProviderRequestFailed:
            emit("ReleaseFailure", MetricUnit.Count, 1, provider=self.name)
            raise
        emit("ReleaseLatency", MetricUnit.Milliseconds, _ms_since(started), provider=self.name)

    def list_managed(self, deadline: Deadline | None = None) -> list[ManagedWorker]:
        with provider_span("list_managed", self.name, {}):
            return self._inner.list_managed(deadline)

    def stopped_workers(self, deadline: Deadline | None = None) -> list[StoppedWorker]:
        with provider_span("stopped_workers", self.name, {}):
            return self._inner.stopped_workers(deadline)

    def stopped_reason(self, lease_id: str, token: str, deadline: Deadline | None = None) -> str | None:
        with provider_span("stopped_reason", self.name, {"lease_id": lease_id}):
            return self._inner.stopped_reason(lease_id, token, deadline)


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)
