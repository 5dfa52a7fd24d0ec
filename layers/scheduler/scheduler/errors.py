"""Domain errors. Each names what went wrong for the caller; `scheduler.api.responses` maps them to HTTP."""

from __future__ import annotations


class SchedulerError(Exception):
    """Base of every error a caller may see, with a message safe to show them."""

    def __init__(self, message: str, details: dict[str, object] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class InvalidRequest(SchedulerError):
    """The request is malformed or breaks a documented limit."""


def invalid_input(what: str, problems: list[dict[str, str]]) -> InvalidRequest:
    """InvalidRequest for `what` (a query, a request body) naming each problem: `{"field", "problem"}`."""
    summary = "; ".join(f"{problem['field']}: {problem['problem']}" for problem in problems[:5])
    return InvalidRequest(f"invalid {what}: {summary}", details={"problems": problems})


class NotFound(SchedulerError):
    """What the request names does not exist (to this caller)."""


class LeaseNotFound(NotFound):
    """No live lease answers to this id (or, for reads, no lease at all)."""


class Unauthorized(SchedulerError):
    """The request's credential is missing, unknown, revoked or malformed (one answer for all of them)."""


class Forbidden(SchedulerError):
    """The caller is known, and may not do this (`scheduler.callers.access`)."""


class OtherOwnersLease(LeaseNotFound):
    """A service caller asked for another owner's lease: answered word for word as a lease that does not exist,
    and logged and counted as the refused authorization it is (`reason`: why, for the log line only)."""

    def __init__(self, lease_id: str, reason: str) -> None:
        super().__init__(f"lease {lease_id} not found")
        self.reason = reason


class OtherOwnersWebhook(NotFound):
    """A service caller named another owner's webhook: answered as one that does not exist, and logged and counted
    as the refused authorization it is."""


class NotLeaseOwner(Forbidden):
    """The lease has an owner and the caller is not it."""


class WorkerLogsGone(SchedulerError):
    """The lease's worker no longer exists on its provider, and its logs went with it."""


class Conflict(SchedulerError):
    """The service's state forbids this change now (a name taken, a lease releasing)."""


class LeaseConflict(Conflict):
    """The lease is in a state that forbids this change (e.g. renew while releasing)."""


class Preempting(LeaseConflict):
    """The lease has a preemption notice: it cannot be renewed past its preempt_at (details: preempt_at)."""


class LeaseQueued(LeaseNotFound):
    """The lease waits in the queue: it is no active lease yet (a release cancels it instead)."""


class QuotaExceeded(SchedulerError):
    """The owner already holds as many live leases as allowed."""


class BudgetExceeded(SchedulerError):
    """The owner's cost per hour or daily spend would pass its limit (details: limit, in_use, requested)."""


class NoCapacity(SchedulerError):
    """No configured provider can serve the request right now."""


class StoreUnavailable(SchedulerError):
    """The lease table cannot be reached; nothing was changed on any provider."""


class ProviderFailed(SchedulerError):
    """A provider refused or failed the request in a way retrying elsewhere won't fix."""


class ConfigurationError(Exception):
    """The service is misconfigured and must not start (e.g. an unknown provider name)."""
