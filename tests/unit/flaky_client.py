"""A DynamoDB client that answers some calls the way DynamoDB does under contention, then the real answer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError


class FlakyClient:
    """Delegates to `client`; `refuse(operation, times, code)` makes the next calls of one operation fail."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.exceptions = client.exceptions
        self.meta = client.meta
        self._refusals: dict[str, list[Callable[[dict[str, Any]], dict[str, Any] | None]]] = {}
        self.calls: dict[str, int] = {}

    def refuse(self, operation: str, times: int, code: str, **extra: Any) -> None:
        """The next `times` calls of `operation` (snake_case) raise `code` as DynamoDB would."""

        def fail(request: dict[str, Any]) -> dict[str, Any] | None:
            raise self.error(code, operation, **extra)

        self._refusals.setdefault(operation, []).extend([fail] * times)

    def answer(self, operation: str, rewrite: Callable[[dict[str, Any]], dict[str, Any] | None]) -> None:
        """The next call of `operation` goes through `rewrite(request)` (a response, or None to pass)."""
        self._refusals.setdefault(operation, []).append(rewrite)

    def error(self, code: str, operation: str, **extra: Any) -> ClientError:
        modeled = getattr(self.exceptions, code, ClientError)
        response = {"Error": {"Code": code, "Message": f"injected {code}"}, **extra}
        return modeled(response, operation)  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._client, name)
        if not callable(real):
            return real

        def call(**request: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            queue = self._refusals.get(name)
            if queue:
                answer = queue.pop(0)(request)
                if answer is not None:
                    return answer
            return real(**request)

        return call
