"""`SchedulerClient`: the lease API over HTTP, with bounded retries and typed results and errors.

Retry policy (one place, `SchedulerClient._send`):

- Retried, with exponential backoff and full jitter (`uniform(0, min(max_backoff, backoff * 2**n))`,
  raised to the server's `Retry-After` when it sends one, still capped at `max_backoff`): connection
  failures and timeouts, 502, 503, 504, and 429 `rate_limited` (or API Gateway's own throttling
  answer). Bounded twice: at most `retries` extra attempts, and no new attempt is started once
  `retry_deadline` seconds have passed since the first one (a started attempt still has its `timeout`).
- Never retried: 400, 401, 403, 404, 409 and any other 4xx; 500 `internal_error`; 429
  `quota_exceeded` and `budget_exceeded` (an owner's quota or budget only frees when one of its
  leases ends, not within a backoff window); TLS errors; and a DELETE's 502 `provider_error` (see `release`).
- `acquire` always sends an `Idempotency-Key` (a uuid4 made once per call, or the caller's own) and
  the identical body on every attempt, so a retried acquire returns the lease the first attempt made
  instead of making a second worker.
"""

from __future__ import annotations

import builtins
import json
import logging
import os
import random
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import date
from types import TracebackType
from typing import Any
from urllib.parse import quote, urlsplit

import requests
from urllib3.exceptions import NewConnectionError

from .errors import (
    BootFailed,
    InvalidResponse,
    NotFound,
    ReadyTimeout,
    SchedulerError,
    ServiceUnreachable,
    error_from_response,
)
from .leasing import LeaseHandle, hold
from .models import Lease
from .operations import NotReleased, OwnerRelease, WorkerLogs

__version__ = "0.1.0"

logger = logging.getLogger("openalice_scheduler_client")
logger.addHandler(logging.NullHandler())  # a library logs only where its application configures logging

DEFAULT_URL = "http://127.0.0.1:3000"
URL_ENV = "SCHEDULER_URL"
SECRET_ENV = "INTERNAL_SECRET"  # noqa: S105 - the name of the variable, not a secret
RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})
MAX_WAIT_READY_SECONDS = 25  # the service's bound on one long poll (within API Gateway's 30 s)
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


class SchedulerClient(AbstractContextManager["SchedulerClient"]):
    """A client of the scheduler's lease API (openapi.yaml).

    `url` defaults to `$SCHEDULER_URL` or `http://127.0.0.1:3000`; `secret` (sent as
    `X-Internal-Secret`) to `$INTERNAL_SECRET`. `timeout` is per HTTP attempt; `retries`,
    `backoff`, `max_backoff` and `retry_deadline` bound the retries described in the module doc.
    Pass a `requests.Session` to share connections or adapters; otherwise the client owns one and
    `close()` (or leaving `with SchedulerClient() as client:`) closes it. Methods are safe to call
    from one thread at a time per client; `lease()` gives its renewal thread its own session.
    """

    _sleep = staticmethod(time.sleep)  # the pause between attempts (a seam for tests)

    def __init__(
        self,
        url: str | None = None,
        secret: str | None = None,
        *,
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
        self.secret = secret if secret is not None else os.environ.get(SECRET_ENV)
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.retry_deadline = retry_deadline
        self._owns_session = session is None
        self._session = session if session is not None else requests.Session()

    def __repr__(self) -> str:
        return f"SchedulerClient(url={self.url!r}, secret={'set' if self.secret else 'unset'})"

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

    def copy(self, **overrides: Any) -> SchedulerClient:
        """A client with the same settings (but `overrides`) and its own session (a passed-in one is shared)."""
        settings: dict[str, Any] = {
            "timeout": self.timeout,
            "retries": self.retries,
            "backoff": self.backoff,
            "max_backoff": self.max_backoff,
            "retry_deadline": self.retry_deadline,
            "session": None if self._owns_session else self._session,
        }
        settings.update(overrides)
        return SchedulerClient(self.url, self.secret, **settings)

    # --- the API ---------------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """`GET /health`: the service's health document (no secret needed)."""
        body = self._expect(self._send("GET", "/health"), dict)
        return dict(body)

    def acquire(
        self,
        kind: str,
        *,
        gpu: str = "none",
        ttl_seconds: int | None = None,
        owner_id: str | None = None,
        correlation_id: str | None = None,
        region: str | None = None,
        env: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
        max_cost_per_hour: float | None = None,
    ) -> Lease:
        """`POST /v1/lease`: a worker of `kind` (`renderer`/`anim`) and `gpu` class, leased for `ttl_seconds`.

        Every attempt of one call carries the same `Idempotency-Key` (`idempotency_key`, or a uuid4
        made for this call) and the same body, so retries never make a second worker. Raises
        InvalidRequest, QuotaExceeded, ProviderError, NoCapacity, Conflict, … (see `errors`).
        """
        body: dict[str, Any] = {"kind": kind, "gpu": gpu}
        optional = {
            "ttl_seconds": ttl_seconds,
            "owner_id": owner_id,
            "correlation_id": correlation_id,
            "region": region,
            "max_cost_per_hour": max_cost_per_hour,
        }
        body.update({key: value for key, value in optional.items() if value is not None})
        if env is not None:
            body["env"] = dict(env)
        key = idempotency_key or str(uuid.uuid4())
        outcome = self._send("POST", "/v1/lease", body=body, headers={"Idempotency-Key": key})
        return self._lease(outcome)

    def get(self, lease_id: str, *, wait_ready: int | None = None) -> Lease:
        """`GET /v1/lease/{id}`: any lease within the retention period, ended ones with their final status.

        `wait_ready` (0–25 s): the service answers as soon as a starting worker is ready, or after that long.
        """
        params = None if wait_ready is None else {"wait_ready": str(wait_ready)}
        return self._lease(self._send("GET", self._lease_path(lease_id), params=params))

    def wait_ready(
        self,
        lease_id: str,
        timeout: float = 600.0,
        *,
        on_progress: Callable[[Lease, float], None] | None = None,
    ) -> Lease:
        """Wait until the lease's worker is ready (`worker_state` `ready`) and return the lease.

        Long-polls `GET /v1/lease/{id}?wait_ready=N` (N ≤ 25 s per request) until then. `on_progress(lease,
        elapsed_seconds)` is called after every answer. Raises BootFailed when the lease ends instead (the
        service ended it: `failure_reason` says why), ReadyTimeout when `timeout` seconds pass first (the
        lease stays live: release it, or wait again).
        """
        started = time.monotonic()
        while True:
            elapsed = time.monotonic() - started
            left = timeout - elapsed
            # Each long poll ends well within this client's own per-request timeout.
            wait = int(max(0.0, min(MAX_WAIT_READY_SECONDS, left, self.timeout - 5.0)))
            lease = self.get(lease_id, wait_ready=wait)
            elapsed = time.monotonic() - started
            if on_progress is not None:
                on_progress(lease, elapsed)
            if lease.is_ready:
                return lease
            if not lease.is_starting:
                why = lease.failure_reason or f"the lease is {lease.status}"
                raise BootFailed(f"lease {lease_id}: the worker never became ready: {why}", lease=lease)
            if elapsed >= timeout:
                raise ReadyTimeout(f"lease {lease_id}: the worker was still starting after {timeout:g} s", lease=lease)
            if wait == 0:
                self._sleep(min(1.0, max(0.0, timeout - elapsed)))

    def list_page(
        self,
        *,
        owner_id: str | None = None,
        kind: str | None = None,
        provider: str | None = None,
        limit: int | None = None,
        next_token: str | None = None,
    ) -> tuple[builtins.list[Lease], str | None]:
        """`GET /v1/leases`: one page of live leases (`limit` is the page size, 1..1000) and the next token."""
        params = {"owner_id": owner_id, "kind": kind, "provider": provider, "limit": limit, "next_token": next_token}
        body = self._expect(
            self._send("GET", "/v1/leases", params={k: str(v) for k, v in params.items() if v is not None}), dict
        )
        items, token = body.get("leases"), body.get("next_token")
        if not isinstance(items, builtins.list) or not (token is None or isinstance(token, str)):
            raise InvalidResponse("list answer lacks `leases` or has a bad `next_token`", status=200, body=body)
        return [self._parse_lease(item, body) for item in items], token

    def iter_leases(
        self, *, owner_id: str | None = None, kind: str | None = None, provider: str | None = None, page_size: int = 100
    ) -> Iterator[Lease]:
        """Every live lease matching the filters, page after page (lazily)."""
        token: str | None = None
        while True:
            page, token = self.list_page(
                owner_id=owner_id, kind=kind, provider=provider, limit=page_size, next_token=token
            )
            yield from page
            if not token:
                return

    def list(
        self,
        *,
        owner_id: str | None = None,
        kind: str | None = None,
        provider: str | None = None,
        limit: int | None = None,
    ) -> builtins.list[Lease]:
        """Every live lease matching the filters, following `next_token` to the end.

        `limit`, when given, caps the number of leases returned (paging stops once it is reached).
        """
        if limit is not None and limit < 1:
            raise ValueError("limit must be at least 1")
        result: builtins.list[Lease] = []
        token: str | None = None
        while True:
            page_size = 1000 if limit is None else min(1000, limit - len(result))
            page, token = self.list_page(
                owner_id=owner_id, kind=kind, provider=provider, limit=page_size, next_token=token
            )
            result.extend(page)
            if not token or (limit is not None and len(result) >= limit):
                return result if limit is None else result[:limit]

    def usage(
        self,
        *,
        owner_id: str | None = None,
        since: str | date | None = None,
        until: str | date | None = None,
        group_by: str | None = None,
    ) -> dict[str, Any]:
        """`GET /v1/usage`: what leases that ended on the UTC days `since`..`until` cost (both default to
        today), of one owner or all, grouped by `owner`, `kind` or `provider`:
        `{"usage": [{"owner_id", "kind"?, "provider"?, "leases", "lease_seconds", "cost_usd"}], "since", "until"}`."""
        params = {"owner_id": owner_id, "since": since, "until": until, "group_by": group_by}
        sent = {key: str(value) for key, value in params.items() if value is not None}
        body = self._expect(self._send("GET", "/v1/usage", params=sent), dict)
        if not isinstance(body.get("usage"), builtins.list):
            raise InvalidResponse("usage answer lacks `usage`", status=200, body=body)
        return dict(body)

    def renew(self, lease_id: str, *, ttl_seconds: int | None = None, owner_id: str | None = None) -> Lease:
        """`POST /v1/lease/{id}/renew`: expires_at = now + ttl_seconds (the lease's own ttl when None).

        `owner_id` is sent as `X-Lease-Owner` (required when the lease has an owner). Raises
        NotFound when the lease is unknown, released or already expired.
        """
        body: dict[str, Any] = {} if ttl_seconds is None else {"ttl_seconds": ttl_seconds}
        outcome = self._send("POST", self._lease_path(lease_id) + "/renew", body=body, headers=_owner(owner_id))
        return self._lease(outcome)

    def release(self, lease_id: str, *, owner_id: str | None = None) -> None:
        """`DELETE /v1/lease/{id}`: end the lease and remove its worker; returns once the API answers 204.

        Retries and 404: when an earlier attempt may have reached the service (its answer was lost
        to a reset/timeout, or was a 5xx that can follow a recorded claim) and a retry then gets
        404, that 404 is most likely the earlier attempt's own success: DELETE answers 404 for every
        lease that is no longer an unexpired `active` one. The client then reads the lease: if it
        exists (released, expired, failed, or `releasing` — the service finishes a claimed release
        itself) the release counts as done; if it does not exist at all, no attempt can have
        released it and NotFound is raised. A 404 on the first attempt is always NotFound.

        A 502 `provider_error` is not retried: the release was claimed (the lease is `releasing`)
        but the worker could not be removed yet; the service's sweep retries that removal, and a
        repeated DELETE could only answer 404. It is raised as ProviderError.
        """
        path = self._lease_path(lease_id)
        outcome = self._send("DELETE", path, headers=_owner(owner_id), retry_provider_error=False, check=False)
        status = outcome.response.status_code
        if status < 400:
            return
        error = error_from_response(status, outcome.body, outcome.response.reason or "")
        if status == 404 and outcome.earlier_attempt_may_have_applied:
            try:
                lease = self.get(lease_id)
            except NotFound:
                raise error from None
            except SchedulerError as unverified:
                logger.info(
                    "release of %s: 404 after an attempt that may have succeeded; counted as released "
                    "(could not read the lease to confirm: %s)",
                    lease_id,
                    unverified,
                )
                return
            logger.info(
                "release of %s: 404 after an attempt that may have succeeded; the lease is %s",
                lease_id,
                lease.status,
            )
            return
        raise error

    def logs(
        self,
        lease_id: str,
        *,
        tail: int | None = None,
        since: str | None = None,
        timestamps: bool = False,
        owner_id: str | None = None,
    ) -> WorkerLogs:
        """`GET /v1/lease/{id}/logs`: the worker's last `tail` lines (service default 200, at most 5000)
        written at or after `since` (RFC 3339), each prefixed with its time when `timestamps`.

        Raises NotFound (unknown lease), Forbidden (another owner's), Gone (its worker was removed, as
        every ended lease's is), Conflict (pending, no worker yet), ProviderError.
        """
        params = {"tail": tail, "since": since, "timestamps": "true" if timestamps else None}
        headers = {**_owner(owner_id), "Accept": "text/plain"}
        outcome = self._send(
            "GET",
            self._lease_path(lease_id) + "/logs",
            params={key: str(value) for key, value in params.items() if value is not None},
            headers=headers,
        )
        response = outcome.response
        response.encoding = response.encoding or "utf-8"
        return WorkerLogs(
            text=response.text,
            lease_status=response.headers.get("X-Lease-Status"),
            truncated=response.headers.get("X-Logs-Truncated") == "true",
        )

    def release_all(self, owner_id: str, *, max_calls: int = 1000) -> OwnerRelease:
        """`DELETE /v1/leases?owner_id=`: release every live lease of `owner_id` (sent as `X-Lease-Owner`
        too), following `next_token` until the service says it is done (at most `max_calls` calls)."""
        result = OwnerRelease(owner_id)
        token: str | None = None
        while result.calls < max_calls:
            params = {"owner_id": owner_id, **({"next_token": token} if token else {})}
            body = self._expect(self._send("DELETE", "/v1/leases", params=params, headers=_owner(owner_id)), dict)
            result.calls += 1
            try:
                result.released += [self._parse_lease(item, body) for item in body.get("released") or []]
                refused = [NotReleased.from_wire(item) for item in body.get("not_released") or []]
            except ValueError as error:
                raise InvalidResponse(f"malformed bulk release answer: {error}", body=body) from error
            # A continuation may name a lease again: the latest word on each counts.
            again = {item.lease_id for item in refused}
            result.not_released = [item for item in result.not_released if item.lease_id not in again] + refused
            token = body.get("next_token")
            if not isinstance(token, str) or not token:
                break
        return result

    def lease(
        self,
        kind: str,
        ttl_seconds: int = 600,
        *,
        renew_every: float | None = None,
        wait_ready: bool = True,
        ready_timeout: float = 600.0,
        **acquire_kwargs: Any,
    ) -> AbstractContextManager[LeaseHandle]:
        """`with client.lease(kind="renderer", ttl_seconds=600) as lease:` — acquire, wait until the worker is
        ready (unless `wait_ready=False`), keep renewed, release.

        See `openalice_scheduler_client.leasing.hold` for the readiness, renewal and release behaviour.
        """
        return hold(
            self,
            kind=kind,
            ttl_seconds=ttl_seconds,
            renew_every=renew_every,
            wait_ready=wait_ready,
            ready_timeout=ready_timeout,
            **acquire_kwargs,
        )

    # --- HTTP and retries --------------------------------------------------------------------------

    @staticmethod
    def _lease_path(lease_id: str) -> str:
        if not lease_id:
            raise ValueError("lease_id must not be empty")
        return "/v1/lease/" + quote(lease_id, safe="")

    def _headers(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": f"openalice-scheduler-client/{__version__}"}
        if self.secret:
            headers["X-Internal-Secret"] = self.secret
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
        url = self.url + path
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
                    params=params,
                    data=data,
                    headers=all_headers,
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

    def _lease(self, outcome: _Outcome) -> Lease:
        body = self._expect(outcome, dict)
        return self._parse_lease(body.get("lease"), body, provider=body.get("provider"))

    @staticmethod
    def _parse_lease(item: Any, body: Any, provider: Any = None) -> Lease:
        try:
            lease = Lease.from_wire(item)
        except ValueError as error:
            raise InvalidResponse(f"malformed lease in the answer: {error}", body=body) from error
        if not lease.provider and isinstance(provider, str):
            lease = Lease.from_wire({**lease.raw, "provider": provider})
        return lease


def _owner(owner_id: str | None) -> dict[str, str]:
    return {} if owner_id is None else {"X-Lease-Owner": owner_id}


def _describe(error: BaseException) -> str:
    if isinstance(error, requests.Timeout):
        return "timed out"
    text = str(error)
    for marker in ("Connection refused", "Connection reset", "Name or service not known", "Remote end closed"):
        if marker in text:
            return marker.lower()
    return type(error).__name__


@contextmanager
def lease(
    kind: str,
    ttl_seconds: int = 600,
    *,
    url: str | None = None,
    secret: str | None = None,
    renew_every: float | None = None,
    wait_ready: bool = True,
    ready_timeout: float = 600.0,
    **acquire_kwargs: Any,
) -> Iterator[LeaseHandle]:
    """Module-level `with lease(kind="renderer", ttl_seconds=600) as handle:` on a client of its own.

    `url`/`secret` default to `$SCHEDULER_URL`/`$INTERNAL_SECRET`; the rest is as `SchedulerClient.lease`.
    """
    with (
        SchedulerClient(url, secret) as client,
        hold(
            client,
            kind=kind,
            ttl_seconds=ttl_seconds,
            renew_every=renew_every,
            wait_ready=wait_ready,
            ready_timeout=ready_timeout,
            **acquire_kwargs,
        ) as handle,
    ):
        yield handle
