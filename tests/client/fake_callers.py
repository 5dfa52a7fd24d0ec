"""Who is calling, for the fake lease API: the three AUTH_MODEs as the service answers them, and the callers registry.

- `secret`: `X-Internal-Secret` (missing: API Gateway's 401, wrong: its 403);
- `token`: `Authorization: Bearer` (missing: API Gateway's 401; unknown, revoked or past its grace: the service's 401
  `unauthorized`, one answer), the bootstrap operator's token `ADMIN_TOKEN`;
- `iam`: SigV4 verified by the local stack's own verifier (`devstack.sigv4`, as `make run` verifies it) against
  `principals`; an operator principal (`operator_arns`) or the registry's caller for it, else 403 `forbidden`.

The registry's routes answer as openapi.yaml says (operators only; tokens `oas_` and 43 characters, shown once).
"""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

from devstack.sigv4 import Principal, Refusal, SignedRequest, verify

ADMIN_TOKEN = "oas_fake-bootstrap-operator-token-000000000000"
REGION = "us-east-1"
UNAUTHORIZED = "the request's credential is missing, unknown, revoked or malformed"
NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
Answer = tuple[int, dict[str, str], Any]


def _error(status: int, code: str, message: str) -> Answer:
    return status, {}, {"error": {"code": code, "message": message}}


@dataclass
class Registry:
    """The callers and their tokens (token → (caller name, the monotonic time it stops working, or None))."""

    mode: str = "secret"
    principals: dict[str, Principal] = field(default_factory=dict)
    operator_arns: set[str] = field(default_factory=set)
    callers: dict[str, dict[str, Any]] = field(default_factory=dict)
    tokens: dict[str, tuple[str, float | None]] = field(default_factory=dict)

    # --- who is calling --------------------------------------------------------------------------------

    def authenticate(self, request: Any, secret: str) -> tuple[str | None, Answer | None]:
        """(the caller's role, or None in `secret` mode; the refusal, or None)."""
        if self.mode == "token":
            return self._bearer(request.header("Authorization"))
        if self.mode == "iam":
            return self._signed(request)
        given = request.header("X-Internal-Secret")
        if not given:
            return None, (401, {}, {"message": "Unauthorized"})
        return None, None if given == secret else (403, {}, {"message": "Forbidden"})

    def _bearer(self, header: str | None) -> tuple[str | None, Answer | None]:
        if not header:
            return None, (401, {}, {"message": "Unauthorized"})
        scheme, _, token = header.partition(" ")
        if scheme == "Bearer" and token == ADMIN_TOKEN:
            return "operator", None
        name, until = self.tokens.get(token, ("", None)) if scheme == "Bearer" else ("", None)
        if name in self.callers and (until is None or time.monotonic() < until):
            return str(self.callers[name]["role"]), None
        return None, _error(401, "unauthorized", UNAUTHORIZED)

    def _signed(self, request: Any) -> tuple[str | None, Answer | None]:
        signed = SignedRequest(
            request.method, request.path, request.raw_query, list(request.headers.items()), request.raw_body
        )
        try:
            principal = verify(signed, self.principals, REGION)
        except Refusal as refused:
            return None, (403, {}, {"message": refused.message})
        if principal.arn in self.operator_arns:
            return "operator", None
        for caller in self.callers.values():
            if caller["principal_arn"] == principal.arn:
                return str(caller["role"]), None
        return None, _error(403, "forbidden", f"principal {principal.arn} is no caller of this service")

    # --- /v1/callers -----------------------------------------------------------------------------------

    def route(self, request: Any, role: str | None) -> Answer | None:
        """The answer of a callers route, or None when the path is none of them."""
        match = re.fullmatch(r"/v1/callers(?:/([^/]+)(/rotate)?)?", request.path)
        if match is None:
            return None
        if role != "operator":
            return _error(403, "forbidden", "only an operator manages callers")
        name = None if match.group(1) is None else unquote(match.group(1))
        if name is None and request.method == "GET":
            return 200, {}, {"callers": sorted(self.callers.values(), key=lambda caller: caller["name"])}
        if name is None and request.method == "POST":
            return self._add(request.body)
        if name is not None and name not in self.callers:
            return _error(404, "not_found", f"caller {name} not found")
        if name is not None and match.group(2) and request.method == "POST":
            return self._rotate(name, request.body)
        if name is not None and not match.group(2) and request.method == "DELETE":
            del self.callers[name]
            self.tokens = {token: held for token, held in self.tokens.items() if held[0] != name}
            return 204, {}, None
        return 404, {}, {"message": "Not Found"}

    def _add(self, body: Any) -> Answer:
        problems = []
        if not isinstance(body, dict) or not NAME.fullmatch(str(body.get("name", ""))):
            problems.append({"field": "name", "problem": "must match [a-z0-9][a-z0-9-]{0,62}"})
        if not isinstance(body, dict) or body.get("role") not in ("service", "operator", "viewer"):
            problems.append({"field": "role", "problem": "must be one of service, operator, viewer"})
        if not isinstance(body, dict) or not isinstance(body.get("owners"), list):
            problems.append({"field": "owners", "problem": "must be a list of owner ids"})
        if self.mode == "iam" and (not isinstance(body, dict) or not body.get("principal_arn")):
            problems.append({"field": "principal_arn", "problem": "is required in AUTH_MODE=iam"})
        if problems:
            return (
                400,
                {},
                {"error": {"code": "invalid_request", "message": "invalid body", "details": {"problems": problems}}},
            )
        assert isinstance(body, dict)
        if body["name"] in self.callers:
            return _error(409, "conflict", f"caller {body['name']} exists")
        caller = {
            "name": body["name"],
            "role": body["role"],
            "owners": list(body["owners"]),
            "principal_arn": body.get("principal_arn"),
            "created_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "created_by": "admin",
        }
        self.callers[caller["name"]] = caller
        answer: dict[str, Any] = {"caller": caller}
        if self.mode == "token":
            answer["token"] = self._new_token(caller["name"])
        return 201, {}, answer

    def _rotate(self, name: str, body: Any) -> Answer:
        grace = body.get("grace_seconds") if isinstance(body, dict) else None
        if not isinstance(grace, int) or not 0 <= grace <= 604800:
            return _error(400, "invalid_request", "grace_seconds must be 0..604800")
        if self.mode != "token":
            return _error(409, "conflict", "callers have no tokens in this AUTH_MODE")
        until = time.monotonic() + grace
        self.tokens = {
            token: (held, until if held == name and (expiry is None or until < expiry) else expiry)
            for token, (held, expiry) in self.tokens.items()
        }
        return 201, {}, {"token": self._new_token(name)}

    def _new_token(self, name: str) -> str:
        token = "oas_" + secrets.token_urlsafe(32)
        self.tokens[token] = (name, None)
        return token
