"""The real function handlers, in-process against the embedded DynamoDB, for the in-process benchmarks.

- `DynamoDB`: moto's server (devstack.dynamodb) in a child process, so its request handling never
  competes with the measured handler for this process's GIL.
- `Handlers`: every `functions/<name>/app.py` imported as Lambda's init does, under a private module
  name, its one seam (`runtime`) set to the bench's tables and the layer's in-memory driver (timed),
  wrapped in the production `InstrumentedProvider`.
- `ApiCalls`: every DynamoDB request, from botocore's events on the handlers' clients (not the store):
  `before-call` (operation, tables, transaction items) and `after-call` (items read and their sizes).
- `TimeInside`: time inside botocore's `_make_api_call` and the provider, so a handler's own time is
  total minus those.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any
from unittest import mock

from bench.common import LAYER, REPO, functions

# As in the deployed functions: the service name is set before any module creates its logger.
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "openalice-scheduler")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "OpenAliceScheduler")

from devstack.dynamodb import FAKE_CREDENTIALS
from scheduler.config import Settings
from scheduler.observability.instrumented import InstrumentedProvider
from scheduler.observability.metrics import EmfMetrics
from scheduler.providers.configured import ConfiguredProviders
from scheduler.providers.memory import MemoryProvider
from scheduler.runtime import Runtime, lease_store

EVENTS = REPO / "events"
SAMPLE_LEASE_ID = "3f2b8c1e-6d4a-4f7b-9c2e-1a5d7e9b0c42"
SAMPLE_OWNER = "anim-service"
SECRET = "local-dev-secret"  # noqa: S105 - what the sample events carry
_SERVER = "from devstack.dynamodb import EmbeddedDynamoDB as D; import sys; d = D.start(); print(d.endpoint_url, flush=True); sys.stdin.read(); d.stop()"  # noqa: E501


class DynamoDB:
    """moto's DynamoDB server on loopback, in a child process."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(LAYER)])}
        self._process = subprocess.Popen(
            [sys.executable, "-c", _SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )
        assert self._process.stdout is not None
        self.endpoint_url = self._process.stdout.readline().strip()
        if not self.endpoint_url.startswith("http://"):
            self._process.kill()
            raise RuntimeError(f"the embedded DynamoDB did not start: {self.endpoint_url!r}")

    def client(self) -> Any:
        import boto3

        credentials = {"aws_access_key_id": "local", "aws_secret_access_key": "local"}
        return boto3.client("dynamodb", endpoint_url=self.endpoint_url, region_name="us-east-1", **credentials)

    def stop(self) -> None:
        if self._process.poll() is None:
            assert self._process.stdin is not None
            self._process.stdin.close()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()


class TimeInside:
    """Wall and thread-CPU seconds spent inside botocore `_make_api_call` (and its HTTP send) and the provider."""

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

        originals = {(BaseClient, "_make_api_call"): "dynamodb", (Endpoint, "_send"): "dynamodb_http"}
        saved = {key: getattr(*key) for key in originals}
        for (owner, name), what in originals.items():
            original = saved[(owner, name)]

            def timed(*args: Any, _original: Any = original, _what: str = what) -> Any:
                with self.inside(_what):
                    return _original(*args)

            setattr(owner, name, timed)
        try:
            yield self
        finally:
            for (owner, name), original in saved.items():
                setattr(owner, name, original)


@dataclass
class ApiCall:
    operation: str
    tables: tuple[str, ...]  # table roles (LEASES_TABLE, ...)
    items: int  # item writes in a TransactWriteItems, else 1
    read: dict[str, Any] = field(default_factory=dict)  # reads: items, scanned, bytes, read units


@dataclass
class ApiCalls:
    """Every DynamoDB request of the registered clients, counted from botocore's events."""

    table_roles: dict[str, str] = field(default_factory=dict)  # table name → LEASES_TABLE etc.
    calls: list[ApiCall] = field(default_factory=list)
    _clients: list[Any] = field(default_factory=list)

    def register(self, client: Any) -> None:
        if any(client is known for known in self._clients):
            return
        self._clients.append(client)
        client.meta.events.register("before-call.dynamodb.*", self._before_call)
        client.meta.events.register("after-call.dynamodb.*", self._after_call)

    def _before_call(self, model: Any = None, params: Any = None, context: Any = None, **_: Any) -> None:
        body = params.get("body") if isinstance(params, dict) else None
        request: dict[str, Any] = {}
        with contextlib.suppress(ValueError):
            request = json.loads(body) if body else {}
        tables, items = [request.get("TableName", "?")] if "TableName" in request else [], 1
        if "TransactItems" in request:
            items = len(request["TransactItems"])
            tables = [action.get("TableName", "?") for entry in request["TransactItems"] for action in entry.values()]
        elif "RequestItems" in request:
            tables = list(request["RequestItems"])
        call = ApiCall(model.name, tuple(self.table_roles.get(name, name) for name in tables), items)
        self.calls.append(call)
        if isinstance(context, dict):
            context["bench_call"] = call

    def _after_call(self, parsed: Any = None, model: Any = None, context: Any = None, **_: Any) -> None:
        call = context.get("bench_call") if isinstance(context, dict) else None
        if call is None or model.name not in ("Query", "Scan", "GetItem", "BatchGetItem"):
            return
        if model.name == "BatchGetItem":  # each item rounded up to 4 KB on its own; counters read consistently
            items = [item for found in (parsed.get("Responses") or {}).values() for item in found]
            units = sum(read_units(item_size(item), consistent=True) for item in items)
        else:  # a GetItem here is always ConsistentRead; Query/Scan are eventually consistent
            items = parsed.get("Items") or ([parsed["Item"]] if "Item" in parsed else [])
            units = read_units(sum(item_size(item) for item in items), consistent=model.name == "GetItem")
        scanned = int(parsed.get("ScannedCount", len(items)))
        call.read = {"items": len(items), "scanned": scanned, "bytes": sum(map(item_size, items)), "units": units}

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
        by_role: Counter[str] = Counter()
        for call in calls:
            by_role.update(f"{call.operation}:{role}" for role in sorted(set(call.tables)))
        writes = [c for c in calls if c.operation in ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems")]
        idempotency = [c for c in calls if c.tables and all(role == "IDEMPOTENCY_TABLE" for role in c.tables)]
        return {
            "round_trips": len(calls),
            "by_operation": dict(sorted(Counter(call.operation for call in calls).items())),
            "by_operation_and_table": dict(sorted(by_role.items())),
            "write_round_trips": len(writes),
            "read_round_trips": sum(1 for c in calls if c.operation in ("GetItem", "Query", "Scan", "BatchGetItem")),
            "item_writes": sum(c.items for c in writes),
            "lease_store_write_round_trips": len([c for c in writes if c not in idempotency]),
            "idempotency_round_trips": len(idempotency),
        }

    @staticmethod
    def reads(calls: list[ApiCall]) -> dict[str, Any]:
        """What the reads among `calls` read: requests by operation and table, items, bytes, read units."""
        reads = [call for call in calls if call.read]
        return {
            "requests": dict(
                sorted(Counter(f"{c.operation}:{','.join(sorted(set(c.tables)))}" for c in reads).items())
            ),
            "items_read": sum(c.read["items"] for c in reads),
            "items_scanned": sum(c.read["scanned"] for c in reads),
            "bytes_read": sum(c.read["bytes"] for c in reads),
            "read_units": sum(c.read["units"] for c in reads),
        }


def attribute_size(value: dict[str, Any]) -> int:
    """Bytes DynamoDB counts for one attribute value (names are added by item_size)."""
    (kind, content), *_ = value.items()
    if kind in ("S", "B"):
        return len(content.encode() if isinstance(content, str) else content)
    if kind == "N":
        digits = content.lstrip("-").replace(".", "").lstrip("0") or "0"
        return 1 + math.ceil(len(digits) / 2) + (1 if content.startswith("-") else 0)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind in ("SS", "BS"):
        return sum(len(part.encode() if isinstance(part, str) else part) for part in content)
    if kind == "NS":
        return sum(attribute_size({"N": part}) for part in content)
    if kind in ("L", "M"):
        parts = content.items() if kind == "M" else (("", part) for part in content)
        return 3 + sum(1 + len(name.encode()) + attribute_size(part) for name, part in parts)
    raise ValueError(f"unknown attribute type {kind}")


def item_size(item: dict[str, dict[str, Any]]) -> int:
    return sum(len(name.encode()) + attribute_size(value) for name, value in item.items())


def read_units(total_bytes: int, *, consistent: bool = False) -> float:
    """DynamoDB's rule: per request, the bytes read rounded up to 4 KB, × 0.5 when eventually consistent."""
    return max(1, math.ceil(total_bytes / 4096)) * (1.0 if consistent else 0.5)


@dataclass(eq=False)
class TimedMemoryProvider(MemoryProvider):
    """The layer's in-memory driver; the time of its calls is recorded as `provider`."""

    meter: TimeInside = field(default_factory=TimeInside)

    def provision(self, *args: Any, **kwargs: Any) -> Any:
        with self.meter.inside("provider"):
            return super().provision(*args, **kwargs)

    def release(self, *args: Any, **kwargs: Any) -> None:
        with self.meter.inside("provider"):
            super().release(*args, **kwargs)

    def list_managed(self, *args: Any, **kwargs: Any) -> Any:
        with self.meter.inside("provider"):
            return super().list_managed(*args, **kwargs)


def load_event(name: str, lease_id: str | None = None, **changes: Any) -> dict[str, Any]:
    """A sample event from events/, with the sample lease id replaced."""
    text = (EVENTS / f"{name}.json").read_text()
    return {**json.loads(text.replace(SAMPLE_LEASE_ID, lease_id or SAMPLE_LEASE_ID)), **changes}


def acquire_event(body: dict[str, Any], idempotency_key: str | None = None) -> dict[str, Any]:
    event = load_event("acquire_lease", body=json.dumps(body))
    if idempotency_key is not None:
        event["headers"]["idempotency-key"] = idempotency_key
    return event


def list_event(**query: str) -> dict[str, Any]:
    raw = "&".join(f"{key}={value}" for key, value in query.items())
    return load_event("list_leases", queryStringParameters=dict(query), rawQueryString=raw)


def lease_body(owner: str = SAMPLE_OWNER, ttl_seconds: int = 600) -> dict[str, Any]:
    """The sample acquire body (events/acquire_lease.json) with its owner and TTL."""
    body = {"kind": "renderer", "gpu": "none", "ttl_seconds": ttl_seconds, "owner_id": owner}
    return {**body, "correlation_id": "job-1234", "env": {"SCENE": "intro"}}


def load_function(name: str) -> ModuleType:
    """Import functions/<name>/app.py (its init runs) under a private module name."""
    module_name = f"_bench_{name}_app_{uuid.uuid4().hex[:6]}"
    spec = importlib.util.spec_from_file_location(module_name, REPO / "functions" / name / "app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(module_name, None)
    return module


class Handlers:
    """Every function's module, each on a runtime of `database`'s tables with the timed in-memory driver."""

    def __init__(
        self,
        database: DynamoDB,
        extra_env: Mapping[str, str] | None = None,
        names: tuple[str, ...] | None = None,
        read_timeout: float = 5.0,
    ) -> None:
        import boto3
        from botocore.config import Config

        from devstack.lambda_environment import LambdaContext
        from tests.support.tables import create_all_tables

        self._context_type = LambdaContext
        self.tables = create_all_tables(database)  # type: ignore[arg-type]
        self.env = {
            **self.tables,
            **FAKE_CREDENTIALS,
            "AWS_ENDPOINT_URL_DYNAMODB": database.endpoint_url,
            "INTERNAL_SECRET": SECRET,
            "DOCKER_HOST": "tcp://127.0.0.1:9",  # never dialled: the driver is the in-memory one
            **(extra_env or {}),
        }
        self._environ = mock.patch.dict(os.environ, self.env)  # what each module's init reads
        self._environ.start()
        settings = Settings.from_environ(self.env)
        self.meter = TimeInside()
        self.provider = TimedMemoryProvider(meter=self.meter)
        metrics = EmfMetrics(settings.powertools_metrics_namespace)
        self.registry = ConfiguredProviders(
            settings,
            factories={name: (lambda _settings: self.provider) for name in settings.providers},
            wrap=lambda driver: InstrumentedProvider(driver, metrics),
        )
        self.calls = ApiCalls(table_roles={name: role for role, name in self.tables.items()})
        config = Config(connect_timeout=2, read_timeout=read_timeout, retries={"mode": "standard", "max_attempts": 3})
        self.modules: dict[str, ModuleType] = {}
        for name in names or functions():
            module = load_function(name)
            if hasattr(module, "runtime"):  # every function but health: its one seam
                store = lease_store(settings, boto3.client("dynamodb", config=config))
                module.runtime = Runtime(settings, store=store, providers=self.registry, metrics=metrics)
                self.calls.register(store.client)
            self.modules[name] = module
        self._requests = 0

    def __enter__(self) -> Handlers:
        return self

    def __exit__(self, *_: object) -> None:
        self._environ.stop()

    def invoke(self, name: str, event: dict[str, Any]) -> Any:
        self._requests += 1
        deadline_ms = int((time.time() + 30) * 1000)  # the acquire function's timeout
        context = self._context_type(name, 256, f"req-{self._requests}", deadline_ms)
        return self.modules[name].lambda_handler(event, context)

    def answer(self, name: str, event: dict[str, Any], status: int) -> Any:
        """The parsed body of an answer that must have `status`."""
        response = self.invoke(name, event)
        if response.get("statusCode") != status:
            raise AssertionError(f"{name} answered {response.get('statusCode')}: {response.get('body')}")
        return json.loads(response["body"]) if response.get("body") else None

    def acquire(self, body: dict[str, Any], idempotency_key: str | None = None) -> dict[str, Any]:
        return dict(self.answer("acquire_lease", acquire_event(body, idempotency_key), 201)["lease"])

    def get(self, lease_id: str) -> dict[str, Any]:
        return dict(self.answer("get_lease", load_event("get_lease", lease_id), 200)["lease"])

    def list_page(self, **query: str) -> dict[str, Any]:
        return dict(self.answer("list_leases", list_event(**query), 200))

    def renew(self, lease_id: str) -> dict[str, Any]:
        return dict(self.answer("renew_lease", load_event("renew_lease", lease_id), 200)["lease"])

    def release(self, lease_id: str) -> None:
        self.answer("release_lease", load_event("release_lease", lease_id), 204)
