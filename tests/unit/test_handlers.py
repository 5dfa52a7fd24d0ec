"""The read handlers (no provider, no Docker) through their Lambda entry points, on moto and on dynalite."""

from __future__ import annotations

import base64
import importlib.util
import json
import sys
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from devstack.dynamodb import FAKE_CREDENTIALS, DynamoDBClient
from devstack.lambda_environment import LambdaContext
from scheduler.config import get_settings
from scheduler.models import ListFilter, utc_now
from scheduler.store import LeaseStore

from .builders import Leases

REPO = Path(__file__).resolve().parents[2]
EVENTS = REPO / "events"


@pytest.fixture
def handler_of(dynamodb: DynamoDBClient, table_name: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Load a function's module cold, configured for this test's table on this backend."""
    for key, value in {
        **FAKE_CREDENTIALS,
        "AWS_ENDPOINT_URL_DYNAMODB": dynamodb.meta.endpoint_url,
        "LEASES_TABLE": table_name,
    }.items():
        monkeypatch.setenv(key, value)
    get_settings.cache_clear()

    def load(function: str) -> ModuleType:
        name = f"cold_{function}_{uuid.uuid4().hex[:8]}"
        spec = importlib.util.spec_from_file_location(name, REPO / "functions" / function / "app.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module

    yield load
    get_settings.cache_clear()


def list_event(**query: str) -> dict[str, Any]:
    event = dict(json.loads((EVENTS / "list_leases.json").read_text()))
    event["queryStringParameters"] = query
    event["rawQueryString"] = "&".join(f"{key}={value}" for key, value in query.items())
    return event


def call(module: ModuleType, event: dict[str, Any]) -> tuple[int, Any]:
    response = module.lambda_handler(event, LambdaContext("Function", 256, "req-1", 2**62))
    return response["statusCode"], json.loads(response.get("body") or "null")


def test_a_continuation_asked_for_after_its_start_key_expired_answers_200(handler_of: Any, store: LeaseStore) -> None:
    now = utc_now()
    arrange = Leases(store)
    soon = arrange.active(created_at=now - timedelta(seconds=60), ttl_seconds=30)  # expired 30 s ago
    later = arrange.active(created_at=now, ttl_seconds=600)
    page, token = store.list_live(ListFilter(limit=1), now - timedelta(seconds=45))  # a consumer 45 s ago
    assert [lease.lease_id for lease in page] == [soon.lease_id] and token

    status, body = call(handler_of("list_leases"), list_event(limit="1", next_token=token))

    assert status == 200, body
    listed = [lease["lease_id"] for lease in body["leases"]]
    assert listed in ([later.lease_id], [])  # a page may be short or empty while next_token is set


def token(payload: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


START = {"lease_id": {"S": "0b6c2f0e-8f0e-4f54-9d8e-3c8a3e4d9a11"}, "live_shard": {"S": "0"}}


@pytest.mark.parametrize(
    "crafted",
    [
        token({"s": 0, "k": {**START, "due_at": {"N": "99999999999999999999"}}}),
        token({"s": 0, "k": {**START, "due_at": {"N": "NaN"}}}),
        token({"s": 0, "k": {**START, "due_at": {"B": "AA=="}}}),
        token({"s": 0, "k": {**START, "due_at": {"N": "1"}, "extra": {"S": "x"}}}),
        token({"s": 1, "k": None}),
        token({"s": True, "k": None}),
        token({"s": 0.5, "k": None}),
        "\ud800",
        "a" * 4000,
    ],
    ids=[
        "huge-due",
        "nan-due",
        "binary-due",
        "extra-attribute",
        "unknown-shard",
        "bool-shard",
        "float-shard",
        "lone-surrogate",
        "long",
    ],
)
def test_a_crafted_next_token_answers_400(handler_of: Any, crafted: str) -> None:
    status, body = call(handler_of("list_leases"), list_event(next_token=crafted))
    assert (status, body["error"]["code"]) == (400, "invalid_request")


def test_get_of_an_unknown_lease_answers_404(handler_of: Any) -> None:
    event = dict(json.loads((EVENTS / "get_lease.json").read_text()))
    event["pathParameters"] = {"lease_id": str(uuid.uuid4())}
    assert call(handler_of("get_lease"), event)[0] == 404
