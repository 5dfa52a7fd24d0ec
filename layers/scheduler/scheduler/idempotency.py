"""Idempotent acquire: a repeated `Idempotency-Key` with the same body returns the first answer.

Built on powertools' Idempotency utility with its own DynamoDB table. The key is the caller's
`Idempotency-Key`; the body is the validated LeaseRequest, so the same key with a different body
is refused (409). A concurrent repeat waits for the first to finish rather than making a second
worker. A failed acquire is not remembered, so it can be retried with the same key.
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

from scheduler.deadline import Deadline, or_never
from scheduler.errors import InvalidRequest, LeaseConflict
from scheduler.leases.outcomes import Acquired, AcquireOutcome, NotAcquired, Replayed

if TYPE_CHECKING:  # only the acquire path builds one
    from scheduler.request_models import LeaseRequest

MAX_KEY_LENGTH = 255
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
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
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
    ) -> AcquireOutcome:
        """`acquire()`'s outcome the first time a key is seen with this body; `Replayed` for a repeat."""
        if not key or len(key) > MAX_KEY_LENGTH or not (key.isascii() and key.isprintable()):
            raise InvalidRequest(f"Idempotency-Key must be 1..{MAX_KEY_LENGTH} printable ASCII characters")
        if lambda_context is not None:
            # Lets a key whose first request died with its function be retried once that timeout passed.
            self.config.register_lambda_context(lambda_context)
        attempt = {"key": key, "body": request.as_json()}
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
            return fresh if isinstance(fresh, Acquired) else Replayed(answer)

    def _acquire_once(self, attempt: dict[str, Any]) -> dict[str, Any]:
        outcome = self._invocation.acquire()
        if isinstance(outcome, NotAcquired):
            raise _NotRemembered(outcome)
        self._invocation.outcome = outcome
        return outcome.body()
