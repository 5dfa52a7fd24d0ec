"""Fixtures: one loopback moto server per session, a fresh table (from template.yaml) per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from scheduler.store import LeaseStore
from tests.support.moto_server import (
    FAKE_AWS_ENV,
    TEMPLATE_PATH,
    DynamoDBClient,
    MotoServer,
    create_tables_from_template,
    start_moto_server,
    table_specs,
)

from .builders import RELEASE_CLAIM_SECONDS, RETENTION_SECONDS, Leases


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    with pytest.MonkeyPatch.context() as env:
        for name, value in FAKE_AWS_ENV.items():
            env.setenv(name, value)  # anything building its own client gets fake credentials
        server = start_moto_server()
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture(scope="session")
def dynamodb(moto_server: MotoServer) -> DynamoDBClient:
    return moto_server.dynamodb_client()


@pytest.fixture
def table_name(dynamodb: DynamoDBClient) -> Iterator[str]:
    """The leases table, created for this test only from the template's own schema."""
    suffix = uuid.uuid4().hex[:12]
    names = {logical_id: f"{logical_id}-{suffix}" for logical_id in table_specs(TEMPLATE_PATH)}
    created = create_tables_from_template(dynamodb, TEMPLATE_PATH, names)
    yield created["LeasesTable"]
    for name in created.values():
        dynamodb.delete_table(TableName=name)


@pytest.fixture
def store(table_name: str, dynamodb: DynamoDBClient) -> LeaseStore:
    return LeaseStore(
        table_name,
        dynamodb,
        shards=1,
        retention_seconds=RETENTION_SECONDS,
        release_claim_seconds=RELEASE_CLAIM_SECONDS,
    )


@pytest.fixture
def sharded_store(table_name: str, dynamodb: DynamoDBClient) -> LeaseStore:
    return LeaseStore(
        table_name,
        dynamodb,
        shards=4,
        retention_seconds=RETENTION_SECONDS,
        release_claim_seconds=RELEASE_CLAIM_SECONDS,
    )


@pytest.fixture
def leases(store: LeaseStore) -> Leases:
    return Leases(store)
