"""What operators see of provider calls: a metric per outcome, and spans only when tracing is on
(never paying the OpenTelemetry import otherwise)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from scheduler.config import Settings
from scheduler.observability import tracing
from scheduler.observability.instrumented import InstrumentedProvider, failure_reason
from scheduler.observability.metrics import EmfMetrics, MetricUnit
from scheduler.providers.base import ProviderCapacityError, ProviderRequestFailed, ProviderUnreachable
from tests.support.metrics import RecordedMetrics

from .builders import memory_provider, new_lease

REPO = Path(__file__).resolve().parents[2]
_EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def tracer_provider() -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
    trace.set_tracer_provider(provider)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    _EXPORTER.clear()
    yield _EXPORTER


def traced(**faults: object) -> InstrumentedProvider:
    return InstrumentedProvider(memory_provider(**faults), RecordedMetrics(), tracing=True)


def test_provision_runs_inside_a_span_named_for_the_provider(spans: InMemorySpanExporter) -> None:
    lease = new_lease()
    traced().provision(lease, {})
    (span,) = spans.get_finished_spans()
    assert span.name == "local-docker.provision"
    assert span.attributes is not None and span.attributes["lease_id"] == lease.lease_id


def test_a_failed_provision_marks_its_span_as_an_error(spans: InMemorySpanExporter) -> None:
    with pytest.raises(ProviderRequestFailed):
        traced(refuse=True).provision(new_lease(), {})
    (span,) = spans.get_finished_spans()
    assert not span.status.is_ok


def test_no_span_when_tracing_is_off(spans: InMemorySpanExporter) -> None:
    InstrumentedProvider(memory_provider(), RecordedMetrics(), tracing=False).provision(new_lease(), {})
    assert spans.get_finished_spans() == ()


@pytest.mark.parametrize(
    ("environ", "on"),
    [
        ({}, False),
        ({"AWS_LAMBDA_EXEC_WRAPPER": "/opt/otel-instrument"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
    ],
)
def test_tracing_is_on_under_the_adot_wrapper_or_an_otel_endpoint(environ: dict[str, str], on: bool) -> None:
    assert Settings.from_environ(environ).tracing is on


def test_tracing_on_without_the_opentelemetry_api_still_provisions(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The layer ships no OpenTelemetry (ADOT brings it): a wrapper without the API must not break a call."""
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # `from opentelemetry import trace` raises ImportError
    tracing.opentelemetry_trace.cache_clear()
    provider = memory_provider()
    wrapped = InstrumentedProvider(provider, RecordedMetrics(), tracing=True)
    try:
        worker = wrapped.provision(new_lease(), {})
        wrapped.release("a-lease", worker.token)
    finally:
        tracing.opentelemetry_trace.cache_clear()

    assert worker.token is not None
    assert provider.release_calls == ["a-lease"]
    warnings = [record for record in caplog.records if "OpenTelemetry API is missing" in record.getMessage()]
    assert len(warnings) == 1


def test_tracing_off_never_imports_opentelemetry() -> None:
    code = (
        "import sys; from scheduler.observability.instrumented import InstrumentedProvider; "
        "assert 'opentelemetry' not in sys.modules, 'imported at module level'"
    )
    env = {"PYTHONPATH": f"{REPO / 'layers' / 'scheduler'}:{REPO}", "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def test_a_provision_is_counted_once_with_its_latency_and_price() -> None:
    metrics = RecordedMetrics()
    InstrumentedProvider(memory_provider(cost_per_hour=0.44), metrics).provision(new_lease(), {})
    assert metrics.names() == ["ProvisionLatency", "LeaseCostPerHour"]
    assert metrics.of("LeaseCostPerHour") == [{"provider": "local-docker", "kind": "renderer", "value": 0.44}]


def test_a_failed_provision_is_counted_once_with_its_reason() -> None:
    metrics = RecordedMetrics()
    with pytest.raises(ProviderCapacityError):
        InstrumentedProvider(memory_provider(full=True), metrics).provision(new_lease(), {})
    assert metrics.of("ProvisionFailure") == [
        {"provider": "local-docker", "kind": "renderer", "reason": "no_capacity", "value": 1}
    ]


def test_a_release_an_unreachable_provider_could_not_do_is_a_release_failure() -> None:
    metrics = RecordedMetrics()
    with pytest.raises(ProviderUnreachable):
        InstrumentedProvider(memory_provider(unreachable=True), metrics).release("a-lease", None)
    assert metrics.names() == ["ReleaseFailure"]


def test_emf_documents_carry_the_namespace_and_both_dimension_sets(capsys: pytest.CaptureFixture[str]) -> None:
    EmfMetrics("Testing").emit("LeaseAcquired", MetricUnit.Count, 1, provider="local-docker", kind="renderer")
    document = json.loads(capsys.readouterr().out)
    (declared,) = document["_aws"]["CloudWatchMetrics"]
    assert declared["Namespace"] == "Testing"
    assert declared["Dimensions"] == [["kind", "provider"], []]
    assert (document["LeaseAcquired"], document["provider"], document["kind"]) == (1, "local-docker", "renderer")


def test_a_metric_without_dimensions_is_published_once_without_any(capsys: pytest.CaptureFixture[str]) -> None:
    EmfMetrics("Testing").emit("ReleaseRetryPending", MetricUnit.Count, 2)
    document = json.loads(capsys.readouterr().out)
    (declared,) = document["_aws"]["CloudWatchMetrics"]
    assert declared["Dimensions"] == [[]]
    assert document["ReleaseRetryPending"] == 2


def test_no_function_emits_metrics_but_through_the_runtimes_channel() -> None:
    handlers = sorted((REPO / "functions").glob("*/app.py"))
    beside = [
        path.parent.name for path in handlers if re.search(r"\bMetrics\(\)|log_metrics|add_metric", path.read_text())
    ]
    assert handlers and beside == [], "powertools Metrics beside scheduler.observability.metrics"


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (ProviderUnreachable("down"), "unreachable"),
        (ProviderCapacityError("full"), "no_capacity"),
        (ProviderRequestFailed("RunPod did not create the pod: POST /v2/pods: ReadTimeout timed out"), "timeout"),
        (ProviderRequestFailed("insufficient balance"), "provider_error"),
    ],
)
def test_provision_failures_are_classified(error: Exception, reason: str) -> None:
    assert failure_reason(error) == reason


def test_the_instrumented_wrapper_forwards_every_provider_method() -> None:
    from scheduler.observability.instrumented import InstrumentedProvider
    from scheduler.providers.base import Provider

    public = {name for name in vars(Provider) if not name.startswith("_") and callable(getattr(Provider, name))}
    assert public <= set(vars(InstrumentedProvider)), "a Provider method the wrapper would answer with the default"
