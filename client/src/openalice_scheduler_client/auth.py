"""Who the client says it is: one credential per client, of the kind the service's AUTH_MODE expects.

- `secret`: the shared `X-Internal-Secret` (AUTH_MODE=secret, the service's default);
- `token`: the caller's own token, `Authorization: Bearer <token>` (AUTH_MODE=token);
- `iam`: every request signed with SigV4 (service `execute-api`) from botocore's default credential chain
  (AUTH_MODE=iam; botocore is the client's `iam` extra, imported only then: see `auth_iam`).

Which one, the first rule that applies deciding:

1. the arguments: `auth=` names the kind; `token=` means `token`, `secret=` means `secret`. Two that disagree
   (a token and a secret, `auth="iam"` with a token, `region=` or `profile=` outside `iam`) are a
   CredentialError, never a silent pick;
2. `$OPENALICE_SCHEDULER_AUTH` (`secret`, `token` or `iam`);
3. `$OPENALICE_SCHEDULER_TOKEN` when it is set (`token`), else `secret`.

A chosen kind's value is its argument, else its variable (`$OPENALICE_SCHEDULER_TOKEN`, `$INTERNAL_SECRET`);
without one the requests carry no credential (the service answers 401). A credential is never part of a
repr, a log line or an error message.
"""

from __future__ import annotations

import os
from typing import Any

from .credentials import BearerToken, Credential, CredentialError, SharedSecret

SECRET_ENV = "INTERNAL_SECRET"  # noqa: S105 - the name of the variable, not a secret
TOKEN_ENV = "OPENALICE_SCHEDULER_TOKEN"  # noqa: S105 - the name of the variable, not a token
AUTH_ENV = "OPENALICE_SCHEDULER_AUTH"
MODES = ("secret", "token", "iam")
# How to get botocore: the client's `iam` extra (the client is installed from the scheduler's repository).
IAM_EXTRA = "install the client with its iam extra, pip install './client[iam]', or botocore itself"


def resolve_credential(
    url: str,
    *,
    secret: str | None = None,
    token: str | None = None,
    auth: str | Credential | None = None,
    region: str | None = None,
    profile: str | None = None,
) -> Credential:
    """The credential the arguments and the environment choose (the rules are the module's doc)."""
    if isinstance(auth, Credential):  # a ready credential, e.g. another client's (`copy()`)
        if secret is not None or token is not None or region or profile:
            raise CredentialError("a ready Credential as auth= takes no secret=, token=, region= or profile=")
        return auth
    if auth is not None and auth not in MODES:
        raise CredentialError(f"auth must be one of {', '.join(MODES)}; got {auth!r}")
    given = [name for name, value in (("secret", secret), ("token", token)) if value is not None]
    if len(given) > 1:
        raise CredentialError("pass a secret or a token, not both: one credential per client")
    if auth is not None and given and given[0] != auth:
        raise CredentialError(f"auth={auth!r} and a {given[0]} disagree: pass one of them")
    mode = auth or (given[0] if given else None) or _mode_from_environment()
    if (region or profile) and mode != "iam":
        raise CredentialError(
            f"a region or a profile is for SigV4 signing (auth='iam', leasectl --auth iam), not for auth={mode!r}"
        )
    if mode == "iam":
        return _signer(url, region=region, profile=profile)
    if mode == "token":
        return BearerToken(token if token is not None else os.environ.get(TOKEN_ENV))
    return SharedSecret(secret if secret is not None else os.environ.get(SECRET_ENV))


def _mode_from_environment() -> str:
    named = os.environ.get(AUTH_ENV, "").strip()
    if named:
        if named not in MODES:
            raise CredentialError(f"${AUTH_ENV} must be one of {', '.join(MODES)}; got {named!r}")
        return named
    return "token" if os.environ.get(TOKEN_ENV, "").strip() else "secret"


def _signer(url: str, **options: Any) -> Credential:
    try:
        from .auth_iam import SigV4Signer
    except ImportError as missing:
        raise CredentialError(
            f"auth='iam' signs requests with botocore, which is missing ({missing}): {IAM_EXTRA}"
        ) from None
    return SigV4Signer(url, **options)
