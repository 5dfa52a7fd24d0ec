"""Idempotent acquire: a repeated `Idempotency-Key` with the same body answers with the lease the first made.

Built on powertools' Idempotency utility with its own DynamoDB table. The key is the caller's
`Idempotency-Key`, scoped to the caller (`callers.access.idempotency_key`: its name folded in, so another
caller's key never replays its lease; in `secret` mode the key as sent, as it always was, so keys remembered
before still match); the body is the validated LeaseRequest with its owner decided, so the same key with a
different body is refused (409). A concurrent repeat waits for the first to finish rather than making a second
worker. A failed acquire is not remembered, so it can be retried with the same key.

A repeat answers the lease as it is now, read from the store (renewed: its new expiry), never the
remembered answer: that may name a worker long removed. A lease the caller can no longer use (released,
expired, failed, being released, or past its expiry) is 409 saying how it ended.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from threading import local
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyValidationError,
)

from scheduler.callers.access import idempotency_key
from scheduler.clock import Clock, utc_now
from scheduler.deadline import Deadline, or_never
from scheduler.errors import InvalidRequest, LeaseConflict, LeaseNotFound
from scheduler.inputs import text_problem
from scheduler.leases.outcomes import Acquired, AcquireOutcome, NotAcquired, Queued, Replayed
from scheduler.lifecycle import LeaseStatus
from scheduler.models import Lease, format_time
from scheduler.wire import HEADERS

if TYPE_CHECKING:  # only the acquire path builds one
    from scheduler.callers.model import Caller
    from scheduler.request_models import LeaseRequest

_KEY = HEADERS["Idempotency-Key"]
_WAIT_SECONDS = 25.0  # below the acquire function's 30 s timeout


class _NotRemembered(Exception):
    """A fresh acquire that got no worker: raised through powertools so that the key is not remembered."""

    def __init__(self, outcome: NotAcquired) -> None:
        super().__init__(outcome.error.message)
        self.outcome = outcome


class IdempotentAcquire:
    """Runs an acquire at most once per key (within the key's lifetime) and replays its answer."""

    def __init__(
        self,
        table_name: str,
        client: Any,
        expires_after_seconds: int,
        read: Callable[[str], Lease],
        clock: Clock = utc_now,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._read = read  # the lease as stored now (LeaseNotFound once past its retention)
        self._clock = clock
        self._sleep = sleep
        self._invocation = local()  # this call's acquire and its outcome (not part of the idempotency record)
        self.config = IdempotencyConfig(
            event_key_jmespath="key",
            payload_validation_jmespath="body",
            raise_on_no_idempotency_key=True,
            expires_after_seconds=expires_after_seconds,
        )
        persistence = DynamoDBPersistenceLayer(table_name=table_name, boto3_client=client)
        self._run = idempotent_function(
            data_keyword_argument="attempt", persistence_store=persistence, config=self.config
        )(self._acquire_once)

    def __call__(
        self,
        key: str,
        request: LeaseRequest,
        acquire: Callable[[], AcquireOutcome],
        lambda_context: Any = None,
        deadline: Deadline | None = None,
        *,
        caller: Caller,
    ) -> AcquireOutcome:
        """`acquire()`'s outcome the first time `caller` sends a key with this body; `Replayed` for its repeat
        whose lease is still usable, LeaseConflict (saying how it ended) for one whose lease is not."""
        if text_problem(key, _KEY) is not None:  # its pattern: printable ASCII
            shortest, longest = _KEY.get("min_length", 0), _KEY.get("max_length")
            raise InvalidRequest(f"Idempotency-Key must be {shortest}..{longest} printable ASCII characters")
        if lambda_context is not None:
            # Lets a key whose first request died with its function be retried once that timeout passed.
            self.config.register_lambda_context(lambda_context)
        attempt = {"key": idempotency_key(caller, key), "body": request.as_json()}
        self._invocation.acquire = acquire
        wait_until = or_never(deadline).sooner(_WAIT_SECONDS)
        while True:
            self._invocation.outcome = None
            try:
                answer = dict(self._run(attempt=attempt))
            except _NotRemembered as failed:
                return failed.outcome
            except IdempotencyValidationError as error:
                raise LeaseConflict("this Idempotency-Key was already used with a different request body") from error
            except IdempotencyAlreadyInProgressError as error:
                if wait_until.expired:
                    raise LeaseConflict("a request with this Idempotency-Key is still in progress") from error
                self._sleep(0.2)
                continue
            fresh = self._invocation.outcome
            return fresh if isinstance(fresh, Acquired | Queued) else self._replay(str(answer["lease"]["lease_id"]))

    def _replay(self, lease_id: str) -> Replayed:
        """The lease the key made, as it is now, while its caller can still use it."""
        try:
            lease = self._read(lease_id)
        except LeaseNotFound as gone:
            message = f"{_MADE} has ended and is no longer kept; {_NEW_KEY}"
            raise LeaseConflict(message, details={"lease_id": lease_id}) from gone
        if lease.status is LeaseStatus.ACTIVE and not lease.is_expired(self._clock()):
            return Replayed(lease)
        if lease.status is LeaseStatus.QUEUED or (
            lease.status is LeaseStatus.PENDING and lease.admitted_at is not None
        ):
            return Replayed(lease)  # still waiting in the queue, or being admitted: 202 again
        raise LeaseConflict(f"{_MADE} {_how_it_ended(lease)}; {_NEW_KEY}", details=_ended(lease))

    def _acquire_once(self, attempt: dict[str, Any]) -> dict[str, Any]:
        outcome = self._invocation.acquire()
        if isinstance(outcome, NotAcquired):
            raise _NotRemembered(outcome)
        self._invocation.outcome = outcome
        return outcome.body()


_MADE = "the lease this Idempotency-Key made"
_NEW_KEY = "send a new Idempotency-Key for a new worker"


def _how_it_ended(lease: Lease) -> str:
    if lease.status is LeaseStatus.RELEASING:
        return "is being released (its worker is being removed)"
    if lease.status is LeaseStatus.ACTIVE:  # past its expiry: over for its caller, the sweep's to end
        return f"expired at {format_time(lease.expires_at)}"
    if lease.status.is_live:
        return f"is {lease.status.value}"
    ended = f"has ended: {lease.status.value}"
    return ended if lease.released_at is None else f"{ended} at {format_time(lease.released_at)}"


def _ended(lease: Lease) -> dict[str, object]:
    details: dict[str, object] = {"lease_id": lease.lease_id, "status": lease.status.value}
    if lease.released_at is not None:
        details["released_at"] = format_time(lease.released_at)
    return details
