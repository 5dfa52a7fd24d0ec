"""Who is calling, at the edge: the token authorizer, the 401 every function answers for a refused credential,
the IAM principal's caller (and the registry reads it costs), and the AuthRefused line and metric."""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from devstack.dynamodb import DynamoDBClient
from scheduler.api.identity import UNAUTHORIZED, Identity
from scheduler.callers.model import CallerRecord, Role
from scheduler.callers.tokens import new_token, token_hash
from scheduler.config import Secret, Settings
from scheduler.runtime import Runtime
from scheduler.store import LeaseStore
from scheduler.store.callers import CallerStore
from tests.support.metrics import RecordedMetrics
from tests.support.tables import make_table

from ..builders import NOW
from .conftest import Function, event, runtime_of

FUNCTIONS = Path(__file__).resolve().parents[3] / "functions"
ROLE_ARN = "arn:aws:iam::123456789012:role/anim"
OPERATOR_ARN = "arn:aws:iam::123456789012:role/ops"

pytestmark = pytest.mark.dynamodb_only("the callers registry is a DynamoDB table of its own")


@pytest.fixture
def callers_table(dynamodb: DynamoDBClient, backend: str) -> Iterator[str]:
    name = make_table(dynamodb, backend, "callers", "CallersTable")
    yield name
    dynamodb.delete_table(TableName=name)


@pytest.fixture
def registry(callers_table: str, dynamodb: DynamoDBClient) -> CallerStore:
    return CallerStore(callers_table, dynamodb)


@pytest.fixture
def anim_token(registry: CallerStore) -> str:
    token = new_token()
    created = int(NOW.timestamp())
    record = CallerRecord("anim", Role.SERVICE, ("anim-service",), created, "admin", ROLE_ARN)
    registry.create(record, token_hash(token))
    return token


def moded(store: LeaseStore, callers_table: str, mode: str, **settings: Any) -> Runtime:
    return runtime_of(store, auth_mode=mode, callers_table=callers_table, **settings)


def token_context(function: Callable[[str, Runtime | None], Function], runtime: Runtime, token: str) -> Any:
    """What the token authorizer hands API Gateway for `Authorization: Bearer <token>`."""
    sample = event("authorizer_token")
    sample["headers"]["authorization"] = f"Bearer {token}"
    return function("authorizer", runtime)(sample)


def with_context(name: str, authorizer: dict[str, Any], **changes: Any) -> dict[str, Any]:
    sample = event(name, **changes)
    sample["requestContext"] = {**sample["requestContext"], "authorizer": authorizer}
    return sample


# --- the token authorizer ------------------------------------------------------------------------


def test_a_callers_token_is_authorized_with_the_caller_in_the_context(
    function: Any, store: LeaseStore, callers_table: str, anim_token: str
) -> None:
    answer = token_context(function, moded(store, callers_table, "token"), anim_token)
    assert answer == {
        "isAuthorized": True,
        "context": {"caller": "anim", "role": "service", "owners": '["anim-service"]'},
    }


@pytest.mark.parametrize(
    "header",
    [
        "Bearer oas_" + "A" * 43,  # unknown (a token of the right shape no one was given)
        "Bearer oas_short",  # malformed
        "Basic dXNlcjpwYXNz",  # not a bearer credential
        "Bearer",  # nothing after the scheme
    ],
)
def test_any_other_credential_is_let_through_refused(
    function: Any, store: LeaseStore, callers_table: str, anim_token: str, header: str
) -> None:
    sample = event("authorizer_token")
    sample["headers"]["authorization"] = header
    answer = function("authorizer", moded(store, callers_table, "token"))(sample)
    assert answer["isAuthorized"] is True and set(answer["context"]) == {"refused"}


def test_a_revoked_token_is_refused(
    function: Any, store: LeaseStore, callers_table: str, registry: CallerStore, anim_token: str
) -> None:
    registry.revoke("anim")
    answer = token_context(function, moded(store, callers_table, "token"), anim_token)
    assert answer["context"] == {"refused": "unknown, revoked or expired token"}


def test_the_bootstrap_token_is_the_operator_admin(function: Any, store: LeaseStore, callers_table: str) -> None:
    runtime = moded(store, callers_table, "token", bootstrap_token=Secret("bootstrap-0123456789"))
    answer = token_context(function, runtime, "bootstrap-0123456789")
    assert answer["context"] == {"caller": "admin", "role": "operator", "owners": "[]"}


def test_without_a_bootstrap_token_no_other_credential_is_anyone(
    function: Any, store: LeaseStore, callers_table: str
) -> None:
    answer = token_context(function, moded(store, callers_table, "token"), "bootstrap-0123456789")
    assert answer["context"] == {"refused": "no token of this service"}


def test_in_secret_mode_the_authorizer_checks_the_shared_secret_as_before(function: Any) -> None:
    assert function("authorizer")(event("authorizer")) == {"isAuthorized": True}


# --- the 401 -------------------------------------------------------------------------------------


REFUSALS = ["unknown, revoked or expired token", "not a bearer credential", "no token of this service"]


@pytest.mark.parametrize("reason", REFUSALS)
def test_a_refused_credential_is_one_401_whatever_the_reason(
    function: Any, store: LeaseStore, callers_table: str, reason: str
) -> None:
    runtime = moded(store, callers_table, "token")
    status, body = function("list_leases", runtime).http(with_context("list_leases", {"lambda": {"refused": reason}}))
    assert (status, body) == (401, {"error": {"code": "unauthorized", "message": UNAUTHORIZED}})


def test_a_request_without_the_authorizers_context_is_refused_in_token_mode(
    function: Any, store: LeaseStore, callers_table: str
) -> None:
    runtime = moded(store, callers_table, "token")
    assert function("get_lease", runtime).http(with_context("get_lease", {}))[0] == 401


def test_a_refusal_is_one_log_line_and_an_auth_refused_metric(
    function: Any, store: LeaseStore, callers_table: str, caplog: pytest.LogCaptureFixture
) -> None:
    metrics = RecordedMetrics()
    runtime = moded(store, callers_table, "token", metrics=metrics)
    sample = with_context("get_lease", {"lambda": {"refused": "unknown, revoked or expired token"}})
    sample["headers"]["authorization"] = "Bearer oas_this-token-must-never-be-logged-0123456789abc"
    function("get_lease", runtime)(sample)
    refused = [record for record in caplog.records if record.getMessage() == "authorization refused"]
    assert len(refused) == 1
    assert {key: getattr(refused[0], key) for key in ("caller", "route", "lease_id", "reason", "status")} == {
        "caller": "unknown credential",
        "route": "GET /v1/lease/{lease_id}",
        "lease_id": "3f2b8c1e-6d4a-4f7b-9c2e-1a5d7e9b0c42",
        "reason": "unknown, revoked or expired token",
        "status": 401,
    }
    assert metrics.of("AuthRefused") == [{"status": "401", "value": 1}]
    assert not [record for record in caplog.records if "never-be-logged" in json.dumps(vars(record), default=str)]


def test_a_known_token_reaches_the_handler(
    function: Any, store: LeaseStore, callers_table: str, anim_token: str
) -> None:
    runtime = moded(store, callers_table, "token")
    context = token_context(function, runtime, anim_token)["context"]
    assert function("list_leases", runtime).http(with_context("list_leases", {"lambda": context}))[0] == 200


def test_every_http_function_goes_through_the_edge_with_a_runtime() -> None:
    for app in sorted(FUNCTIONS.glob("*/app.py")):
        tree = ast.parse(app.read_text())
        handler = next(
            node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "lambda_handler"
        )
        decorators = [ast.unparse(decorator) for decorator in handler.decorator_list]
        takes_requests = "HttpRequest" in ast.unparse(handler.args)
        if app.parent.name in ("health", "authorizer") or not takes_requests:
            assert "http_endpoint" not in decorators
            continue
        assert decorators[-1] == "http_endpoint", app  # innermost: the edge runs before the handler
        assigned = {
            target.id
            for node in tree.body
            if isinstance(node, ast.Assign)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        assert "runtime" in assigned, app


# --- iam mode ------------------------------------------------------------------------------------


class CountingClient:
    """A DynamoDB client that counts the reads it is asked for."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.reads = 0

    def get_item(self, **request: Any) -> Any:
        self.reads += 1
        return self._client.get_item(**request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def iam(arn: str) -> dict[str, Any]:
    return {"iam": {"userArn": arn, "accessKey": "AKIA0", "accountId": "123456789012"}}


@pytest.mark.parametrize("arn", [ROLE_ARN, "arn:aws:sts::123456789012:assumed-role/anim/i-0abc"])
def test_a_mapped_principal_is_its_caller(
    function: Any, store: LeaseStore, callers_table: str, anim_token: str, arn: str
) -> None:
    runtime = moded(store, callers_table, "iam")
    assert function("list_leases", runtime).http(with_context("list_leases", iam(arn)))[0] == 200


def test_an_unmapped_principal_is_forbidden(function: Any, store: LeaseStore, callers_table: str) -> None:
    runtime = moded(store, callers_table, "iam")
    status, body = function("list_leases", runtime).http(with_context("list_leases", iam(ROLE_ARN)))
    assert (status, body["error"]["code"]) == (403, "forbidden")


def test_an_operator_principal_needs_no_entry(function: Any, store: LeaseStore, callers_table: str) -> None:
    runtime = moded(store, callers_table, "iam", operator_principals=(OPERATOR_ARN,))
    sample = with_context("list_callers", iam("arn:aws:sts::123456789012:assumed-role/ops/alice"))
    assert function("list_callers", runtime).http(sample) == (200, {"callers": []})


def test_no_principal_in_iam_mode_is_refused(function: Any, store: LeaseStore, callers_table: str) -> None:
    runtime = moded(store, callers_table, "iam")
    assert function("list_leases", runtime).http(with_context("list_leases", {}))[0] == 401


@pytest.mark.parametrize(("cache_seconds", "reads"), [(60, 1), (0, 5)])
def test_a_principals_caller_is_read_once_per_cache_period(
    dynamodb: DynamoDBClient, callers_table: str, anim_token: str, cache_seconds: int, reads: int
) -> None:
    counting = CountingClient(dynamodb)
    settings = Settings(auth_mode="iam", auth_cache_seconds=cache_seconds, callers_table=callers_table)
    identity = Identity(settings, lambda: CallerStore(callers_table, counting))
    for _ in range(5):
        assert identity.caller(iam(ROLE_ARN)).name == "anim"
    assert counting.reads == reads


def test_a_removed_principal_is_refused_once_the_cache_period_ends(
    dynamodb: DynamoDBClient, callers_table: str, registry: CallerStore, anim_token: str
) -> None:
    clock = [0.0]
    settings = Settings(auth_mode="iam", auth_cache_seconds=60, callers_table=callers_table)
    identity = Identity(settings, lambda: registry, monotonic=lambda: clock[0])
    identity.caller(iam(ROLE_ARN))
    registry.revoke("anim")
    clock[0] = 59.0
    assert identity.caller(iam(ROLE_ARN)).name == "anim"  # remembered, as the contract allows
    clock[0] = 60.5
    with pytest.raises(Exception, match="no caller of this service"):
        identity.caller(iam(ROLE_ARN))


def test_a_token_authorization_reads_the_registry_once(
    function: Any, store: LeaseStore, callers_table: str, dynamodb: DynamoDBClient, anim_token: str
) -> None:
    """Without API Gateway's cache every authorization is one GetItem; with it, none (the authorizer is not
    invoked: tests/devstack/test_gateway_auth.py shows the local gateway caching it as API Gateway does)."""
    counting = CountingClient(dynamodb)
    runtime = Runtime(
        Settings(auth_mode="token", callers_table=callers_table), callers=CallerStore(callers_table, counting)
    )
    for _ in range(3):
        token_context(function, runtime, anim_token)
    assert counting.reads == 3
