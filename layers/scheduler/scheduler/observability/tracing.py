"""OpenTelemetry spans around provider calls, imported only when tracing is switched on.

The ADOT layer's wrapper switches it on (AWS_LAMBDA_EXEC_WRAPPER); otherwise a span costs nothing,
not even the import. The API comes from the ADOT layer: the scheduler's layer ships none, so that
no other copy can shadow ADOT's. Without it (tracing on but no ADOT layer) calls run untraced, with
one warning.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from types import ModuleType

from scheduler.observability.log import Logger

logger = Logger(child=True)


@cache
def opentelemetry_trace() -> ModuleType | None:
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
def provider_span(enabled: bool, operation: str, provider: str, attributes: Mapping[str, str]) -> Iterator[None]:
    """An OpenTelemetry span around one provider call (a no-op unless `enabled`)."""
    trace = opentelemetry_trace() if enabled else None
    if trace is None:
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
