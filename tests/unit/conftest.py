"""Fixtures: the store's tests run against two independent DynamoDB implementations, a fresh table per test.

`dynamodb` is parametrized over moto (server mode on loopback) and dynalite (in memory on loopback):
moto is lenient where DynamoDB is strict, dynalite strict where moto is lenient. A test marked
`moto_only("why")` needs what dynalite lacks (transactions, streams, TTL) and runs on moto alone.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from devstack.dynamodb import FAKE_CREDENTIALS, DynamoDBClient, EmbeddedDynamoDB
from scheduler.store import LeaseStore
from tests.support.dynalite import Dynalite, DynaliteMissing
from tests.support.tables import make_table

from .builders import RELEASE_CLAIM_SECONDS, RETENTION_SECONDS, Leases

BACKENDS = ("moto", "dynalite")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "moto_only(reason): needs transactions, streams or TTL, which dynalite lacks; runs on moto only"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("moto_only")
    if marker is not None and not (marker.args or marker.kwargs.get("reason")):
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: moto_only needs the reason dynalite cannot run it")
    metafunc.parametrize("backend", ["moto"] if marker else list(BACKENDS), indirect=True, scope="session")


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
    """Which DynamoDB implementation this test runs against: "moto" or "dynalite"."""
    return str(request.param)


@pytest.fixture(scope="session")
def dynamodb(backend: str, request: pytest.FixtureRequest) -> DynamoDBClient:
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


@pytest.fixture
def store(table_name: str, dynamodb: DynamoDBClient) -> LeaseStore:
    return _store(table_name, dynamodb, shards=1)


@pytest.fixture
def sharded_store(table_name: str, dynamodb: DynamoDBClient) -> LeaseStore:
    return _store(table_name, dynamodb, shards=4)


@pytest.fixture
def leases(store: LeaseStore) -> Leases:
    return Leases(store)


@pytest.fixture
def limited_store(dynamodb: DynamoDBClient, backend: str, table_name: str) -> Iterator[LeaseStore]:
    """A store whose leases table has its counters table beside it (both from template.yaml)."""
    counters = make_table(dynamodb, backend, "counters", "LeaseCountersTable")
    yield LeaseStore(
        table_name,
        dynamodb,
        retention_seconds=RETENTION_SECONDS,
        release_claim_seconds=RELEASE_CLAIM_SECONDS,
        counters_table=counters,
    )
    dynamodb.delete_table(TableName=counters)


@pytest.fixture
def budget_store(dynamodb: DynamoDBClient, backend: str, table_name: str) -> Iterator[LeaseStore]:
    """A store with its counters table (budgets) and its usage table beside the leases (all from template.yaml)."""
    counters = make_table(dynamodb, backend, "counters", "LeaseCountersTable")
    usage = make_table(dynamodb, backend, "usage", "UsageTable")
    yield LeaseStore(
        table_name,
        dynamodb,
        retention_seconds=RETENTION_SECONDS,
        release_claim_seconds=RELEASE_CLAIM_SECONDS,
        counters_table=counters,
        usage_table=usage,
    )
    dynamodb.delete_table(TableName=counters)
    dynamodb.delete_table(TableName=usage)
