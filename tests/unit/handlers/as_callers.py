"""Requests as API Gateway hands them on in `token` and `iam` modes, for the callers the rules' tests use.

`token`: the token authorizer's context (`requestContext.authorizer.lambda`, what `token_context` writes for a
known token). `iam`: the SigV4 principal (`requestContext.authorizer.iam`), an assumed-role session of the
caller's role, which the function maps through the registry (here a stand-in holding the callers' role ARNs:
the registry's own lookup is tested in test_callers_edge.py and test_callers_store.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast

from scheduler.api.identity import Identity, token_context
from scheduler.callers.model import Caller, Role
from scheduler.runtime import Runtime
from scheduler.store.callers import CallerStore

from .conftest import Function, with_header

MODES = ("token", "iam")
ACCOUNT = "123456789012"

ANIM = Caller("anim", Role.SERVICE, ("anim-service", "anim-batch"))  # a service of two owners
LIVE = Caller("live", Role.SERVICE, ("live-control",))  # another service: the owner ANIM must never reach
OPS = Caller("ops", Role.OPERATOR)
AUDIT = Caller("audit", Role.VIEWER)
CALLERS = (ANIM, LIVE, OPS, AUDIT)


def role_arn(caller: Caller) -> str:
    return f"arn:aws:iam::{ACCOUNT}:role/{caller.name}"


class Principals:
    """The registry's principals, as `Identity` asks for them in iam mode."""

    def by_principal(self, arn: str) -> Caller | None:
        return next((caller for caller in CALLERS if role_arn(caller) == arn), None)


def with_principals(runtime: Runtime) -> Runtime:
    """`runtime` (its AUTH_MODE set), its iam principals mapped to CALLERS."""
    runtime.identity = Identity(runtime.settings, lambda: cast(CallerStore, Principals()))
    return runtime


def as_caller(sample: dict[str, Any], caller: Caller, mode: str, *, owner_header: str | None = None) -> dict[str, Any]:
    """`sample` as sent by `caller` in `mode`: no shared secret, `X-Lease-Owner` only when given."""
    sent = with_header(with_header(sample, "x-internal-secret", None), "x-lease-owner", owner_header)
    if mode == "token":
        authorizer: dict[str, Any] = {"lambda": token_context(caller)}
    else:
        session = f"arn:aws:sts::{ACCOUNT}:assumed-role/{caller.name}/session-1"
        authorizer = {"iam": {"userArn": session, "accessKey": "ASIAEXAMPLE", "accountId": ACCOUNT}}
    return {**sent, "requestContext": {**sent["requestContext"], "authorizer": authorizer}}


class Api:
    """The functions, called as one caller or another in one mode."""

    def __init__(self, function: Callable[[str], Function], mode: str) -> None:
        self._function = function
        self.mode = mode

    def __call__(
        self, caller: Caller, name: str, sample: dict[str, Any], *, owner_header: str | None = None
    ) -> dict[str, Any]:
        """The function's raw answer."""
        answer: dict[str, Any] = self._function(name)(as_caller(sample, caller, self.mode, owner_header=owner_header))
        return answer

    def http(
        self, caller: Caller, name: str, sample: dict[str, Any], *, owner_header: str | None = None
    ) -> tuple[int, Any]:
        """The status and the parsed body."""
        answer = self(caller, name, sample, owner_header=owner_header)
        body = answer.get("body") or "null"
        is_json = answer["headers"]["Content-Type"] == "application/json"
        return answer["statusCode"], json.loads(body) if is_json else body
