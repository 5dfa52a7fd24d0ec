"""The webhooks registry on moto, dynalite and in memory (the `backend` of tests/unit/conftest.py)."""

from __future__ import annotations

import pytest

from scheduler.store.memory.webhooks import MemoryWebhooks
from scheduler.store.port import WebhooksPort
from scheduler.store.webhooks import WebhookStore
from tests.support.tables import make_table


@pytest.fixture
def webhooks(backend: str, request: pytest.FixtureRequest) -> WebhooksPort:
    """An empty registry: WEBHOOKS_TABLE made from template.yaml's definition, or the memory one."""
    if backend == "memory":
        return MemoryWebhooks()
    dynamodb = request.getfixturevalue("dynamodb")
    name = make_table(dynamodb, backend, "webhooks", "WebhooksTable")
    request.addfinalizer(lambda: dynamodb.delete_table(TableName=name))
    return WebhookStore(name, dynamodb)
