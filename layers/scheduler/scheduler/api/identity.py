"""Who is calling, from what API Gateway established before the function ran — never from a value the request
itself carries:

- `secret` mode: the shared secret's holder, whose owners the request names (`SHARED_SECRET`);
- `token` mode: the token authorizer's context, `requestContext.authorizer.lambda` — `{"caller", "role",
  "owners"}` (owners JSON-encoded: an HTTP API authorizer's context holds strings, numbers and booleans only)
  for a known token, `{"refused": ...}` for any other (the authorizer lets such requests through so that the
  answer is this service's 401, see functions/authorizer/app.py);
- `iam` mode: the SigV4 principal API Gateway verified, `requestContext.authorizer.iam.userArn`, which is an
  operator (OPERATOR_PRINCIPALS) or the registry's caller for it (an assumed-role session by its role); an
  unmapped principal is 403. Lookups are remembered AUTH_CACHE_SECONDS per execution environment.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scheduler.callers.model import SHARED_SECRET, Caller, Role, principal_key
from scheduler.errors import Forbidden, Unauthorized

if TYPE_CHECKING:
    from scheduler.config import Settings
    from scheduler.store.callers import CallerStore

# One answer for a missing, unknown, revoked or malformed credential: which of those it was is no caller's
# business (it would tell a guesser which tokens once existed). The log line says which.
UNAUTHORIZED = "the request's credential is missing, unknown, revoked or malformed"


class Refused(Unauthorized):
    """A credential refused, with why (for the log line and the metric, never for the answer)."""

    def __init__(self, reason: str) -> None:
        super().__init__(UNAUTHORIZED)
        self.reason = reason


class Identity:
    """Builds the Caller of a request as the configured AUTH_MODE says."""

    def __init__(
        self,
        settings: Settings,
        registry: Callable[[], CallerStore],
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._mode = settings.auth_mode
        self._ttl = settings.auth_cache_seconds
        self._operators = {principal_key(arn) for arn in settings.operator_principals}
        self._registry = registry
        self._monotonic = monotonic
        self._remembered: dict[str, tuple[float, Caller | None]] = {}
        self._lock = threading.Lock()

    def caller(self, authorizer: dict[str, Any]) -> Caller:
        """The caller a request's `requestContext.authorizer` stands for; Refused (401) or Forbidden (403)."""
        if self._mode == "secret":
            return SHARED_SECRET
        if self._mode == "token":
            return _token_caller(authorizer.get("lambda"))
        return self._principal_caller(authorizer.get("iam"))

    def _principal_caller(self, iam: object) -> Caller:
        arn = iam.get("userArn") if isinstance(iam, dict) else None
        if not isinstance(arn, str) or not arn:
            raise Refused("no IAM principal in the request context")
        key = principal_key(arn)
        if key in self._operators:
            return Caller(key, Role.OPERATOR)
        found = self._remembered_caller(key)
        if found is None:
            raise Forbidden(f"principal {arn} is no caller of this service")
        return found

    def _remembered_caller(self, key: str) -> Caller | None:
        now = self._monotonic()
        with self._lock:
            remembered = self._remembered.get(key)
        if remembered is not None and remembered[0] > now:
            return remembered[1]
        found = self._registry().by_principal(key)
        if self._ttl > 0:
            with self._lock:
                self._remembered[key] = (now + self._ttl, found)
        return found


def _token_caller(context: object) -> Caller:
    if not isinstance(context, dict):
        raise Refused("no token authorizer context")
    if "refused" in context:
        raise Refused(str(context["refused"]))
    try:
        owners = json.loads(context["owners"])
        caller = Caller(str(context["caller"]), Role(context["role"]), tuple(str(owner) for owner in owners))
    except (KeyError, TypeError, ValueError) as error:
        raise Refused(f"a token authorizer context this service does not write: {type(error).__name__}") from None
    return caller


def token_context(caller: Caller) -> dict[str, str]:
    """The authorizer context that stands for `caller` (what `Identity` reads back)."""
    return {"caller": caller.name, "role": caller.role.value, "owners": json.dumps(list(caller.owners))}
