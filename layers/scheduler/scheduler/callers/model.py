"""The caller of a request, one value every access rule reads (`scheduler.callers.access`).

It is built at the HTTP edge from what API Gateway established — the token authorizer's context, or the
SigV4 principal — and never from a value the request carries. In `secret` mode every caller holds the same
secret and the owners a request names are taken on its word (`asserted`): today's behaviour.

Pure and cheap to import: every API function imports it.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from enum import StrEnum
from typing import NamedTuple

from scheduler import wire


class Role(StrEnum):
    SERVICE = "service"  # acts only for its owners
    OPERATOR = "operator"  # reads and releases everything, may act for any owner
    VIEWER = "viewer"  # reads every owner's leases, logs and usage; changes nothing


class Caller(NamedTuple):
    """Who is calling (`_replace` gives a changed copy)."""

    name: str  # the registry's name; `shared-secret` in secret mode; an operator principal's ARN in iam mode
    role: Role
    owners: tuple[str, ...] = ()  # the owner ids it may act as, the first its default; () for operator/viewer: any
    asserted: bool = False  # secret mode: the request's own owner_id / X-Lease-Owner are believed

    @property
    def default_owner(self) -> str | None:
        """The owner a lease gets when the acquire names none."""
        return self.owners[0] if self.owners else None


SHARED_SECRET = Caller("shared-secret", Role.SERVICE, asserted=True)
BOOTSTRAP_OPERATOR = Caller("admin", Role.OPERATOR)
# The service itself, where no request is: what its scheduled and stream functions record as a lease's ended_by.
SWEEP = Caller("sweep", Role.OPERATOR)
TTL_STREAM = Caller("ttl-stream", Role.OPERATOR)
RECONCILER = Caller("reconciler", Role.OPERATOR)

# Names the service writes itself where a caller's name goes (a lease's created_by and ended_by): no caller
# may take one, so that an audit line never reads as another actor's (openapi.yaml's CallerNameValue excludes them).
RESERVED_NAMES = frozenset(wire.CALLER_REQUEST["name"]["excluded"])
# An assumed-role session: `arn:aws:sts::<account>:assumed-role/<role>/<session>` (a role's path is not in it).
_SESSION = r"arn:(aws(?:-[a-z]+)*):sts::([0-9]{12}):assumed-role/([^/]+)/[!-~]+"
_ROLE = r"arn:(aws(?:-[a-z]+)*):iam::([0-9]{12}):role/(?:[!-~]*/)?([^/]+)"


def is_principal_arn(value: str) -> bool:
    """An IAM user or role ARN (what OPERATOR_PRINCIPALS and a caller's principal_arn name)."""
    # An IAM user or role (what API Gateway reports as `userArn` for a SigV4 request by one), as openapi.yaml says.
    return re.fullmatch(wire.CALLER_REQUEST["principal_arn"]["pattern"], value) is not None


def principal_key(arn: str) -> str:
    """The IAM identity an ARN stands for, as the registry keys it: an assumed-role session is its role, and a
    role is named without its path (a session ARN carries the role's name only, and a role's name is unique in
    its account whatever its path): `arn:aws:iam::<account>:role/<name>`. A user ARN is itself."""
    found = re.fullmatch(_SESSION, arn) or re.fullmatch(_ROLE, arn)
    if found is None:
        return arn
    partition, account, role = found.groups()
    return f"arn:{partition}:iam::{account}:role/{role}"


class CallerRecord(NamedTuple):
    """A caller as the registry holds it and `GET /v1/callers` shows it (no token, no hash)."""

    name: str
    role: Role
    owners: tuple[str, ...]
    created_at: int  # epoch seconds
    created_by: str
    principal_arn: str | None = None

    @property
    def caller(self) -> Caller:
        return Caller(self.name, self.role, self.owners)

    def wire(self) -> dict[str, object]:
        """The caller as `openapi.yaml` (schema Caller) shows it."""
        return {
            "name": self.name,
            "role": self.role.value,
            "owners": list(self.owners),
            "principal_arn": self.principal_arn,
            "created_at": datetime.fromtimestamp(self.created_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "created_by": self.created_by,
        }
