"""The callers registry (`/v1/callers`, operators only; AUTH_MODE `token` or `iam`): `SchedulerClient.callers`.

A caller's token exists in two answers only — adding it and rotating its token — and is shown there once: keep it
then. `AddedCaller` leaves the token out of its repr; the client logs no credential.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from .errors import InvalidResponse, error_from_response
from .models import Caller
from .transport import Transport

DEFAULT_GRACE_SECONDS = 3600  # how long a rotated caller's previous tokens keep working, unless told


@dataclass(frozen=True)
class AddedCaller:
    """`POST /v1/callers`: the caller, and (AUTH_MODE=token) its token, shown this once (None in `iam` mode)."""

    caller: Caller
    token: str | None = field(default=None, repr=False)
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


class Callers:
    """Add, list, rotate and remove the service's callers (403 `forbidden` for anyone but an operator)."""

    def __init__(self, transport: Transport) -> None:
        self._transport = transport

    def __repr__(self) -> str:
        return f"Callers({self._transport!r})"

    def add(self, name: str, *, role: str, owners: Sequence[str] = (), principal_arn: str | None = None) -> AddedCaller:
        """`POST /v1/callers`: a caller `name` with `role` (`service`, `operator`, `viewer`) acting for `owners` (the
        first its default; a `service` needs one), signing as `principal_arn` in `iam` mode (required there).

        Raises InvalidRequest (each problem named), Conflict (the name or the principal is taken), Forbidden. A
        Conflict after a retried attempt (its answer lost) may be that attempt's own caller, whose token was lost
        with the answer: `rotate` gives it a new one.
        """
        if isinstance(owners, str):  # a lone owner id would otherwise be sent as its characters
            raise TypeError("owners must be a sequence of owner ids, not a string")
        body: dict[str, Any] = {"name": name, "owners": list(owners), "role": role}
        if principal_arn is not None:
            body["principal_arn"] = principal_arn
        answer = self._transport._expect(self._transport._send("POST", "/v1/callers", body=body), dict)
        token = answer.get("token")
        if token is not None and not isinstance(token, str):
            raise InvalidResponse("the new caller's token is not a string", status=201, body=None)
        return AddedCaller(_caller(answer.get("caller")), token, raw=dict(answer))

    def list(self) -> builtins.list[Caller]:
        """`GET /v1/callers`: every caller of the registry, by name (no token, no hash)."""
        answer = self._transport._expect(self._transport._send("GET", "/v1/callers"), dict)
        items = answer.get("callers")
        if not isinstance(items, builtins.list):
            raise InvalidResponse("callers answer lacks `callers`", status=200, body=answer)
        return [_caller(item) for item in items]

    def rotate(self, name: str, *, grace_seconds: int = DEFAULT_GRACE_SECONDS) -> str:
        """`POST /v1/callers/{name}/rotate`: a new token for the caller, returned (shown this once); its previous
        tokens keep working `grace_seconds` more (0: they stop now). Raises NotFound, Conflict (not `token` mode)."""
        body = {"grace_seconds": grace_seconds}
        answer = self._transport._expect(self._transport._send("POST", _path(name) + "/rotate", body=body), dict)
        token = answer.get("token")
        if not isinstance(token, str):
            raise InvalidResponse("rotate answer lacks `token`", status=201, body=None)
        return token

    def remove(self, name: str) -> None:
        """`DELETE /v1/callers/{name}`: every token of the caller, and its principal, stop working within the
        service's AUTH_CACHE_SECONDS; its leases are not touched. Raises NotFound for an unknown caller, unless an
        earlier attempt of this call may have removed it (its answer lost): that 404 is the removal done."""
        outcome = self._transport._send("DELETE", _path(name), check=False)
        status = outcome.response.status_code
        if status < 400 or (status == 404 and outcome.earlier_attempt_may_have_applied):
            return
        raise error_from_response(status, outcome.body, outcome.response.reason or "")


def _path(name: str) -> str:
    if not name:
        raise ValueError("a caller's name must not be empty")
    return "/v1/callers/" + quote(name, safe="")


def _caller(item: Any) -> Caller:
    try:
        return Caller.from_wire(item)
    except ValueError as error:
        raise InvalidResponse(f"malformed caller in the answer: {error}", body=item) from error
