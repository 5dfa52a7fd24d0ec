"""Provider calls are traced with OpenTelemetry only when tracing is on, and never pay the import otherwise."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from scheduler import observability
from scheduler.observability import InstrumentedProvider, failure_reason
from scheduler.providers.base import ProviderCapacityError, ProviderRequestFailed, ProviderUnreachable

from .builders import new_lease
from .fake_provider import CountingProvider

REPO = Path(__file__).resolve().parents[2]
_EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def tracer_provider() -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
    trace.set_tracer_provider(provider)


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    monkeypatch.setenv("AWS_LAMBDA_EXEC_WRAPPER", "/opt/otel-instrument")
    _EXPORTER.clear()
    yield _EXPORTER


def test_provision_runs_inside_a_span_named_for_the_provider(spans: InMemorySpanExporter) -> None:
    lease = new_lease()
    InstrumentedProvider(CountingProvider()).provision(lease, {})
    (span,) = spans.get_finished_spans()
    assert span.name == "local-docker.provision"
    assert span.attributes is not None and span.attributes["lease_id"] == lease.lease_id


def test_a_failed_provision_marks_its_span_as_an_error(spans: InMemorySpanExporter) -> None:
    with pytest.raises(ProviderRequestFailed):
        InstrumentedProvider(CountingProvider(fail=True)).provision(new_lease(), {})
    (span,) = spans.get_finished_spans()
    assert not span.status.is_ok


def test_no_span_when_tracing_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_LAMBDA_EXEC_WRAPPER", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    _EXPORTER.clear()
    InstrumentedProvider(CountingProvider()).provision(new_lease(), {})
    assert _EXPORTER.get_finished_spans() == ()


def test_tracing_on_without_the_opentelemetry_api_still_provisions(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The layer ships no OpenTelemetry (ADOT brings it): a wrapper without the API must not break a call."""
    monkeypatch.setenv("AWS_LAMBDA_EXEC_WRAPPER", "/opt/some-other-wrapper")
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # `from opentelemetry import trace` raises ImportError
    observability._opentelemetry_trace.cache_clear()
    provider = CountingProvider()
    try:
        worker = InstrumentedProvider(provider).provision(new_lease(), {})
        InstrumentedProvider(provider).release("a-lease", worker.token)
    finally:
        observability._opentelemetry_trace.cache_clear()

    assert worker.token is not None
    assert provider.release_calls == ["a-lease"]
    warnings = [record for record in caplog.records if "OpenTelemetry API is missing" in record.getMessage()]
    assert len(warnings) == 1


def test_tracing_off_never_imports_opentelemetry() -> None:
    code = (
        "import sys; from scheduler.observability import InstrumentedProvider; "
        "assert 'opentelemetry' not in sys.modules, 'imported at module level'"
    )
    env = {"PYTHONPATH": f"{REPO / 'layers' / 'scheduler'}:{REPO}", "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


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
