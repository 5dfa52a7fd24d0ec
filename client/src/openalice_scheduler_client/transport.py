"""The scheduler's HTTP transport: the client's settings and session, its headers, and bounded retries.

Retry policy (one place, `Transport._send`):

- Retried, with exponential backoff and full jitter (`uniform(0, min(max_backoff, backoff * 2**n))`,
  raised to the server's `Retry-After` when it sends one, still capped at `max_backoff`): connection
  failures and timeouts, 502, 503, 504, and 429 `rate_limited` (or API Gateway's own throttling
  answer). Bounded twice: at most `retries` extra attempts, and no new attempt is started once
  `retry_deadline` seconds have passed since the first one (a started attempt still has its `timeout`).
- Never retried: 400, 401, 403, 404, 409 and any other 4xx; 500 `internal_error`; 429
  `quota_exceeded` and `budget_exceeded` (an owner's quota or budget only frees when one of its
  leases ends, not within a backoff window); TLS errors; and a DELETE's 502 `provider_error` (see
  `SchedulerClient.release`).
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self
from urllib.parse import quote, urlencode, urlsplit

import requests
from urllib3.exceptions import NewConnectionError

from .auth import resolve_credential
from .credentials import Credential
from .errors import InvalidResponse, SchedulerError, ServiceUnreachable, error_from_response
from .version import __version__

logger = logging.getLogger("openalice_scheduler_client")

DEFAULT_URL = "http://127.0.0.1:3000"
URL_ENV = "SCHEDULER_URL"
RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})
# 429s that only free when one of the owner's leases ends: retrying within a backoff window cannot help.
NOT_RETRIED_CODES = frozenset({"quota_exceeded", "budget_exceeded"})


@dataclass(frozen=True)
class _Outcome:
    """The final answer of a (possibly retried) request."""

    response: requests.Response
    body: Any
    attempts: int
    earlier_attempt_may_have_applied: bool


def _is_connect_failure(error: BaseException) -> bool:
    """True when the request certainly never reached the server (the TCP connection was not made)."""
    if isinstance(error, requests.ConnectTimeout):
        return True
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, NewConnectionError):
            return True
        reason = getattr(current, "reason", None)
        first_arg = current.args[0] if current.args else None
        if isinstance(reason, BaseException):
            current = reason
        elif isinstance(first_arg, BaseException):
            current = first_arg
        else:
            current = current.__cause__ or current.__context__
    return False


def _retry_after(response: requests.Response | None) -> float | None:
    value = response.headers.get("Retry-After") if response is not None else None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP-date: rare enough from this API to ignore


def _decode(response: requests.Response) -> Any:
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return None


class Transport:
    """Where the scheduler is, how to authenticate (`credential`, chosen as `auth` says), and how hard to retry:
    the settings and the HTTP session of a `SchedulerClient`, and the one place a request is sent (`_send`)."""

    _sleep = staticmethod(time.sleep)  # the pause between attempts (a seam for tests)

    def __init__(
        self,
        url: str | None = None,
        secret: str | None = None,
        *,
        token: str | None = None,
        auth: str | Credential | None = None,
        region: str | None = None,
        profile: str | None = None,
        timeout: float = 30.0,
        retries: int = 4,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        retry_deadline: float = 60.0,
        session: requests.Session | None = None,
    ) -> None:
        resolved = (url or os.environ.get(URL_ENV) or DEFAULT_URL).rstrip("/")
        parts = urlsplit(resolved)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"scheduler URL must be http(s)://host[:port][/path], got {resolved!r}")
        if timeout <= 0 or retries < 0 or backoff < 0 or max_backoff < 0 or retry_deadline < 0:
            raise ValueError("timeout must be positive; retries, backoff and deadlines must not be negative")
        self.url = resolved
        self.credential = resolve_credential(
            resolved, secret=secret, token=token, auth=auth, region=region, profile=profile
        )
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.retry_deadline = retry_deadline
        self._owns_session = session is None
        self._session = session if session is not None else requests.Session()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(url={self.url!r}, auth={self.credential!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the HTTP session if this client created it."""
        if self._owns_session:
            self._session.close()

    def copy(self, **overrides: Any) -> Self:
        """A client with the same settings and credential (but `overrides`) and its own session (a passed-in one is
        shared)."""
        settings: dict[str, Any] = {
            "auth": self.credential,
            "timeout": self.timeout,
            "retries": self.retries,
            "backoff": self.backoff,
            "max_backoff": self.max_backoff,
            "retry_deadline": self.retry_deadline,
            "session": None if self._owns_session else self._session,
        }
        settings.update(overrides)
        return type(self)(self.url, **settings)

    def _headers(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": f"openalice-scheduler-client/{__version__}"}
        headers.update(extra or {})
        return headers

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        retry_provider_error: bool = True,
        check: bool = True,
    ) -> _Outcome:
        """Send with retries; raise the mapped error (when `check`) or return the final answer."""
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        all_headers = self._headers(headers)
        if data is not None:
            all_headers["Content-Type"] = "application/json"
        # The query is encoded here, spaces as %20, so that what is sent is what a SigV4 signature covers.
        url = self.url + path + (f"?{urlencode(params, quote_via=quote, safe='-_.~')}" if params else "")
        started = time.monotonic()
        may_have_applied = False
        attempt = 0
        while True:
            attempt += 1
            earlier_may_have_applied = may_have_applied
            response: requests.Response | None = None
            try:
                response = self._session.request(
                    method,
                    url,
                    data=data,
                    headers=all_headers,
                    auth=self.credential,  # applied to each attempt: a retry is signed afresh
                    timeout=(min(self.timeout, 10.0), self.timeout),
                    allow_redirects=False,
                )
            except requests.exceptions.SSLError as error:
                raise ServiceUnreachable(f"TLS error talking to {self.url}: {error}") from error
            except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError) as error:
                reason = _describe(error)
                failure: SchedulerError = ServiceUnreachable(
                    f"{method} {self.url}{path} failed: {reason}", details={"attempts": attempt}
                )
                may_have_applied = may_have_applied or not _is_connect_failure(error)
                cause: BaseException = error
            else:
                decoded = _decode(response)
                if response.status_code < 400:
                    return _Outcome(response, decoded, attempt, earlier_may_have_applied)
                failure = error_from_response(response.status_code, decoded, response.reason or "")
                cause = failure
                reason = str(failure)
                retryable = response.status_code in RETRYABLE_STATUSES and failure.code not in NOT_RETRIED_CODES
                if failure.code == "provider_error" and not retry_provider_error:
                    retryable = False
                if not retryable:
                    if check:
                        raise failure
                    return _Outcome(response, decoded, attempt, earlier_may_have_applied)
                may_have_applied = may_have_applied or response.status_code != 429

            delay = random.uniform(0.0, min(self.max_backoff, self.backoff * 2 ** (attempt - 1)))  # noqa: S311 - jitter, not crypto
            hinted = _retry_after(response)
            if hinted is not None:
                delay = max(delay, min(hinted, self.max_backoff))
            elapsed = time.monotonic() - started
            if attempt > self.retries or elapsed + delay > self.retry_deadline:
                if attempt > 1:
                    failure.details.setdefault("attempts", attempt)
                raise failure from (None if cause is failure else cause)
            logger.warning(
                "%s %s%s: %s; retry %d/%d in %.2f s", method, self.url, path, reason, attempt, self.retries, delay
            )
            self._sleep(delay)

    def _expect(self, outcome: _Outcome, shape: type) -> Any:
        if not isinstance(outcome.body, shape):
            raise InvalidResponse(
                f"expected a JSON {shape.__name__} from the scheduler, got {outcome.response.text[:200]!r}",
                status=outcome.response.status_code,
                body=outcome.body,
            )
        return outcome.body


def _describe(error: BaseException) -> str:
    if isinstance(error, requests.Timeout):
        return "timed out"
    text = str(error)
    for marker in ("Connection refused", "Connection reset", "Name or service not known", "Remote end closed"):
        if marker in text:
            return marker.lower()
    return type(error).__name__
