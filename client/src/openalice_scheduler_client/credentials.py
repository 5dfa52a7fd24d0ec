"""The credentials a client sends, each a `requests` auth applied again to every attempt of a request: the shared
secret, a caller's bearer token (and, in `auth_iam`, the SigV4 signer). None shows its value in a repr or message."""

from __future__ import annotations

import re

from requests import PreparedRequest
from requests.auth import AuthBase

# What a header value may hold: printable ASCII (a control character would be refused by the HTTP library with
# the value in its message).
_HEADER_VALUE = re.compile(r"[ -~]*")


class CredentialError(ValueError):
    """The client cannot authenticate as asked: conflicting choices, an unknown kind, the `iam` extra missing,
    no AWS credentials or region found, or a token or secret that is no header value. Raised when the client is
    made, before any request."""


class Credential(AuthBase):
    """How each request is authenticated (a `requests` auth, applied again to every attempt of a retry).

    `mode` is the kind (`secret`, `token`, `iam`); `present` says whether there is a credential to send.
    """

    mode = "secret"

    @property
    def present(self) -> bool:
        return False

    def __call__(self, request: PreparedRequest) -> PreparedRequest:
        return request

    def __repr__(self) -> str:
        return f"{type(self).__name__}({'set' if self.present else 'unset'})"


class SharedSecret(Credential):
    """AUTH_MODE=secret: `X-Internal-Secret`, the same for every caller."""

    mode = "secret"

    def __init__(self, secret: str | None) -> None:
        self._secret = _header_value(secret, "the secret")

    @property
    def present(self) -> bool:
        return bool(self._secret)

    def __call__(self, request: PreparedRequest) -> PreparedRequest:
        if self._secret:
            request.headers["X-Internal-Secret"] = self._secret
        return request


class BearerToken(Credential):
    """AUTH_MODE=token: the caller's own token as `Authorization: Bearer <token>`."""

    mode = "token"

    def __init__(self, token: str | None) -> None:
        self._token = _header_value(token, "the token")

    @property
    def present(self) -> bool:
        return bool(self._token)

    def __call__(self, request: PreparedRequest) -> PreparedRequest:
        if self._token:
            request.headers["Authorization"] = f"Bearer {self._token}"
        return request


def _header_value(value: str | None, what: str) -> str:
    # Surrounding whitespace is what `$(cat file)` or a file read leaves, never part of a token or secret.
    text = (value or "").strip()
    if not _HEADER_VALUE.fullmatch(text):
        raise CredentialError(f"{what} holds a control or non-ASCII character, which no HTTP header can carry")
    return text
