"""Which DynamoDB answers mean "not applied, try again", and the jittered backoff the store retries them with.

DynamoDB refuses rather than queues under contention: a write to an item inside a running transaction
gets `TransactionConflictException`, a transaction touching an item another transaction holds is
cancelled with reason `TransactionConflict`, and a hot partition answers
`ProvisionedThroughputExceededException` / `ThrottlingException`. None of them applied anything, so
each is retried (full jitter, exponential, capped) until the store's time budget is spent.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

# Error codes of a request DynamoDB did not apply and that may succeed when repeated.
RETRYABLE_CODES = frozenset(
    {
        "TransactionConflictException",
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "TransactionInProgressException",
        "InternalServerError",
    }
)
# Cancellation reasons (TransactionCanceledException) of a transaction that may succeed when repeated.
RETRYABLE_REASONS = frozenset({"TransactionConflict", "ProvisionedThroughputExceeded", "ThrottlingError"})


def retryable_cancellation(reasons: list[dict[str, str]]) -> bool:
    """True when a cancelled transaction failed only for contention (no condition failed, nothing invalid)."""
    codes = {reason.get("Code", "None") for reason in reasons} - {"None"}
    return bool(codes) and codes <= RETRYABLE_REASONS


class Backoff:
    """Full-jitter exponential backoff within a time budget (seconds, from the first attempt)."""

    def __init__(
        self,
        budget_seconds: float = 10.0,
        base_seconds: float = 0.02,
        cap_seconds: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self.budget_seconds = budget_seconds
        self.base_seconds = base_seconds
        self.cap_seconds = cap_seconds
        self.sleep = sleep
        self.clock = clock
        self.rng = rng or random.Random()  # noqa: S311 # nosec B311 - jitter, not a secret

    def attempts(self) -> _Attempts:
        """A fresh budget for one operation."""
        return _Attempts(self)


class _Attempts:
    def __init__(self, policy: Backoff) -> None:
        self._policy = policy
        self._deadline = policy.clock() + policy.budget_seconds
        self.count = 0

    def wait(self) -> bool:
        """Sleep before the next attempt; False (no sleep) once the budget would be overrun."""
        policy = self._policy
        self.count += 1
        delay = policy.rng.uniform(0, min(policy.cap_seconds, policy.base_seconds * 2**self.count))
        if policy.clock() + delay > self._deadline:
            return False
        policy.sleep(delay)
        return True
