"""A Docker "engine" that accepts TCP connections and never answers: not even the TLS handshake.

What a frozen dockerd, a wedged load balancer or a firewall that accepts and drops looks like to a
client. The kernel completes each TCP handshake from the listen backlog; nothing ever reads.
"""

from __future__ import annotations

import socket
from types import TracebackType


class SilentEngine:
    """A loopback listener nobody serves; `host` is its DOCKER_HOST."""

    def __init__(self, backlog: int = 128) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(backlog)
        self.port = int(self._socket.getsockname()[1])

    @property
    def host(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    def close(self) -> None:
        self._socket.close()

    def __enter__(self) -> SilentEngine:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()
