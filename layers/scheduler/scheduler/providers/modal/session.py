"""Modal's client as the driver uses it: one client per token, opened on first use, every call bounded in time.

`modal` is asynchronous underneath (its calls run on the client's own event loop thread, through
synchronicity); each driver call runs its `.aio` coroutines in a short-lived loop of the caller's thread
under `asyncio.wait_for`, so the caller's deadline cancels the client's own retries (which can run for a
minute against an unreachable server). Cancelling a `Sandbox.create` that is waiting for capacity makes
the client terminate that Sandbox itself; the driver checks anyway, by the lease's tag.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import modal
from modal_proto import api_pb2

from scheduler.providers.base import ProviderUnreachable

T = TypeVar("T")
Credentials = tuple[str, str]


class ModalTimeout(ProviderUnreachable):
    """Modal did not finish the call within the time it was given."""


class ModalSession:
    """Calls to Modal with one workspace token (read again through `credentials` when it may rotate)."""

    def __init__(
        self,
        server_url: str | None,
        credentials: Callable[[], Credentials | None],
        app_name: str,
        *,
        configured: bool = True,
    ) -> None:
        self._server_url = server_url
        self._credentials = credentials
        # Whether a token is configured at all (reading it may call Secrets Manager: not at init).
        self.configured = configured
        self.app_name = app_name
        self._lock = threading.Lock()
        self._client: tuple[Credentials, Any] | None = None
        self._apps: dict[str, Any] = {}  # app name → App handle, per client

    def run(self, work: Callable[[Any], Awaitable[T]], seconds: float, what: str) -> T:
        """`work(client)` within `seconds`; ModalTimeout when it takes longer; `modal`'s own errors as raised."""
        credentials = self._credentials()
        if credentials is None:
            raise ProviderUnreachable("no Modal token is configured")
        seconds = max(0.05, seconds)

        async def bounded() -> T:
            client = await self._client_for(credentials)
            return await work(client)

        try:
            return asyncio.run(asyncio.wait_for(bounded(), seconds))
        except TimeoutError as error:
            raise ModalTimeout(f"Modal did not answer {what} within {seconds:.1f} s") from error

    def app(self, seconds: float) -> Any:
        """The App the Sandboxes belong to (looked up once per client, made when missing)."""
        return self.run(self.app_for, seconds, f"the lookup of App {self.app_name!r}")

    async def app_for(self, client: Any) -> Any:
        """The App, from within a call already running on `client`."""
        found = self._apps.get(self.app_name)
        if found is None:
            found = await modal.App.lookup.aio(self.app_name, create_if_missing=True, client=client)
            self._apps[self.app_name] = found
        return found

    async def _client_for(self, credentials: Credentials) -> Any:
        with self._lock:
            current = self._client
        if current is not None and current[0] == credentials:
            return current[1]
        server_url = self._server_url or str(modal.config.config["server_url"])
        client = modal.Client(server_url, api_pb2.CLIENT_TYPE_CLIENT, credentials)
        await client.__aenter__()  # what `async with client:` does: open its connections (closed at exit)
        with self._lock:
            self._client = (credentials, client)
            self._apps.clear()  # App handles belong to the client they were looked up with
        return client
