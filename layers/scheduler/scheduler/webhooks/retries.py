"""When a failed delivery is tried again: exponential backoff with jitter, for WEBHOOK_RETRY_SECONDS from the
first attempt, then the dead-letter queue.

After the n-th failed attempt the next comes after a delay drawn from [d/2, d], d = min(BASE × 2^(n-1), MOST):
1–2 s, 2–4 s, 4–8 s … up to 30–60 minutes, and then every 30–60 minutes until the retry time is spent. The
jitter keeps the retries of one outage's many deliveries from arriving together. An SQS message waits at most
15 minutes (DelaySeconds), so a longer delay takes several hops: the message carries when it is due
(`not_before`) and is sent on until then.
"""

from __future__ import annotations

import random
from typing import NamedTuple

BASE_SECONDS = 2.0
MOST_SECONDS = 3600.0
HOP_SECONDS = 900  # SQS's largest DelaySeconds


def backoff(failed_attempts: int, rng: random.Random) -> float:
    """The delay before the next attempt, after `failed_attempts` (≥ 1) failed."""
    ceiling = min(MOST_SECONDS, BASE_SECONDS * 2 ** (max(1, failed_attempts) - 1))
    return ceiling / 2 + rng.uniform(0, ceiling / 2)


class Step(NamedTuple):
    """What follows a failed attempt: another at `due` (epoch seconds), sent with `delay` seconds (at most one
    hop); or, `due` None, the dead-letter queue."""

    due: float | None
    delay: int = 0


def after_failure(first: float, failed_attempts: int, now: float, retry_seconds: int, rng: random.Random) -> Step:
    """The step after the `failed_attempts`-th failed attempt of a delivery first tried at `first`, at `now`."""
    due = now + backoff(failed_attempts, rng)
    if due - first > retry_seconds:
        return Step(None)
    return Step(due, hop(due, now))


def hop(due: float, now: float) -> int:
    """The delay to send a message due at `due` with now: all of it, or one hop's worth."""
    return max(0, min(HOP_SECONDS, round(due - now)))
