"""Fixtures: one embedded DynamoDB (moto server on loopback) per session, a fresh table from template.yaml per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from devstack.dynamodb import FAKE_CREDENTIALS, DynamoDBClient, EmbeddedDynamoDB, create_table
from devstack.template import SamTemplate
from scheduler.store import LeaseStore

from .builders import RELEASE_CLAIM_SECONDS, RETENTION_SECONDS, Leases


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
def dynamodb(moto_server: EmbeddedDynamoDB) -> DynamoDBClient:
    return moto_server.client()


@pytest.fixture
def table_name(dynamodb: DynamoDBClient) -> Iterator[str]:
    """The leases table, created for this test only from the template's own schema."""
    name = f"leases-{uuid.uuid4().hex[:12]}"
    create_table(dynamodb, name, SamTemplate.load().tables["LeasesTable"])
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
def limited_store(dynamodb: DynamoDBClient, table_name: str) -> Iterator[LeaseStore]:
    """A store whose leases table has its counters table beside it (both from template.yaml)."""
    counters = f"counters-{uuid.uuid4().hex[:12]}"
    create_table(dynamodb, counters, SamTemplate.load().tables["LeaseCountersTable"])
    yield LeaseStore(
        table_name,
        dynamodb,
        retention_seconds=RETENTION_SECONDS,
        release_claim_seconds=RELEASE_CLAIM_SECONDS,
        counters_table=counters,
    )
    dynamodb.delete_table(TableName=counters)
