"""The token authorizer's decision (AUTH_MODE=token): a bearer token's caller, as the context API Gateway hands
every function (`scheduler.api.identity` reads it back).

Every request that carries the `Authorization` header is let through, with either its caller's context or
`{"refused": why}`: an HTTP API Lambda authorizer that says no makes API Gateway answer its own 403
`{"message":"Forbidden"}`, and the contract answers an unknown, revoked or malformed credential with this
service's 401 and its error envelope, which only a function can write. API Gateway caches the context per
token (AUTH_CACHE_SECONDS) either way, so a refused token costs no registry read while it is cached either.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import TYPE_CHECKING

from scheduler.api.identity import token_context
from scheduler.callers.model import BOOTSTRAP_OPERATOR
from scheduler.callers.tokens import bearer, is_token, token_hash

if TYPE_CHECKING:
    from scheduler.store.callers import CallerStore


def authorize_token(
    header: str | None,
    registry: Callable[[], CallerStore],
    bootstrap_token: Callable[[], bytes | None],
    now_epoch: int,
) -> dict[str, str]:
    """The authorizer context for an `Authorization` header: one registry read for a token of ours; the
    bootstrap operator's secret is read only for a credential that is no token of ours."""
    credential = bearer(header)
    if credential is None:
        return {"refused": "not a bearer credential"}
    if is_token(credential):
        caller = registry().by_token(token_hash(credential), now_epoch)
        return token_context(caller) if caller is not None else {"refused": "unknown, revoked or expired token"}
    expected = bootstrap_token()
    if expected and hmac.compare_digest(credential.encode(), expected):
        return token_context(BOOTSTRAP_OPERATOR)
    return {"refused": "no token of this service"}
