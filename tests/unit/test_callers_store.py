"""The callers registry (`scheduler.store.callers`) on both DynamoDB implementations: tokens kept only as
hashes, looked up in one read; rotation with a grace period; revocation of every token; IAM principals."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from devstack.dynamodb import DynamoDBClient
from scheduler.callers.model import Caller, CallerRecord, Role
from scheduler.callers.tokens import new_token, token_hash
from scheduler.errors import Conflict, NotFound
from scheduler.store.callers import CallerStore
from tests.support.tables import make_table

NOW = 1_796_011_200
ANIM = CallerRecord("anim", Role.SERVICE, ("anim-service", "anim-batch"), NOW, "admin")
ROLE_ARN = "arn:aws:iam::123456789012:role/anim-service"
SESSION_ARN = "arn:aws:sts::123456789012:assumed-role/anim-service/i-0abc"

pytestmark = pytest.mark.dynamodb_only("the callers registry is a DynamoDB table of its own")


@pytest.fixture
def callers(dynamodb: DynamoDBClient, backend: str) -> Iterator[CallerStore]:
    name = make_table(dynamodb, backend, "callers", "CallersTable")
    yield CallerStore(name, dynamodb)
    dynamodb.delete_table(TableName=name)


def created(callers: CallerStore, record: CallerRecord = ANIM) -> str:
    token = new_token()
    callers.create(record, token_hash(token))
    return token


def test_a_token_finds_its_caller(callers: CallerStore) -> None:
    token = created(callers)
    assert callers.by_token(token_hash(token), NOW) == Caller("anim", Role.SERVICE, ("anim-service", "anim-batch"))


def test_an_unknown_token_finds_no_one(callers: CallerStore) -> None:
    created(callers)
    assert callers.by_token(token_hash(new_token()), NOW) is None


def test_the_table_holds_no_token_only_its_hash(callers: CallerStore, dynamodb: DynamoDBClient) -> None:
    token = created(callers)
    stored = json.dumps(dynamodb.scan(TableName=callers.table_name)["Items"])
    assert token not in stored and token.removeprefix("oas_") not in stored
    assert token_hash(token) in stored


def test_a_caller_is_listed_without_its_tokens(callers: CallerStore) -> None:
    created(callers)
    created(callers, ANIM._replace(name="audit", role=Role.VIEWER, owners=()))
    assert callers.list() == [ANIM, ANIM._replace(name="audit", role=Role.VIEWER, owners=())]


def test_a_taken_name_is_a_conflict(callers: CallerStore) -> None:
    created(callers)
    with pytest.raises(Conflict, match="a caller named anim exists"):
        created(callers, ANIM._replace(role=Role.OPERATOR))
    assert callers.get("anim") == ANIM


def test_a_rotated_token_works_and_the_old_one_until_its_grace_ends(callers: CallerStore) -> None:
    old = created(callers)
    new = new_token()
    callers.rotate("anim", token_hash(new), 3600, NOW)
    assert callers.by_token(token_hash(new), NOW + 7200) is not None
    assert callers.by_token(token_hash(old), NOW + 3599) is not None
    assert callers.by_token(token_hash(old), NOW + 3600) is None


def test_a_rotation_without_grace_stops_the_old_token_at_once(callers: CallerStore) -> None:
    old = created(callers)
    callers.rotate("anim", token_hash(new_token()), 0, NOW)
    assert callers.by_token(token_hash(old), NOW) is None


def test_a_second_rotation_never_lengthens_an_earlier_grace(callers: CallerStore) -> None:
    first = created(callers)
    callers.rotate("anim", token_hash(new_token()), 60, NOW)
    callers.rotate("anim", token_hash(new_token()), 3600, NOW)
    assert callers.by_token(token_hash(first), NOW + 60) is None


def test_rotating_an_unknown_caller_is_not_found(callers: CallerStore) -> None:
    token = new_token()
    with pytest.raises(NotFound):
        callers.rotate("ghost", token_hash(token), 0, NOW)
    assert callers.by_token(token_hash(token), NOW) is None


def test_a_revoked_caller_loses_every_token(callers: CallerStore) -> None:
    first = created(callers)
    second, third = new_token(), new_token()
    callers.rotate("anim", token_hash(second), 3600, NOW)
    callers.rotate("anim", token_hash(third), 3600, NOW)
    assert callers.revoke("anim") == ANIM
    assert [callers.by_token(token_hash(token), NOW) for token in (first, second, third)] == [None, None, None]
    assert callers.list() == []


def test_revoking_an_unknown_caller_is_not_found(callers: CallerStore) -> None:
    with pytest.raises(NotFound, match="caller ghost not found"):
        callers.revoke("ghost")


def test_a_revoked_name_may_be_given_again(callers: CallerStore) -> None:
    old = created(callers)
    callers.revoke("anim")
    new = created(callers)
    assert callers.by_token(token_hash(old), NOW) is None
    assert callers.by_token(token_hash(new), NOW) is not None


def test_a_principal_finds_its_caller_by_role_or_session(callers: CallerStore) -> None:
    callers.create(ANIM._replace(principal_arn=ROLE_ARN), None)
    expected = Caller("anim", Role.SERVICE, ("anim-service", "anim-batch"))
    assert callers.by_principal(ROLE_ARN) == callers.by_principal(SESSION_ARN) == expected


def test_a_role_with_a_path_is_found_by_its_sessions(callers: CallerStore) -> None:
    callers.create(ANIM._replace(principal_arn="arn:aws:iam::123456789012:role/services/anim-service"), None)
    assert callers.by_principal(SESSION_ARN) is not None


def test_an_unmapped_principal_finds_no_one(callers: CallerStore) -> None:
    callers.create(ANIM._replace(principal_arn=ROLE_ARN), None)
    assert callers.by_principal("arn:aws:iam::123456789012:user/someone") is None


def test_a_principal_is_one_callers_only(callers: CallerStore) -> None:
    callers.create(ANIM._replace(principal_arn=ROLE_ARN), None)
    with pytest.raises(Conflict, match="already another caller's"):
        callers.create(ANIM._replace(name="other", principal_arn=ROLE_ARN), None)
    assert callers.by_principal(ROLE_ARN).name == "anim"  # type: ignore[union-attr]


def test_a_name_taken_leaves_the_principal_unmapped(callers: CallerStore) -> None:
    created(callers)
    with pytest.raises(Conflict):
        callers.create(ANIM._replace(principal_arn=ROLE_ARN), None)
    assert callers.by_principal(ROLE_ARN) is None


def test_a_revoked_caller_loses_its_principal(callers: CallerStore) -> None:
    callers.create(ANIM._replace(principal_arn=ROLE_ARN), None)
    callers.revoke("anim")
    assert callers.by_principal(SESSION_ARN) is None
