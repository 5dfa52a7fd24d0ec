"""Errors of the lease API, one class per error code of its contract (openapi.yaml)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


class SchedulerError(Exception):
    """The scheduler refused or failed a request.

    `status` is the HTTP status (None when no answer arrived), `code` the contract's error code
    (`invalid_request`, `not_found`, …; for answers without the error envelope it is derived from the
    status), `message` the server's message, `details` its optional details object, `body` the
    parsed response body (or None).
    """

    default_code = "error"

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        details: dict[str, Any] | None = None,
        body: Any = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code or self.default_code
        self.message = message
        self.details: dict[str, Any] = dict(details or {})
        self.body = body

    def __str__(self) -> str:
        prefix = f"{self.status} " if self.status is not None else ""
        return f"{prefix}{self.code}: {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status!r}, code={self.code!r}, message={self.message!r})"

    def envelope(self) -> dict[str, Any]:
        """The contract's error body for this error: `{"error": {"code", "message", "details"?}}`."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            error["details"] = self.details
        return {"error": error}


class InvalidRequest(SchedulerError):
    """400 `invalid_request`: a bad body, query or token; `details["problems"]` names each problem."""

    default_code = "invalid_request"


class Unauthorized(SchedulerError):
    """401: no credential was sent (API Gateway's `{"message": "Unauthorized"}`), or (AUTH_MODE=token) the token is
    unknown, revoked, expired or malformed (the service's `unauthorized`, one answer whichever it was)."""

    default_code = "unauthorized"


class Forbidden(SchedulerError):
    """403: the secret is wrong or a SigV4 signature refused (API Gateway's body, its message saying why), or the
    caller may not do this: another owner's, a viewer changing something, managing callers without being an
    operator (`forbidden`; AUTH_MODE=secret: `X-Lease-Owner` does not match the lease's owner)."""

    default_code = "forbidden"


class NotFound(SchedulerError):
    """404 `not_found`: the lease is unknown, or (renew/release) no longer live."""

    default_code = "not_found"


class Conflict(SchedulerError):
    """409 `conflict`: e.g. an `Idempotency-Key` reused with a different body."""

    default_code = "conflict"


class Preempting(Conflict):
    """409 `preempting`: a renewal would pass the lease's preemption notice; `preempt_at` (from `details`) is when
    the lease ends `preempted`. The lease runs until then, unchanged."""

    default_code = "preempting"

    @property
    def preempt_at(self) -> datetime | None:
        """When the lease ends, as the service said (None if it did not say)."""
        value = self.details.get("preempt_at")
        if not isinstance(value, str):
            return None
        try:
            return datetime.fromisoformat(value).astimezone(UTC)
        except ValueError:
            return None


class Gone(SchedulerError):
    """410 `gone`: the lease's worker no longer exists (its logs went with it)."""

    default_code = "gone"


class QuotaExceeded(SchedulerError):
    """429 `quota_exceeded`: the owner already holds its quota of leases (not retried)."""

    default_code = "quota_exceeded"


class BudgetExceeded(SchedulerError):
    """429 `budget_exceeded`: the owner's cost per hour or daily spend would pass its limit (not retried);
    `details` has `limit`, `in_use`, `requested` (USD) and `budget` (the limit's variable)."""

    default_code = "budget_exceeded"


class RateLimited(SchedulerError):
    """429 `rate_limited` (or API Gateway throttling): retried with backoff."""

    default_code = "rate_limited"


class ProviderError(SchedulerError):
    """502 `provider_error`: the provider refused the worker or could not remove it yet."""

    default_code = "provider_error"


class NoCapacity(SchedulerError):
    """503 `no_capacity`: no provider has room, or no provider or store is reachable."""

    default_code = "no_capacity"


class ServerError(SchedulerError):
    """Any other 5xx (`internal_error`, or API Gateway's own 500/502/503/504 bodies)."""

    default_code = "server_error"


class InvalidResponse(SchedulerError):
    """A success status whose body is not the JSON shape the contract promises."""

    default_code = "invalid_response"


class ServiceUnreachable(SchedulerError):
    """No HTTP answer at all: connection refused or reset, DNS failure, or timeout (after retries)."""

    default_code = "unreachable"


class WorkerNotReady(SchedulerError):
    """The lease's worker did not become usable: `lease` is the lease as last read (its `failure_reason` says why
    when the service ended it). Raised by `wait_ready`, never from an HTTP answer."""

    default_code = "not_ready"

    def __init__(self, message: str, *, lease: Any = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.lease = lease


class BootFailed(WorkerNotReady):
    """The worker failed to boot (or the lease ended while waiting): the service ended the lease."""

    default_code = "boot_failed"


class NotAdmitted(WorkerNotReady):
    """The lease ended in the queue, never admitted: its `queued_until` passed (`expired`) or it was cancelled
    (`released`); `lease.failure_reason` says which. No worker was ever made for it."""

    default_code = "not_admitted"


class ReadyTimeout(WorkerNotReady):
    """The worker was still starting when the caller's timeout ran out (the lease is still live)."""

    default_code = "ready_timeout"


ERRORS_BY_CODE: dict[str, type[SchedulerError]] = {
    "invalid_request": InvalidRequest,
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "not_found": NotFound,
    "conflict": Conflict,
    "preempting": Preempting,
    "gone": Gone,
    "quota_exceeded": QuotaExceeded,
    "budget_exceeded": BudgetExceeded,
    "rate_limited": RateLimited,
    "provider_error": ProviderError,
    "no_capacity": NoCapacity,
}

# For answers without the error envelope (API Gateway's `{"message": ...}`) or with a code this
# client does not know: the class and code follow the status.
_BY_STATUS: dict[int, tuple[type[SchedulerError], str]] = {
    400: (InvalidRequest, "invalid_request"),
    401: (Unauthorized, "unauthorized"),
    403: (Forbidden, "forbidden"),
    404: (NotFound, "not_found"),
    409: (Conflict, "conflict"),
    410: (Gone, "gone"),
    413: (InvalidRequest, "invalid_request"),
    429: (RateLimited, "rate_limited"),
}


def error_from_response(status: int, body: Any, reason: str = "") -> SchedulerError:
    """The SchedulerError for an HTTP error answer, from the error envelope or API Gateway's body."""
    code: str | None = None
    message: str | None = None
    details: dict[str, Any] | None = None
    if isinstance(body, dict):
        envelope = body.get("error")
        if isinstance(envelope, dict):
            code = envelope.get("code") if isinstance(envelope.get("code"), str) else None
            message = envelope.get("message") if isinstance(envelope.get("message"), str) else None
            details = envelope.get("details") if isinstance(envelope.get("details"), dict) else None
        elif isinstance(body.get("message"), str):
            message = body["message"]
    by_status = _BY_STATUS.get(status) or (ServerError if status >= 500 else SchedulerError, None)
    cls = ERRORS_BY_CODE.get(code or "") or by_status[0]
    code = code or by_status[1] or ("server_error" if status >= 500 else f"http_{status}")
    return cls(message or reason or f"HTTP {status}", status=status, code=code, details=details, body=body)
