"""Each function's handler, its dependencies replaced in one line: `monkeypatch.setattr(app, "runtime", ...)`.

The handlers run as Lambda runs them (their module imported once, the event in, the answer out), on
the embedded DynamoDB with in-memory providers (wrapped as in production, so the provider metrics
are there too) and recorded metrics. No Docker, no network beyond loopback, no module reloads.
"""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

import pytest

from devstack.dynamodb import FAKE_CREDENTIALS, DynamoDBClient
from devstack.lambda_environment import LambdaContext
from scheduler.config import Secret, Settings
from scheduler.observability.instrumented import InstrumentedProvider
from scheduler.providers.base import Provider
from scheduler.providers.configured import ConfiguredProviders
from scheduler.providers.memory import MemoryProvider
from scheduler.runtime import Runtime
from scheduler.store import LeaseStore
from scheduler.store.port import LeaseStorePort
from tests.support.metrics import RecordedMetrics
from tests.support.tables import make_table

from ..builders import NOW, memory_provider
from ..conftest import MEMORY

EVENTS = Path(__file__).resolve().parents[3] / "events"
SAMPLE_LEASE_ID = "3f2b8c1e-6d4a-4f7b-9c2e-1a5d7e9b0c42"
SECRET = "local-dev-secret"  # what the sample events carry


class Function:
    """One function's handler module, with the test's runtime."""

    def __init__(self, module: ModuleType, runtime: Runtime) -> None:
        self.module = module
        self.runtime = runtime

    def __call__(self, event: dict[str, Any]) -> Any:
        deadline_ms = int((time.time() + 30) * 1000)  # as long as the acquire function's timeout
        return self.module.lambda_handler(event, LambdaContext("Function", 256, "req-1", deadline_ms))

    def http(self, event: dict[str, Any]) -> tuple[int, Any]:
        """The status and the parsed body of an HTTP answer."""
        response = self(event)
        return response["statusCode"], json.loads(response.get("body") or "null")

    def log_keys(self) -> dict[str, Any]:
        """The keys every log line of the last invocation carried."""
        return dict(self.module.logger.get_current_keys())


def event(name: str, lease_id: str | None = None, **changes: Any) -> dict[str, Any]:
    """A sample event from events/, with the sample lease id swapped for `lease_id`."""
    text = (EVENTS / f"{name}.json").read_text()
    if lease_id is not None:
        text = text.replace(SAMPLE_LEASE_ID, lease_id)
    loaded = dict(json.loads(text))
    loaded.update(changes)
    return loaded


def with_header(sample: dict[str, Any], name: str, value: str | None) -> dict[str, Any]:
    headers = {key: item for key, item in sample["headers"].items() if key != name}
    if value is not None:
        headers[name] = value
    return {**sample, "headers": headers}


def runtime_of(
    store: LeaseStorePort,
    *providers: Provider,
    metrics: RecordedMetrics | None = None,
    clock: Callable[[], datetime] = lambda: NOW,
    **settings: Any,
) -> Runtime:
    """A runtime on `store` with `providers` (default: one in-memory local-docker), as production wires it."""
    chosen: tuple[Provider, ...] = providers or (memory_provider(),)
    recorded = metrics if metrics is not None else RecordedMetrics()
    configured = Settings(
        providers=tuple(provider.name for provider in chosen),
        internal_secret=Secret(SECRET),
        **{**tables_of(store), **settings},
    )
    registry = ConfiguredProviders(
        configured,
        factories={provider.name: (lambda _, chosen=provider: chosen) for provider in chosen},
        wrap=lambda driver: InstrumentedProvider(driver, recorded),
    )
    # On the memory store there is no idempotency table: a request with an Idempotency-Key fails the test
    # by name rather than as a 500 (such tests are `dynamodb_only`).
    idempotency = None if isinstance(store, LeaseStore) else _no_idempotency_table
    return Runtime(configured, store=store, providers=registry, metrics=recorded, clock=clock, idempotency=idempotency)


def _no_idempotency_table(*_: object, **__: object) -> NoReturn:
    pytest.fail("an Idempotency-Key needs powertools' DynamoDB table: mark the test dynamodb_only")


def tables_of(store: LeaseStorePort) -> dict[str, str]:
    """The settings naming the tables a DynamoDB store uses (none for the memory store)."""
    if not isinstance(store, LeaseStore):
        return {}
    tables = {"leases_table": store.table_name}
    if store.counters_table:
        tables["counters_table"] = store.counters_table
    if store.usage_table:
        tables["usage_table"] = store.usage_table
    return tables


@pytest.fixture
def idempotency_table(backend: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """The idempotency records' table: powertools' own, in DynamoDB. The memory store's runs name one that is
    never built (the runtime builds its idempotency part for a request with an Idempotency-Key only, and the
    tests sending one are `dynamodb_only`)."""
    if backend == MEMORY:
        yield "no-idempotency-table-on-memory"
        return
    dynamodb: DynamoDBClient = request.getfixturevalue("dynamodb")
    name = make_table(dynamodb, backend, "idempotency", "IdempotencyTable")
    yield name
    dynamodb.delete_table(TableName=name)


@pytest.fixture
def metrics() -> RecordedMetrics:
    return RecordedMetrics()


@pytest.fixture
def provider() -> MemoryProvider:
    return memory_provider()


@pytest.fixture
def runtime(
    store: LeaseStorePort, provider: MemoryProvider, metrics: RecordedMetrics, idempotency_table: str
) -> Runtime:
    return runtime_of(store, provider, metrics=metrics, idempotency_table=idempotency_table)


@pytest.fixture
def function(monkeypatch: pytest.MonkeyPatch, runtime: Runtime) -> Callable[[str], Function]:
    """`function("acquire_lease")`: its handler, running on this test's runtime."""

    def load(name: str, replacement: Runtime | None = None) -> Function:
        with monkeypatch.context() as init:  # what the module's init reads, the first time it is imported
            for variable, value in FAKE_CREDENTIALS.items():
                init.setenv(variable, value)
            module = importlib.import_module(f"functions.{name}.app")
        chosen = replacement or runtime
        monkeypatch.setattr(module, "runtime", chosen)
        return Function(module, chosen)

    return load
