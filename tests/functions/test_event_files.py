"""Each function invoked in-process with its sample event from events/ (the files `sam local invoke -e` uses).

The handlers run against the embedded DynamoDB and the TLS Docker host, so the sample events
are proven to drive the real code paths and cannot rot.
"""

from __future__ import annotations

import importlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from devstack.dynamodb import FAKE_CREDENTIALS, EmbeddedDynamoDB
from devstack.lambda_environment import LambdaContext
from devstack.messaging import LocalMessaging
from devstack.template import SamTemplate
from scheduler.config import Settings
from scheduler.runtime import Runtime
from tests.support.receiver import receiving
from tests.support.tables import create_all_tables

EVENTS = Path(__file__).resolve().parents[2] / "events"
SAMPLE_LEASE_ID = "3f2b8c1e-6d4a-4f7b-9c2e-1a5d7e9b0c42"
FUNCTIONS = sorted(spec.code_dir.name for spec in SamTemplate.load().functions.values())


def load_event(name: str, lease_id: str | None = None) -> dict[str, Any]:
    """An event file, with the sample lease id swapped for a real one."""
    text = (EVENTS / name).read_text()
    if lease_id is not None:
        text = text.replace(SAMPLE_LEASE_ID, lease_id)
    return dict(json.loads(text))


def context(name: str) -> LambdaContext:
    return LambdaContext(
        function_name=name,
        memory_limit_in_mb=256,
        aws_request_id="req-1",
        deadline_epoch_ms=int((time.time() + 30) * 1000),
    )


@pytest.fixture(scope="module")
def functions(docker_host: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ModuleType]]:
    """Every handler module, initialised against a fresh table and the TLS Docker host."""
    database = EmbeddedDynamoDB.start()
    tables = create_all_tables(database)
    messages = LocalMessaging(database.endpoint_url, SamTemplate.load(), tmp_path_factory.mktemp("bus")).create()
    env = {
        **tables,
        **FAKE_CREDENTIALS,
        **docker_host.env(),
        "AWS_ENDPOINT_URL_DYNAMODB": database.endpoint_url,
        "AWS_ENDPOINT_URL_EVENTBRIDGE": database.endpoint_url,
        "AWS_ENDPOINT_URL_SQS": database.endpoint_url,
        "EVENT_BUS_NAME": messages["LifecycleEventBus"],
        "WEBHOOK_QUEUE_URL": messages["WebhookDeliveryQueue"],
        "WEBHOOK_DEAD_LETTER_QUEUE_URL": messages["WebhookDeadLetterQueue"],
        "WEBHOOK_ALLOW_LOOPBACK": "1",
        "INTERNAL_SECRET": "local-dev-secret",
        "DOCKER_NETWORK": "none",
        "RENDERER_IMAGE": "openalice/renderer:dev",
        "ANIM_IMAGE": "openalice/anim:dev",
        "POWERTOOLS_SERVICE_NAME": "openalice-scheduler",
        "POWERTOOLS_METRICS_NAMESPACE": "OpenAliceScheduler",
    }
    settings = Settings.from_environ(env)
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():  # what each module's init reads, wherever it is imported first
            patch.setenv(key, value)
        modules = {name: importlib.import_module(f"functions.{name}.app") for name in FUNCTIONS}
        for module in modules.values():
            if hasattr(module, "runtime"):  # every function but health: its dependencies, from this environment
                patch.setattr(module, "runtime", Runtime(settings))
        yield modules
    database.stop()


def invoke(functions: dict[str, ModuleType], name: str, event: dict[str, Any]) -> Any:
    return functions[name].lambda_handler(event, context(name))


def test_health_event_answers_ok(functions: dict[str, ModuleType]) -> None:
    response = invoke(functions, "health", load_event("health.json"))
    assert response["statusCode"] == 200


def test_console_event_answers_the_page_with_its_policy(functions: dict[str, ModuleType]) -> None:
    response = invoke(functions, "console", load_event("console.json"))
    assert response["statusCode"] == 200
    assert response["headers"]["Content-Type"] == "text/html; charset=utf-8"
    assert "default-src 'self'" in response["headers"]["Content-Security-Policy"]


def test_authorizer_event_with_the_secret_is_authorized(functions: dict[str, ModuleType]) -> None:
    assert invoke(functions, "authorizer", load_event("authorizer.json")) == {"isAuthorized": True}


def test_authorizer_event_with_another_secret_is_refused(functions: dict[str, ModuleType]) -> None:
    event = load_event("authorizer.json")
    event["headers"]["x-internal-secret"] = "wrong"
    assert invoke(functions, "authorizer", event) == {"isAuthorized": False}


def test_lease_lifecycle_through_the_event_files(functions: dict[str, ModuleType], docker_client: Any) -> None:
    acquired = invoke(functions, "acquire_lease", load_event("acquire_lease.json"))
    assert acquired["statusCode"] == 201
    lease_id = json.loads(acquired["body"])["lease"]["lease_id"]
    assert docker_client.containers.list(filters={"name": f"lease-{lease_id}"})

    assert invoke(functions, "get_lease", load_event("get_lease.json", lease_id))["statusCode"] == 200
    listed = invoke(functions, "list_leases", load_event("list_leases.json"))
    assert lease_id in [lease["lease_id"] for lease in json.loads(listed["body"])["leases"]]
    assert invoke(functions, "usage", load_event("usage.json"))["statusCode"] == 200
    assert json.loads(invoke(functions, "queue", load_event("queue.json"))["body"]) == {"queue": []}
    assert invoke(functions, "renew_lease", load_event("renew_lease.json", lease_id))["statusCode"] == 200
    assert invoke(functions, "release_lease", load_event("release_lease.json", lease_id))["statusCode"] == 204
    assert not docker_client.containers.list(all=True, filters={"name": f"lease-{lease_id}"})


def test_sample_lease_id_is_unknown_to_a_fresh_table(functions: dict[str, ModuleType]) -> None:
    assert invoke(functions, "get_lease", load_event("get_lease.json"))["statusCode"] == 404


def test_scheduled_events_run_the_sweep_and_the_reconciler(functions: dict[str, ModuleType]) -> None:
    assert invoke(functions, "sweep_expired", load_event("sweep_expired.json"))["failed_releases"] == 0
    assert invoke(functions, "reconcile_workers", load_event("reconcile_workers.json"))["errors"] == 0


def test_ttl_stream_event_releases_the_deleted_lease_worker(
    functions: dict[str, ModuleType], docker_client: Any
) -> None:
    acquired = invoke(functions, "acquire_lease", load_event("acquire_lease.json"))
    lease = json.loads(acquired["body"])["lease"]
    event = load_event("ttl_stream.json", lease["lease_id"])
    event["Records"][0]["dynamodb"]["OldImage"]["provider_token"] = {"S": lease["provider_token"]}
    store = functions["ttl_stream"].runtime.store
    store.client.delete_item(TableName=store.table_name, Key={"lease_id": {"S": lease["lease_id"]}})

    response = invoke(functions, "ttl_stream", event)

    assert response == {"batchItemFailures": []}
    assert not docker_client.containers.list(all=True, filters={"name": f"lease-{lease['lease_id']}"})
    ended = invoke(functions, "get_lease", load_event("get_lease.json", lease["lease_id"]))
    assert json.loads(ended["body"])["lease"]["status"] == "expired"


def test_logs_and_owner_release_through_the_event_files(functions: dict[str, ModuleType], docker_client: Any) -> None:
    acquired = invoke(functions, "acquire_lease", load_event("acquire_lease.json"))
    lease = json.loads(acquired["body"])["lease"]
    docker_client.containers.get(lease["provider_token"]).exec_run(["sh", "-c", "echo ready > /proc/1/fd/1"])

    logs = invoke(functions, "lease_logs", load_event("lease_logs.json", lease["lease_id"]))
    assert (logs["statusCode"], logs["body"]) == (200, "ready\n")

    released = invoke(functions, "release_owner_leases", load_event("release_owner_leases.json"))
    assert released["statusCode"] == 200
    assert lease["lease_id"] in [item["lease_id"] for item in json.loads(released["body"])["released"]]
    assert not docker_client.containers.list(all=True, filters={"name": f"lease-{lease['lease_id']}"})


def test_the_callers_lifecycle_through_the_event_files(functions: dict[str, ModuleType]) -> None:
    """In token mode, as the authorizer's context says: the bootstrap operator adds, lists, rotates, removes."""
    token_mode = Settings.from_environ({**os.environ, "AUTH_MODE": "token"})
    names = ("create_caller", "list_callers", "rotate_caller_token", "delete_caller", "authorizer")
    with pytest.MonkeyPatch.context() as patch:
        for name in names:
            patch.setattr(functions[name], "runtime", Runtime(token_mode))
        created = invoke(functions, "create_caller", load_event("create_caller.json"))
        assert created["statusCode"] == 201
        token = json.loads(created["body"])["token"]
        asked = load_event("authorizer_token.json")
        asked["headers"]["authorization"] = f"Bearer {token}"
        assert invoke(functions, "authorizer", asked)["context"]["caller"] == "anim"
        listed = json.loads(invoke(functions, "list_callers", load_event("list_callers.json"))["body"])
        assert [caller["name"] for caller in listed["callers"]] == ["anim"]
        assert invoke(functions, "rotate_caller_token", load_event("rotate_caller_token.json"))["statusCode"] == 201
        assert invoke(functions, "delete_caller", load_event("delete_caller.json"))["statusCode"] == 204
        assert invoke(functions, "authorizer", asked)["context"] == {"refused": "unknown, revoked or expired token"}


def test_the_token_authorizer_event_with_an_unknown_token_is_let_through_refused(
    functions: dict[str, ModuleType],
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            functions["authorizer"], "runtime", Runtime(Settings.from_environ({**os.environ, "AUTH_MODE": "token"}))
        )
        answer = invoke(functions, "authorizer", load_event("authorizer_token.json"))
    assert answer == {"isAuthorized": True, "context": {"refused": "unknown, revoked or expired token"}}


def test_the_events_and_webhooks_through_the_event_files(functions: dict[str, ModuleType]) -> None:
    """A lease's activation through the events function, its history read back, and a delivery to a receiver
    that verifies it; then the webhook listed and removed."""
    acquired = invoke(functions, "acquire_lease", load_event("acquire_lease.json"))
    lease_id = json.loads(acquired["body"])["lease"]["lease_id"]
    with receiving() as receiver:
        created = load_event("create_webhook.json")
        created["body"] = json.dumps({"url": receiver.url, "events": ["lease.ready"], "owner_id": "anim-service"})
        made = invoke(functions, "create_webhook", created)
        assert made["statusCode"] == 201
        webhook = json.loads(made["body"])
        receiver.secret = webhook["secret"]

        assert invoke(functions, "lifecycle_events", load_event("lifecycle_events.json", lease_id)) == {
            "batchItemFailures": []
        }
        read = invoke(functions, "lease_events", load_event("lease_events.json", lease_id))
        assert [event["type"] for event in json.loads(read["body"])["events"]] == ["lease.active", "lease.ready"]

        delivery = load_event("deliver_webhooks.json", lease_id)
        message = json.loads(delivery["Records"][0]["body"])
        message["webhook_id"] = webhook["webhook"]["id"]
        delivery["Records"][0]["body"] = json.dumps(message)
        assert invoke(functions, "deliver_webhooks", delivery) == {"batchItemFailures": []}
        assert [(got.verified, got.event["type"]) for got in receiver.accepted()] == [(True, "lease.ready")]

    listed = json.loads(invoke(functions, "list_webhooks", load_event("list_webhooks.json"))["body"])
    assert [found["id"] for found in listed["webhooks"]] == [webhook["webhook"]["id"]]
    removal = load_event("delete_webhook.json")
    removal["pathParameters"]["webhook_id"] = webhook["webhook"]["id"]
    assert invoke(functions, "delete_webhook", removal)["statusCode"] == 204
