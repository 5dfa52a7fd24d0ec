"""The callers registry's routes: operators only, validation as strict as the rest, tokens shown once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from devstack.dynamodb import DynamoDBClient
from scheduler.callers.tokens import token_hash
from scheduler.runtime import Runtime
from scheduler.store import LeaseStore
from scheduler.store.callers import CallerStore
from tests.support.tables import make_table

from .conftest import event, runtime_of

OPERATOR = {"lambda": {"caller": "admin", "role": "operator", "owners": "[]"}}
SERVICE = {"lambda": {"caller": "anim", "role": "service", "owners": '["anim-service"]'}}
VIEWER = {"lambda": {"caller": "audit", "role": "viewer", "owners": "[]"}}
IAM_OPERATOR = {"iam": {"userArn": "arn:aws:iam::123456789012:role/ops", "accountId": "123456789012"}}
ANIM = {"name": "anim", "owners": ["anim-service", "anim-batch"], "role": "service"}

pytestmark = pytest.mark.dynamodb_only("the callers registry is a DynamoDB table of its own")


@pytest.fixture
def callers_table(dynamodb: DynamoDBClient, backend: str) -> Iterator[str]:
    name = make_table(dynamodb, backend, "callers", "CallersTable")
    yield name
    dynamodb.delete_table(TableName=name)


@pytest.fixture
def token_mode(store: LeaseStore, callers_table: str) -> Runtime:
    return runtime_of(store, auth_mode="token", callers_table=callers_table)


@pytest.fixture
def iam_mode(store: LeaseStore, callers_table: str) -> Runtime:
    return runtime_of(
        store, auth_mode="iam", callers_table=callers_table, operator_principals=("arn:aws:iam::123456789012:role/ops",)
    )


def call(
    function: Any, runtime: Runtime, name: str, authorizer: dict[str, Any], body: Any = None, **changes: Any
) -> tuple[int, Any]:
    sample = event(name, **changes)
    sample["requestContext"] = {**sample["requestContext"], "authorizer": authorizer}
    if body is not None:
        sample["body"] = json.dumps(body)
    return function(name, runtime).http(sample)  # type: ignore[no-any-return]


def problems(body: Any) -> dict[str, str]:
    return {problem["field"]: problem["problem"] for problem in body["error"]["details"]["problems"]}


def test_an_operator_adds_a_service_and_sees_its_token_once(function: Any, token_mode: Runtime) -> None:
    status, body = call(function, token_mode, "create_caller", OPERATOR, ANIM)
    assert status == 201
    assert body["caller"] == {
        "name": "anim",
        "role": "service",
        "owners": ["anim-service", "anim-batch"],
        "principal_arn": None,
        "created_at": body["caller"]["created_at"],
        "created_by": "admin",
    }
    assert token_mode.callers.by_token(token_hash(body["token"]), 0) is not None
    _, listed = call(function, token_mode, "list_callers", OPERATOR)
    assert listed == {"callers": [body["caller"]]}  # no token, no hash


@pytest.mark.parametrize("authorizer", [SERVICE, VIEWER])
@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("create_caller", ANIM),
        ("list_callers", None),
        ("rotate_caller_token", {"grace_seconds": 0}),
        ("delete_caller", None),
    ],
)
def test_only_an_operator_manages_callers(
    function: Any, token_mode: Runtime, authorizer: dict[str, Any], name: str, body: Any
) -> None:
    status, answer = call(function, token_mode, name, authorizer, body)
    assert (status, answer["error"]["code"]) == (403, "forbidden")


@pytest.mark.parametrize("name", ["create_caller", "list_callers", "delete_caller"])
def test_in_secret_mode_no_one_manages_callers(function: Any, runtime: Runtime, name: str) -> None:
    status, answer = function(name).http(event(name))
    assert (status, answer["error"]["code"]) == (403, "forbidden")
    assert "AUTH_MODE=secret" in answer["error"]["message"]


def test_every_problem_of_a_caller_is_named(function: Any, token_mode: Runtime) -> None:
    body = {"name": "Anim_1", "owners": ["ok", " padded", 7, "ok"], "role": "boss", "principal_arn": "me", "x": 1}
    status, answer = call(function, token_mode, "create_caller", OPERATOR, body)
    assert status == 400
    assert set(problems(answer)) == {"name", "role", "owners.1", "owners.2", "owners.3", "principal_arn", "x"}


@pytest.mark.parametrize("name", ["admin", "shared-secret", "sweep", "ttl-stream", "reconciler"])
def test_the_services_own_names_are_refused(function: Any, token_mode: Runtime, name: str) -> None:
    status, answer = call(function, token_mode, "create_caller", OPERATOR, {**ANIM, "name": name})
    assert (status, set(problems(answer))) == (400, {"name"})


def test_a_service_needs_an_owner(function: Any, token_mode: Runtime) -> None:
    status, answer = call(function, token_mode, "create_caller", OPERATOR, {**ANIM, "owners": []})
    assert (status, set(problems(answer))) == (400, {"owners"})


def test_a_viewer_may_have_no_owner(function: Any, token_mode: Runtime) -> None:
    body = {"name": "audit", "owners": [], "role": "viewer"}
    assert call(function, token_mode, "create_caller", OPERATOR, body)[0] == 201


@pytest.mark.parametrize("missing", ["name", "owners", "role"])
def test_a_missing_field_is_named(function: Any, token_mode: Runtime, missing: str) -> None:
    body = {key: value for key, value in ANIM.items() if key != missing}
    status, answer = call(function, token_mode, "create_caller", OPERATOR, body)
    assert (status, problems(answer)) == (400, {missing: "Field required"})


def test_a_taken_name_is_a_conflict(function: Any, token_mode: Runtime) -> None:
    call(function, token_mode, "create_caller", OPERATOR, ANIM)
    assert call(function, token_mode, "create_caller", OPERATOR, ANIM)[0] == 409


def test_in_iam_mode_a_caller_is_its_principal_and_has_no_token(function: Any, iam_mode: Runtime) -> None:
    body = {**ANIM, "principal_arn": "arn:aws:iam::123456789012:role/anim"}
    status, answer = call(function, iam_mode, "create_caller", IAM_OPERATOR, body)
    assert (status, "token" in answer, answer["caller"]["created_by"]) == (
        201,
        False,
        "arn:aws:iam::123456789012:role/ops",
    )


def test_in_iam_mode_the_principal_is_required(function: Any, iam_mode: Runtime) -> None:
    status, answer = call(function, iam_mode, "create_caller", IAM_OPERATOR, ANIM)
    assert (status, set(problems(answer))) == (400, {"principal_arn"})


def test_a_rotation_answers_a_new_token_and_keeps_the_old_one_for_its_grace(function: Any, token_mode: Runtime) -> None:
    _, created = call(function, token_mode, "create_caller", OPERATOR, ANIM)
    status, rotated = call(function, token_mode, "rotate_caller_token", OPERATOR, {"grace_seconds": 60})
    assert status == 201 and rotated["token"] != created["token"]
    store: CallerStore = token_mode.callers
    now = int(token_mode.clock().timestamp())
    assert store.by_token(token_hash(created["token"]), now + 59) is not None
    assert store.by_token(token_hash(created["token"]), now + 60) is None
    assert store.by_token(token_hash(rotated["token"]), now + 3600) is not None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "grace_seconds"),
        ({"grace_seconds": -1}, "grace_seconds"),
        ({"grace_seconds": "60"}, "grace_seconds"),
        ({"grace_seconds": None}, "grace_seconds"),
        ({"grace_seconds": 604801}, "grace_seconds"),
        ({"grace_seconds": 0, "now": True}, "now"),
    ],
)
def test_a_bad_grace_is_named(function: Any, token_mode: Runtime, body: dict[str, Any], field: str) -> None:
    call(function, token_mode, "create_caller", OPERATOR, ANIM)
    status, answer = call(function, token_mode, "rotate_caller_token", OPERATOR, body)
    assert (status, set(problems(answer))) == (400, {field})


def test_rotating_in_iam_mode_is_a_conflict(function: Any, iam_mode: Runtime) -> None:
    body = {**ANIM, "principal_arn": "arn:aws:iam::123456789012:role/anim"}
    call(function, iam_mode, "create_caller", IAM_OPERATOR, body)
    status, answer = call(function, iam_mode, "rotate_caller_token", IAM_OPERATOR, {"grace_seconds": 0})
    assert (status, answer["error"]["code"]) == (409, "conflict")


@pytest.mark.parametrize("name", ["ghost", "Not-A-Name", "a" * 64])
@pytest.mark.parametrize(("route", "body"), [("rotate_caller_token", {"grace_seconds": 0}), ("delete_caller", None)])
def test_an_unknown_caller_is_not_found(function: Any, token_mode: Runtime, name: str, route: str, body: Any) -> None:
    status, answer = call(function, token_mode, route, OPERATOR, body, pathParameters={"name": name})
    assert (status, answer["error"]["code"]) == (404, "not_found")


def test_a_removed_caller_is_gone_with_its_tokens(function: Any, token_mode: Runtime) -> None:
    _, created = call(function, token_mode, "create_caller", OPERATOR, ANIM)
    assert call(function, token_mode, "delete_caller", OPERATOR)[0] == 204
    assert token_mode.callers.by_token(token_hash(created["token"]), 0) is None
    assert call(function, token_mode, "list_callers", OPERATOR) == (200, {"callers": []})


def test_the_callers_list_takes_no_query(function: Any, token_mode: Runtime) -> None:
    status, answer = call(function, token_mode, "list_callers", OPERATOR, queryStringParameters={"limit": "5"})
    assert (status, set(problems(answer))) == (400, {"limit"})
