"""Managing the callers registry (`POST/GET /v1/callers`, `POST /v1/callers/{name}/rotate`,
`DELETE /v1/callers/{name}`): the requests, validated as strictly as the contract (`openapi.yaml`) describes
them, and the use cases. Operators only (`access.require_operator`, checked by the edge's caller first).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple, Self

from scheduler import wire
from scheduler.callers.model import Caller, CallerRecord, Role
from scheduler.callers.tokens import new_token, token_hash
from scheduler.clock import Clock
from scheduler.errors import Conflict, NotFound, invalid_input
from scheduler.inputs import fields_of

if TYPE_CHECKING:
    from scheduler.store.callers import CallerStore

MAX_GRACE_SECONDS = wire.ROTATE_REQUEST["grace_seconds"]["maximum"]


class CallerRequest(NamedTuple):
    """Body of `POST /v1/callers`."""

    name: str
    owners: tuple[str, ...]
    role: Role
    principal_arn: str | None = None

    @classmethod
    def parse(cls, data: object) -> Self:
        """From the decoded JSON body; InvalidRequest naming each problem otherwise."""
        rules = wire.CALLER_REQUEST
        body = fields_of(data, "request body", rules)
        name = body.text("name", rules["name"])
        role = body.required_choice("role", rules["role"], Role)
        owners = body.text_list("owners", rules["owners"])
        if role is Role.SERVICE and owners == ():
            body.problem(
                "owners", "List should have at least 1 item after validation, not 0 (a service acts for its owners)"
            )
        principal = body.text("principal_arn", rules["principal_arn"])
        body.check("request body")
        assert name is not None and role is not None and owners is not None  # noqa: S101 - check() refused  # nosec B101
        return cls(name=name, owners=owners, role=role, principal_arn=principal)


class RotateRequest(NamedTuple):
    """Body of `POST /v1/callers/{name}/rotate`."""

    grace_seconds: int

    @classmethod
    def parse(cls, data: object) -> Self:
        """From the decoded JSON body; InvalidRequest naming each problem otherwise."""
        rules = wire.ROTATE_REQUEST
        body = fields_of(data, "request body", rules)
        grace = body.strict_int("grace_seconds", rules["grace_seconds"])
        if isinstance(data, dict) and data.get("grace_seconds") is None:  # absent or null
            body.problem(
                "grace_seconds", "Field required" if "grace_seconds" not in data else "Input should be a valid integer"
            )
        body.check("request body")
        assert grace is not None  # noqa: S101 - check() refused a missing one  # nosec B101
        return cls(grace_seconds=grace)


def caller_name(value: str) -> str:
    """A `{name}` path parameter; a value no caller can have names none (404)."""
    if not re.fullmatch(wire.CALLER_REQUEST["name"]["pattern"], value):
        raise NotFound(f"caller {value[:63]} not found")
    return value


def add_caller(
    request: CallerRequest, operator: Caller, store: CallerStore, auth_mode: str, clock: Clock
) -> tuple[CallerRecord, str | None]:
    """The caller, added; its first token (token mode only: in iam mode it signs, and in secret mode no caller
    calls) to show once. In iam mode a caller is the principal it signs as: it must name one."""
    if auth_mode == "iam" and request.principal_arn is None:
        problem = "Field required (AUTH_MODE=iam: a caller is the IAM principal it signs as)"
        raise invalid_input("request body", [{"field": "principal_arn", "problem": problem}])
    record = CallerRecord(
        name=request.name,
        role=request.role,
        owners=request.owners,
        created_at=int(clock().timestamp()),
        created_by=operator.name,
        principal_arn=request.principal_arn,
    )
    token = new_token() if auth_mode == "token" else None
    store.create(record, token_hash(token) if token else None)
    return record, token


def rotate_token(name: str, grace_seconds: int, store: CallerStore, auth_mode: str, clock: Clock) -> str:
    """A new token for the caller (shown once); its others keep working `grace_seconds` more."""
    if auth_mode != "token":
        raise Conflict(f"AUTH_MODE={auth_mode}: callers have no tokens to rotate (AUTH_MODE=token gives them one)")
    token = new_token()
    store.rotate(name, token_hash(token), grace_seconds, int(clock().timestamp()))
    return token
