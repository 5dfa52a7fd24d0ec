"""Faults: the store unreachable, the Docker host dying mid-provision — clear answers and nothing leaked."""

from __future__ import annotations

import importlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import docker  # type: ignore[import-untyped]
import pytest
import requests

from devstack.dynamodb import FAKE_CREDENTIALS, EmbeddedDynamoDB
from devstack.lambda_environment import LambdaContext
from scheduler.config import Settings
from scheduler.errors import NoCapacity
from scheduler.leases import reconcile
from scheduler.leases.acquire import acquire
from scheduler.leases.outcomes import lease_or_raise
from scheduler.lifecycle import LeaseStatus
from scheduler.models import WorkerKind
from scheduler.providers.configured import ConfiguredProviders
from scheduler.request_models import LeaseRequest
from scheduler.runtime import Runtime
from scheduler.store import LeaseStore
from tests.support.tables import create_all_tables
from tests.unit.builders import context

REPO = Path(__file__).resolve().parents[2]
EVENTS = REPO / "events"
MANAGED = "openalice.scheduler/managed=true"


def _cold_handler(function: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """A function's module on a runtime built now from the environment, warmed as its init warms it."""
    module = importlib.import_module(f"functions.{function}.app")
    runtime = Runtime(Settings.from_environ(dict(os.environ))).warm("store", "providers", "limits", "idempotency")
    monkeypatch.setattr(module, "runtime", runtime)
    return module


@pytest.fixture
def environment(docker_host: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[EmbeddedDynamoDB]:
    database = EmbeddedDynamoDB.start()
    for variable, name in create_all_tables(database).items():
        monkeypatch.setenv(variable, name)
    for key, value in {
        **FAKE_CREDENTIALS,
        **docker_host.env(),
        "AWS_ENDPOINT_URL_DYNAMODB": database.endpoint_url,
        "DOCKER_NETWORK": "none",
        "RENDERER_IMAGE": "openalice/renderer:dev",
        "ANIM_IMAGE": "openalice/anim:dev",
    }.items():
        monkeypatch.setenv(key, value)
    yield database
    database.stop()


def _acquire_event() -> dict[str, Any]:
    return dict(json.loads((EVENTS / "acquire_lease.json").read_text()))


def test_acquire_with_the_store_unreachable_answers_503_and_starts_nothing(
    environment: EmbeddedDynamoDB, docker_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    handler = _cold_handler("acquire_lease", monkeypatch)
    before = docker_client.containers.list(all=True, filters={"label": MANAGED})
    environment.stop()  # the embedded DynamoDB goes away after the function's cold start

    response = handler.lambda_handler(
        _acquire_event(), LambdaContext("AcquireLeaseFunction", 256, "r1", int((time.time() + 30) * 1000))
    )

    assert response["statusCode"] == 503
    error = json.loads(response["body"])["error"]
    assert error["code"] == "no_capacity" and "store" in error["message"]
    assert docker_client.containers.list(all=True, filters={"label": MANAGED}) == before


def test_docker_host_dying_between_create_and_start_leaks_nothing(
    environment: EmbeddedDynamoDB, docker_client: Any
) -> None:
    settings = Settings.from_environ(dict(os.environ))
    store = LeaseStore(settings.leases_table, environment.client())
    registry = ConfiguredProviders(settings)
    host_down = requests.exceptions.ConnectionError("connection refused: the Docker host died")

    def dead(*_: Any, **__: Any) -> None:
        raise host_down

    # The create reaches the engine; then the host dies: start and every cleanup call fail. The host
    # counts as unreachable (503, the next provider would be tried), and as the container it made
    # could not be removed, the lease stays `pending` for the reconciler.
    with pytest.MonkeyPatch.context() as outage, pytest.raises(NoCapacity) as raised:
        outage.setattr(docker.APIClient, "start", dead)
        outage.setattr(docker.APIClient, "remove_container", dead)
        lease_or_raise(acquire(context(store, registry), LeaseRequest(kind=WorkerKind.RENDERER)))
    lease_id = str(raised.value.details["lease_id"])  # type: ignore[index]
    assert "connection refused" in raised.value.details["providers"]["local-docker"]  # type: ignore[index]
    assert docker_client.containers.list(all=True, filters={"label": f"openalice.scheduler/lease-id={lease_id}"})
    assert store.get(lease_id).status == LeaseStatus.PENDING

    # The host is back: past the pending deadline the reconciler removes the half-made container and
    # ends the lease, saying why.
    reconcile.reconcile(context(store, registry, orphan_grace_seconds=600, pending_deadline_seconds=0))

    assert docker_client.containers.list(all=True, filters={"label": f"openalice.scheduler/lease-id={lease_id}"}) == []
    ended = store.get(lease_id)
    assert ended.status == LeaseStatus.FAILED and "PENDING_DEADLINE_SECONDS" in str(ended.failure_reason)
