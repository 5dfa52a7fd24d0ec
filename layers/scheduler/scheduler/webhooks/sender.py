"""One delivery attempt: a POST to the checked address of its target (`targets.Target`), TLS verified against
the URL's host name, never a redirect followed, an answer within the timeout or none. 2xx means delivered."""

from __future__ import annotations

import http.client
import socket
import ssl
from functools import cache
from typing import Any, NamedTuple

from scheduler.webhooks.targets import Target

TIMEOUT_SECONDS = 5.0  # to connect, and for each read of the answer
_ANSWER_BYTES = 4096  # what is read of an answer (its body is no business of ours)


class Attempt(NamedTuple):
    """How one attempt went: `status` the answer's (None: none came), `error` why it failed (None: delivered)."""

    status: int | None
    error: str | None = None

    @property
    def delivered(self) -> bool:
        return self.error is None


@cache
def _tls() -> ssl.SSLContext:
    return ssl.create_default_context()


def post(target: Target, headers: dict[str, str], body: bytes, timeout: float = TIMEOUT_SECONDS) -> Attempt:
    """POST `body` to `target`, connecting to its checked address only."""
    connection: http.client.HTTPConnection
    if target.scheme == "https":
        connection = http.client.HTTPSConnection(target.host, target.port, timeout=timeout, context=_tls())
    else:
        connection = http.client.HTTPConnection(target.host, target.port, timeout=timeout)
    # The connection goes to the address the check passed, whatever the name resolves to now; TLS still
    # checks the certificate against the host name (HTTPSConnection wraps this socket with it).
    connection._create_connection = _pinned(target.address)  # type: ignore[attr-defined]
    try:
        connection.request("POST", target.path, body=body, headers={**headers, "content-length": str(len(body))})
        answer = connection.getresponse()
        answer.read(_ANSWER_BYTES)
        status = answer.status
    except (OSError, http.client.HTTPException) as error:
        return Attempt(None, f"{type(error).__name__}: {error}"[:300])
    finally:
        connection.close()
    if 200 <= status < 300:
        return Attempt(status)
    return Attempt(status, f"answered {status}" + (" (redirects are not followed)" if 300 <= status < 400 else ""))


def _pinned(address: str) -> Any:
    def connect(where: tuple[str, int], timeout: float, source: Any = None) -> socket.socket:
        return socket.create_connection((address, where[1]), timeout, source)

    return connect
