"""Managing the callers registry (`POST/GET /v1/callers`, `POST /v1/callers/{name}/rotate`,
`DELETE /v1/callers/{name}`): the requests, validated as strictly as the contract (`openapi.yaml`) describes
them, and the use cases. Operators only (`access.require_operator`, checked by the edge's caller first).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple, Self

from scheduler.callers.model import (
    MAX_OWNERS,
    NAME_PATTERN,
    PRINCIPAL_ARN_PATTERN,
    RESERVED_NAMES,
    Caller,
    CallerRecord,
    Role,
)
from scheduler.callers.tokens import new_token, token_hash
from scheduler.clock import Clock
from scheduler.errors import Conflict, NotFound
from scheduler.inputs import Fields, fields_of, is_text
from scheduler.models import MAX_LABEL_CHARS, OWNER_ID

if TYPE_CHECKING:
    from scheduler.store.callers import CallerStore

NAME = re.compile(NAME_PATTERN.removeprefix("^").removesuffix("$"))
PRINCIPAL_ARN = re.compile(PRINCIPAL_ARN_PATTERN.removeprefix("^").removesuffix("$"))
MAX_GRACE_SECONDS = 7 * 24 * 3600
_MAX_ARN_CHARS = 1024


class CallerRequest(NamedTuple):
    """Body of `POST /v1/callers`."""

    name: str
    owners: tuple[str, ...]
    role: Role
    principal_arn: str | None = None

    @classmethod
    def parse(cls, data: object, auth_mode: str) -> Self:
        """From the decoded JSON body; InvalidRequest naming each problem otherwise."""
        body = fields_of(data, "request body", cls._fields)
        name = body.text("name", max_length=63, pattern=NAME, required=True)
        if name in RESERVED_NAMES:
            body.problem("name", f"Value error, {name} is a name the service writes itself; choose another")
        role = body.required_choice("role", Role)
        owners = _owners(body, data)
        if role is Role.SERVICE and owners == ():
            body.problem(
                "owners", "List should have at least 1 item after validation, not 0 (a service acts for its owners)"
            )
        if auth_mode == "iam" and isinstance(data, dict) and data.get("principal_arn") is None:
            body.problem("principal_arn", "Field required (AUTH_MODE=iam: a caller is the IAM principal it signs as)")
        principal = body.text("principal_arn", max_length=_MAX_ARN_CHARS, pattern=PRINCIPAL_ARN)
        body.check("request body")
        assert name is not None and role is not None and owners is not None  # noqa: S101 - check() refused  # nosec B101
        return cls(name=name, owners=owners, role=role, principal_arn=principal)


def _owners(body: Fields, data: object) -> tuple[str, ...] | None:
    """`owners`: a list of distinct owner ids (a lease's owner_id rules), at most MAX_OWNERS."""
    if not isinstance(data, dict) or "owners" not in data:
        body.problem("owners", "Field required")
        return None
    value = data["owners"]
    if not isinstance(value, list):
        body.problem("owners", "Input should be a valid list")
        return None
    if len(value) > MAX_OWNERS:
        body.problem("owners", f"List should have at most {MAX_OWNERS} items after validation, not {len(value)}")
        return None
    found: list[str] = []
    for index, owner in enumerate(value):
        if not is_text(owner):
            body.problem(f"owners.{index}", "Input should be a valid string")
        elif len(owner) > MAX_LABEL_CHARS:
            body.problem(f"owners.{index}", f"String should have at most {MAX_LABEL_CHARS} characters")
        elif not OWNER_ID.fullmatch(owner):
            body.problem(f"owners.{index}", f"String should match pattern '^{OWNER_ID.pattern}$'")
        elif owner in found:
            body.problem(f"owners.{index}", f"Value error, {owner} is listed twice")
        else:
            found.append(owner)
    return tuple(found)


class RotateRequest(NamedTuple):
    """Body of `POST /v1/callers/{name}/rotate`."""

    grace_seconds: int

    @classmethod
    def parse(cls, data: object) -> Self:
        """From the decoded JSON body; InvalidRequest naming each problem otherwise."""
        body = fields_of(data, "request body", cls._fields)
        grace = body.strict_int("grace_seconds", 0, MAX_GRACE_SECONDS)
        if isinstance(data, dict) and data.get("grace_seconds") is None:  # absent or null
            body.problem(
                "grace_seconds", "Field required" if "grace_seconds" not in data else "Input should be a valid integer"
            )
        body.check("request body")
        assert grace is not None  # noqa: S101 - check() refused a missing one  # nosec B101
        return cls(grace_seconds=grace)


def caller_name(value: str) -> str:
    """A `{name}` path parameter; a value no caller can have names none (404)."""
    if not NAME.fullmatch(value):
        raise NotFound(f"caller {value[:63]} not found")
    return value


def add_caller(
    request: CallerRequest, operator: Caller, store: CallerStore, auth_mode: str, clock: Clock
) -> tuple[CallerRecord, str | None]:
    """The caller, added; its first token (token mode only: in iam mode it signs, and in secret mode no caller
    calls) to show once."""
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
