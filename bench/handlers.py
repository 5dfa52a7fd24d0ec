"""The real function handlers, run in-process against the embedded DynamoDB, for the in-process benchmarks.

- `DynamoDB`: the embedded DynamoDB (moto server, devstack.dynamodb) in a child process — so its
  request handling never competes with the measured handler for this process's GIL — or in a thread.
- `Handlers`: every `functions/<name>/app.py` imported the way Lambda's init does, each under a
  private module name (the test suite's own `functions.<name>.app` modules are left alone), with
  the tables of template.yaml and a provider registry whose drivers are in-memory fakes wrapped in
  the production `InstrumentedProvider`.
- `ApiCalls`: every DynamoDB request counted exactly with botocore's `before-call` event.
- `TimeInside`: time spent inside botocore's `_make_api_call` and the providers' methods, so a
  handler's own time is total minus those.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from bench.common import LAYER, REPO

# As in the deployed functions (and tests/conftest.py): the service name is set before any module
# creates its logger, so the domain's child loggers and the handlers' loggers are one family.
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "openalice-scheduler")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "OpenAliceScheduler")

from scheduler.deadline import Deadline
from scheduler.models import Lease, LeaseRequest
from scheduler.observability import InstrumentedProvider
from scheduler.providers.base import ManagedWorker, Provider, ProvisionedWorker
from scheduler.providers.registry import ProviderRegistry

EVENTS = REPO / "events"
SAMPLE_LEASE_ID = "3f2b8c1e-6d4a-4f7b-9c2e-1a5d7e9b0c42"
SAMPLE_OWNER = "anim-service"
HTTP_FUNCTIONS = ("health", "authorizer", "acquire_lease", "list_leases", "get_lease", "release_lease", "renew_lease")
FUNCTIONS = (*HTTP_FUNCTIONS, "sweep_expired", "reconcile_workers", "ttl_stream")
SECRET = "local-dev-secret"  # noqa: S105 - what the sample events carry
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "local",
    "AWS_SECRET_ACCESS_KEY": "local",
    "AWS_SESSION_TOKEN": "local",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}

_SERVER = """
import sys
from devstack.dynamodb import EmbeddedDynamoDB
database = EmbeddedDynamoDB.start()
print(database.endpoint_url, flush=True)
sys.stdin.read()
database.stop()
"""


# --- the embedded DynamoDB ---------------------------------------------------------------------


class DynamoDB:
    """moto's DynamoDB server on loopback: in a child process (default) or in a thread of this one."""

    def __init__(self, *, in_thread: bool = False) -> None:
        self._process: subprocess.Popen[str] | None = None
        self._embedded: Any = None
        if in_thread:
            from devstack.dynamodb import EmbeddedDynamoDB

            self._embedded = EmbeddedDynamoDB.start()
            self.endpoint_url: str = self._embedded.endpoint_url
            return
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(LAYER)])}
        self._process = subprocess.Popen(
            [sys.executable, "-c", _SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )
        assert self._process.stdout is not None
        line = self._process.stdout.readline().strip()
        if not line.startswith("http://"):
            self._process.kill()
            raise RuntimeError(f"the embedded DynamoDB did not start: {line!r}")
        self.endpoint_url = line

    def client(self, service: str = "dynamodb") -> Any:
        import boto3

        return boto3.client(  # type: ignore[call-overload]
            service,
            endpoint_url=self.endpoint_url,
            region_name="us-east-1",
            aws_access_key_id="local",
            aws_secret_access_key="local",  # noqa: S106 - moto accepts any
        )

    def create_tables(self) -> dict[str, str]:
        """Every table of template.yaml under a fresh name; returns LEASES_TABLE etc. → name."""
        from devstack.dynamodb import create_table
        from devstack.template import SamTemplate

        template = SamTemplate.load()
        client = self.client()
        names: dict[str, str] = {}
        for table_id, variable in template.table_variables.items():
            name = f"bench-{variable.lower().replace('_', '-')}-{uuid.uuid4().hex[:8]}"
            create_table(client, name, template.tables[table_id])
            names[variable] = name
        return names

    def stop(self) -> None:
        if self._embedded is not None:
            self._embedded.stop()
            return
        if self._process is not None and self._process.poll() is None:
            assert self._process.stdin is not None
            self._process.stdin.close()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=10)


# --- time spent outside our code ---------------------------------------------------------------


class TimeInside:
    """Wall and thread-CPU seconds spent inside botocore `_make_api_call` (and its HTTP send) and providers."""

    def __init__(self) -> None:
        self.wall: defaultdict[str, float] = defaultdict(float)
        self.cpu: defaultdict[str, float] = defaultdict(float)
        self.calls: Counter[str] = Counter()
        self._depth = threading.local()

    def reset(self) -> None:
        self.wall.clear()
        self.cpu.clear()
        self.calls.clear()

    @contextlib.contextmanager
    def inside(self, what: str) -> Iterator[None]:
        depth = getattr(self._depth, what, 0)
        setattr(self._depth, what, depth + 1)
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            yield
        finally:
            setattr(self._depth, what, depth)
            if depth == 0:  # only the outermost call counts
                self.wall[what] += time.perf_counter() - wall
                self.cpu[what] += time.thread_time() - cpu
                self.calls[what] += 1

    @contextlib.contextmanager
    def patched(self) -> Iterator[TimeInside]:
        """Time botocore's `_make_api_call` (all of a DynamoDB call) and `Endpoint._send` (its HTTP round trip)."""
        from botocore.client import BaseClient
        from botocore.endpoint import Endpoint

        original_call = getattr(BaseClient, "_make_api_call")  # noqa: B009 - private botocore methods
        original_send = getattr(Endpoint, "_send")  # noqa: B009
        meter = self

        def make_api_call(client: Any, operation_name: str, api_params: Any) -> Any:
            with meter.inside("dynamodb"):
                return original_call(client, operation_name, api_params)

        def send(endpoint: Any, request: Any) -> Any:
            with meter.inside("dynamodb_http"):
                return original_send(endpoint, request)

        setattr(BaseClient, "_make_api_call", make_api_call)  # noqa: B010 - private botocore methods
        setattr(Endpoint, "_send", send)  # noqa: B010
        try:
            yield self
        finally:
            setattr(BaseClient, "_make_api_call", original_call)  # noqa: B010
            setattr(Endpoint, "_send", original_send)  # noqa: B010


# --- counting DynamoDB requests ----------------------------------------------------------------


@dataclass
class ApiCall:
    operation: str
    tables: tuple[str, ...]
    items: int  # item writes in a TransactWriteItems, else 1


@dataclass
class ApiCalls:
    """Every DynamoDB request of the registered clients, from botocore's `before-call` event."""

    table_roles: dict[str, str] = field(default_factory=dict)  # table name → LEASES_TABLE etc.
    calls: list[ApiCall] = field(default_factory=list)
    _clients: list[Any] = field(default_factory=list)

    def register(self, client: Any) -> None:
        if any(client is known for known in self._clients):
            return
        self._clients.append(client)
        client.meta.events.register("before-call.dynamodb.*", self._before_call)

    def _before_call(self, model: Any = None, params: Any = None, **_: Any) -> None:
        body = params.get("body") if isinstance(params, dict) else None
        try:
            request = json.loads(body) if body else {}
        except ValueError:
            request = {}
        tables: list[str] = []
        items = 1
        if "TransactItems" in request:
            items = len(request["TransactItems"])
            for entry in request["TransactItems"]:
                for action in entry.values():
                    tables.append(action.get("TableName", "?"))
        elif "RequestItems" in request:
            tables = list(request["RequestItems"])
        elif "TableName" in request:
            tables = [request["TableName"]]
        roles = tuple(self.table_roles.get(name, name) for name in tables)
        self.calls.append(ApiCall(model.name if model is not None else "?", roles, items))

    @contextlib.contextmanager
    def recording(self) -> Iterator[list[ApiCall]]:
        """The calls made inside the block."""
        start = len(self.calls)
        captured: list[ApiCall] = []
        try:
            yield captured
        finally:
            captured.extend(self.calls[start:])

    @staticmethod
    def tally(calls: list[ApiCall]) -> dict[str, Any]:
        """Round trips by operation and by table role, and item writes inside transactions."""
        by_operation = Counter(call.operation for call in calls)
        by_role: Counter[str] = Counter()
        for call in calls:
            for role in sorted(set(call.tables)):
                by_role[f"{call.operation}:{role}"] += 1
        writes = [c for c in calls if c.operation in _WRITE_OPERATIONS]
        reads = [c for c in calls if c.operation in _READ_OPERATIONS]
        idempotency = [c for c in calls if c.tables and all(role == "IDEMPOTENCY_TABLE" for role in c.tables)]
        return {
            "round_trips": len(calls),
            "by_operation": dict(sorted(by_operation.items())),
            "by_operation_and_table": dict(sorted(by_role.items())),
            "write_round_trips": len(writes),
            "read_round_trips": len(reads),
            "item_writes": sum(c.items for c in writes),
            "lease_store_write_round_trips": len([c for c in writes if c not in idempotency]),
            "idempotency_round_trips": len(idempotency),
        }


_WRITE_OPERATIONS = frozenset({"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"})
_READ_OPERATIONS = frozenset({"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"})


# --- an in-memory provider ---------------------------------------------------------------------


class FakeProvider(Provider):
    """An in-memory driver under a real provider's name; its methods' time is recorded as `provider`."""

    def __init__(self, name: str = "local-docker", meter: TimeInside | None = None) -> None:
        self.name = name
        self.meter = meter or TimeInside()
        self.workers: dict[str, str] = {}  # token → lease id
        self.provisions = 0
        self.releases = 0
        self._lock = threading.Lock()

    def available(self, request: LeaseRequest) -> bool:
        return True

    def provision(self, lease: Lease, env: Mapping[str, str], deadline: Deadline | None = None) -> ProvisionedWorker:
        with self.meter.inside("provider"):
            token = uuid.uuid4().hex
            with self._lock:
                self.workers[token] = lease.lease_id
                self.provisions += 1
            return ProvisionedWorker(token=token, endpoint=None)

    def release(self, lease_id: str, token: str | None, deadline: Deadline | None = None) -> None:
        with self.meter.inside("provider"), self._lock:
            self.releases += 1
            if token is not None:
                self.workers.pop(token, None)
            else:
                for key in [key for key, owner in self.workers.items() if owner == lease_id]:
                    del self.workers[key]

    def list_managed(self, deadline: Deadline | None = None) -> list[ManagedWorker]:
        with self.meter.inside("provider"):
            now = datetime.now(UTC)
            with self._lock:
                return [ManagedWorker(lease_id, token, now) for token, lease_id in self.workers.items()]


def fake_registry(provider: FakeProvider) -> ProviderRegistry:
    """A ProviderRegistry serving `provider` for every configured name, wrapped as in production."""
    from scheduler.config import get_settings

    settings = get_settings()
    return ProviderRegistry(
        settings,
        factories={name: (lambda _settings: provider) for name in settings.providers},
        wrap=InstrumentedProvider,
    )


# --- events ------------------------------------------------------------------------------------


def load_event(name: str, lease_id: str | None = None) -> dict[str, Any]:
    """A sample event from events/, with the sample lease id replaced."""
    text = (EVENTS / f"{name}.json").read_text()
    if lease_id is not None:
        text = text.replace(SAMPLE_LEASE_ID, lease_id)
    return dict(json.loads(text))


def acquire_event(
    body: dict[str, Any] | None = None, idempotency_key: str | None = None, request_id: str | None = None
) -> dict[str, Any]:
    event = load_event("acquire_lease")
    if body is not None:
        event["body"] = json.dumps(body)
    if idempotency_key is not None:
        event["headers"]["idempotency-key"] = idempotency_key
    if request_id is not None:
        event["requestContext"]["requestId"] = request_id
    return event


def list_event(**query: str) -> dict[str, Any]:
    event = load_event("list_leases")
    event["queryStringParameters"] = dict(query)
    event["rawQueryString"] = "&".join(f"{key}={value}" for key, value in query.items())
    return event


# --- the handlers ------------------------------------------------------------------------------


def load_function(name: str) -> ModuleType:
    """Import functions/<name>/app.py (its init runs) under a private module name."""
    path = REPO / "functions" / name / "app.py"
    module_name = f"_bench_{name}_app_{uuid.uuid4().hex[:6]}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(module_name, None)
    return module


def handler_environment(
    endpoint_url: str, tables: Mapping[str, str], extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    return {
        **tables,
        **FAKE_CREDENTIALS,
        "AWS_ENDPOINT_URL_DYNAMODB": endpoint_url,
        "INTERNAL_SECRET": SECRET,
        "PROVIDERS": "local-docker",
        "DOCKER_HOST": "tcp://127.0.0.1:9",  # never dialled: the driver is replaced by a fake
        "DOCKER_NETWORK": "none",
        "RENDERER_IMAGE": "openalice/renderer:dev",
        "ANIM_IMAGE": "openalice/anim:dev",
        "POWERTOOLS_SERVICE_NAME": "openalice-scheduler",
        "POWERTOOLS_METRICS_NAMESPACE": "OpenAliceScheduler",
        "LOG_LEVEL": "INFO",
        "POWERTOOLS_LOG_LEVEL": "INFO",
        **(extra or {}),
    }


class Handlers:
    """Every function's module, initialised against `database` with a fake provider behind each registry."""

    def __init__(
        self, database: DynamoDB, extra_env: Mapping[str, str] | None = None, names: tuple[str, ...] = FUNCTIONS
    ):
        from devstack.lambda_environment import LambdaContext

        self._context_type = LambdaContext
        self.database = database
        self.tables = database.create_tables()
        self.env = handler_environment(database.endpoint_url, self.tables, extra_env)
        self._saved = {key: os.environ.get(key) for key in self.env}
        os.environ.update(self.env)
        from scheduler.config import get_settings

        get_settings.cache_clear()
        self.meter = TimeInside()
        self.provider = FakeProvider(meter=self.meter)
        self.registry = fake_registry(self.provider)
        self.calls = ApiCalls(table_roles={name: role for role, name in self.tables.items()})
        self.modules: dict[str, ModuleType] = {}
        for name in names:
            module = load_function(name)
            if hasattr(module, "providers"):
                setattr(module, "providers", self.registry)  # noqa: B010 - the handler's module global
            if hasattr(module, "check"):  # GET's worker check: the same fake provider
                from scheduler.runtime import worker_read_check

                setattr(module, "check", worker_read_check(module.store, providers=self.registry))  # noqa: B010
            if name == "acquire_lease":
                from scheduler.runtime import idempotent_acquire

                acquire_once = idempotent_acquire(module.store, self.registry, module.limits)
                setattr(module, "acquire_once", acquire_once)  # noqa: B010
            if hasattr(module, "store"):
                self.calls.register(module.store.client)
            self.modules[name] = module
        self._requests = 0

    def close(self) -> None:
        from scheduler.config import get_settings

        for key, value in self._saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        get_settings.cache_clear()

    def __enter__(self) -> Handlers:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def context(self, name: str) -> Any:
        self._requests += 1
        return self._context_type(
            function_name=name,
            memory_limit_in_mb=256,
            aws_request_id=f"req-{self._requests}",
            deadline_epoch_ms=int((time.time() + 30) * 1000),  # the acquire function's timeout
        )

    def invoke(self, name: str, event: dict[str, Any]) -> Any:
        return self.modules[name].lambda_handler(event, self.context(name))

    # Shortcuts for the lease endpoints, each asserting the status it must answer.

    def acquire(self, body: dict[str, Any] | None = None, idempotency_key: str | None = None) -> dict[str, Any]:
        response = self.invoke("acquire_lease", acquire_event(body, idempotency_key))
        _expect(response, 201, "acquire")
        return dict(json.loads(response["body"])["lease"])

    def get(self, lease_id: str) -> dict[str, Any]:
        response = self.invoke("get_lease", load_event("get_lease", lease_id))
        _expect(response, 200, "get")
        return dict(json.loads(response["body"])["lease"])

    def list_page(self, **query: str) -> dict[str, Any]:
        response = self.invoke("list_leases", list_event(**query))
        _expect(response, 200, "list")
        return dict(json.loads(response["body"]))

    def renew(self, lease_id: str) -> dict[str, Any]:
        response = self.invoke("renew_lease", load_event("renew_lease", lease_id))
        _expect(response, 200, "renew")
        return dict(json.loads(response["body"])["lease"])

    def release(self, lease_id: str) -> None:
        response = self.invoke("release_lease", load_event("release_lease", lease_id))
        _expect(response, 204, "release")

    def stores(self) -> list[Any]:
        return [module.store for module in self.modules.values() if hasattr(module, "store")]


def _expect(response: dict[str, Any], status: int, what: str) -> None:
    if response.get("statusCode") != status:
        raise AssertionError(f"{what} answered {response.get('statusCode')}: {response.get('body')}")


def lease_body(owner: str = SAMPLE_OWNER, ttl_seconds: int = 600) -> dict[str, Any]:
    """The sample acquire body (events/acquire_lease.json) with its owner and TTL."""
    return {
        "kind": "renderer",
        "gpu": "none",
        "ttl_seconds": ttl_seconds,
        "owner_id": owner,
        "correlation_id": "job-1234",
        "env": {"SCENE": "intro"},
    }


def repo_path() -> Path:
    return REPO
