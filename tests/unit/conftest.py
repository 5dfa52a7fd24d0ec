"""Fixtures: the store's tests run against two independent DynamoDB implementations and the in-memory store.

`backend` is parametrized over moto (server mode on loopback), dynalite (in memory on loopback) and
memory (`store.memory.MemoryLeaseStore`, no database): moto is lenient where DynamoDB is strict, dynalite
strict where moto is lenient, and the memory store must answer as both do. A fresh table (or store) per test.
A test marked `moto_only("why")` needs what dynalite lacks (transactions, streams, TTL) and runs on moto and
memory; one marked `dynamodb_only("why")` reaches into DynamoDB itself (the client, an item as stored, a
request's parameters) and runs on moto and dynalite. A test asking for `dynamodb` on memory fails, naming
the marker it lacks.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from devstack.dynamodb import FAKE_CREDENTIALS, DynamoDBClient, EmbeddedDynamoDB
from scheduler.store import LeaseStore
from scheduler.store.memory import MemoryLeaseStore
from scheduler.store.port import LeaseStorePort
from tests.support.dynalite import Dynalite, DynaliteMissing
from tests.support.tables import make_table

from .builders import RELEASE_CLAIM_SECONDS, RETENTION_SECONDS, Leases

BACKENDS = ("moto", "dynalite", "memory")
MEMORY = "memory"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "moto_only(reason): needs transactions, streams or TTL, which dynalite lacks; runs on moto and memory",
    )
    config.addinivalue_line(
        "markers", "dynamodb_only(reason): reaches into DynamoDB itself; runs on moto and dynalite, not on memory"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" not in metafunc.fixturenames:
        return
    backends = list(BACKENDS)
    for name, without in (("moto_only", "dynalite"), ("dynamodb_only", MEMORY)):
        marker = metafunc.definition.get_closest_marker(name)
        if marker is not None and not (marker.args or marker.kwargs.get("reason")):
            raise pytest.UsageError(f"{metafunc.definition.nodeid}: {name} needs the reason {without} cannot run it")
        if marker is not None:
            backends.remove(without)
    metafunc.parametrize("backend", backends, indirect=True, scope="session")


@pytest.fixture(scope="session")
def moto_server() -> Iterator[EmbeddedDynamoDB]:
    with pytest.MonkeyPatch.context() as env:
        for name, value in FAKE_CREDENTIALS.items():
            env.setenv(name, value)  # anything building its own client gets fake credentials
        server = EmbeddedDynamoDB.start()
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture(scope="session")
def dynalite_server() -> Iterator[Dynalite]:
    try:
        server = Dynalite.start()
    except DynaliteMissing as missing:
        if os.environ.get("CI") == "true":
            pytest.fail(str(missing))
        pytest.skip(str(missing))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def backend(request: pytest.FixtureRequest) -> str:
    """Which store this test runs against: "moto" or "dynalite" (DynamoDB), or "memory"."""
    return str(request.param)


@pytest.fixture(scope="session")
def dynamodb(backend: str, request: pytest.FixtureRequest) -> DynamoDBClient:
    if backend == MEMORY:
        pytest.fail("a test on the memory store reached into DynamoDB: mark it dynamodb_only(why)")
    server = request.getfixturevalue("moto_server" if backend == "moto" else "dynalite_server")
    return server.client()


@pytest.fixture
def table_name(dynamodb: DynamoDBClient, backend: str) -> Iterator[str]:
    """The leases table, created for this test only from the template's own schema."""
    name = make_table(dynamodb, backend, "leases", "LeasesTable")
    yield name
    dynamodb.delete_table(TableName=name)


def _store(table_name: str, dynamodb: DynamoDBClient, shards: int) -> LeaseStore:
    return LeaseStore(
        table_name,
        dynamodb,
        shards=shards,
        retention_seconds=RETENTION_SECONDS,
        release_claim_seconds=RELEASE_CLAIM_SECONDS,
    )


def memory_store(*, shards: int = 1, counters: bool = False, usage: bool = False) -> MemoryLeaseStore:
    """The in-memory store as the fixture of the same tables would be on DynamoDB."""
    return MemoryLeaseStore(
        shards=shards,
        retention_seconds=RETENTION_SECONDS,
        release_claim_seconds=RELEASE_CLAIM_SECONDS,
        counters_table=counters,
        usage_table=usage,
    )


@pytest.fixture
def store(backend: str, request: pytest.FixtureRequest) -> LeaseStorePort:
    """The leases table alone (no counters, no usage)."""
    if backend == MEMORY:
        return memory_store()
    return _store(request.getfixturevalue("table_name"), request.getfixturevalue("dynamodb"), shards=1)


@pytest.fixture
def sharded_store(backend: str, request: pytest.FixtureRequest) -> LeaseStorePort:
    if backend == MEMORY:
        return memory_store(shards=4)
    return _store(request.getfixturevalue("table_name"), request.getfixturevalue("dynamodb"), shards=4)


@pytest.fixture
def leases(store: LeaseStorePort) -> Leases:
    return Leases(store)


def _tables(request: pytest.FixtureRequest, backend: str, *tables: tuple[str, str]) -> dict[str, str]:
    """Tables of template.yaml beside the leases table (prefix → name), dropped when the test ends."""
    dynamodb: DynamoDBClient = request.getfixturevalue("dynamodb")
    names = {prefix: make_table(dynamodb, backend, prefix, table_id) for prefix, table_id in tables}
    for name in names.values():
        request.addfinalizer(lambda name=name: dynamodb.delete_table(TableName=name))
    return names


def _dynamodb_store(request: pytest.FixtureRequest, **tables: str) -> LeaseStore:
    return LeaseStore(
        request.getfixturevalue("table_name"),
        request.getfixturevalue("dynamodb"),
        retention_seconds=RETENTION_SECONDS,
        release_claim_seconds=RELEASE_CLAIM_SECONDS,
        **tables,
    )


@pytest.fixture
def limited_store(backend: str, request: pytest.FixtureRequest) -> LeaseStorePort:
    """A store whose leases table has its counters table beside it (both from template.yaml)."""
    if backend == MEMORY:
        return memory_store(counters=True)
    names = _tables(request, backend, ("counters", "LeaseCountersTable"))
    return _dynamodb_store(request, counters_table=names["counters"])


@pytest.fixture
def budget_store(backend: str, request: pytest.FixtureRequest) -> LeaseStorePort:
    """A store with its counters table (budgets) and its usage table beside the leases (all from template.yaml)."""
    if backend == MEMORY:
        return memory_store(counters=True, usage=True)
    names = _tables(request, backend, ("counters", "LeaseCountersTable"), ("usage", "UsageTable"))
    return _dynamodb_store(request, counters_table=names["counters"], usage_table=names["usage"])
