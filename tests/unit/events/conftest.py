"""The lease history on moto, dynalite and the memory store (the `backend` of tests/unit/conftest.py)."""

from __future__ import annotations

import pytest

from scheduler.store.history import HistoryBook, HistoryStore
from scheduler.store.memory.history import MemoryHistory
from tests.support.tables import make_table

from ..builders import RETENTION_SECONDS


@pytest.fixture
def history(backend: str, request: pytest.FixtureRequest) -> HistoryBook:
    """An empty history: LEASE_EVENTS_TABLE made from template.yaml's definition, or the memory history."""
    if backend == "memory":
        return MemoryHistory(retention_seconds=RETENTION_SECONDS)
    dynamodb = request.getfixturevalue("dynamodb")
    name = make_table(dynamodb, backend, "events", "LeaseEventsTable")
    request.addfinalizer(lambda: dynamodb.delete_table(TableName=name))
    return HistoryStore(name, dynamodb, retention_seconds=RETENTION_SECONDS)
