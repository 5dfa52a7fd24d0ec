"""The delivery function's use case: one queued delivery → one attempt, then done, retried later, or kept in
the dead-letter queue.

The webhook is read again (a removed one gets nothing more; its secret is read here only), its target checked
again (a name may resolve otherwise now) and the attempt sent to the address checked. A failure is queued again
with the backoff of `retries` until WEBHOOK_RETRY_SECONDS from the first attempt have passed, then dead-lettered.
Each attempt is signed anew (its own `webhook-timestamp`), under the event's id.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from scheduler.events.model import webhook_body
from scheduler.webhooks import retries, targets
from scheduler.webhooks.sender import Attempt, post
from scheduler.webhooks.signing import headers

if TYPE_CHECKING:
    from scheduler.events.channels import DeliveryQueue
    from scheduler.store.port import WebhooksPort

Send = Callable[[targets.Target, dict[str, str], bytes], Attempt]


class Outcome(NamedTuple):
    """How one queued delivery went: `state` one of delivered, retrying, dead_lettered, dropped, waiting."""

    state: str
    attempts: int = 0
    status: int | None = None
    error: str | None = None
    due: float | None = None  # retrying: when the next attempt is due


class Courier:
    """Delivers queued messages with what the function configured (the clock and randomness replaceable)."""

    def __init__(
        self,
        webhooks: WebhooksPort,
        queue: DeliveryQueue,
        *,
        retry_seconds: int,
        allow_loopback: bool,
        clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
        resolver: targets.Resolve = targets.resolve,
        send: Send = post,
    ) -> None:
        self._webhooks = webhooks
        self._queue = queue
        self._retry_seconds = retry_seconds
        self._allow_loopback = allow_loopback
        self._clock = clock
        self._rng = rng or random.Random()  # noqa: S311 # nosec B311 - jitter, not a secret
        self._resolver = resolver
        self._send = send

    def deliver(self, message: dict[str, Any]) -> Outcome:
        """One attempt at `message` (or, not due yet, sent on towards its due time)."""
        now = self._clock()
        due = message.get("not_before")
        if isinstance(due, int | float) and due > now + 1:
            self._queue.send([message], retries.hop(due, now))
            return Outcome("waiting", int(message.get("attempt", 0)), due=due)
        found = self._webhooks.get(str(message["webhook_id"]))
        document = message["event"]
        if found is None or not found[0].takes(document["type"]):
            return Outcome("dropped", int(message.get("attempt", 0)))
        record, secret = found
        attempts = int(message.get("attempt", 0)) + 1
        try:
            target = targets.check(record.url, self._allow_loopback, self._resolver)
        except targets.TargetRefused as refused:
            attempt = Attempt(None, f"target refused: {refused}")
        else:
            body = webhook_body(document)
            attempt = self._send(target, headers(secret, document["id"], int(now), body), body.encode())
        if attempt.delivered:
            return Outcome("delivered", attempts, attempt.status)
        return self._failed({**message, "attempt": attempts}, attempt, now)

    def _failed(self, message: dict[str, Any], attempt: Attempt, now: float) -> Outcome:
        attempts = int(message["attempt"])
        step = retries.after_failure(float(message["first"]), attempts, now, self._retry_seconds, self._rng)
        failed = {**message, "last_error": attempt.error, "last_status": attempt.status}
        if step.due is None:
            self._queue.dead_letter({**failed, "dead_lettered": now})
            return Outcome("dead_lettered", attempts, attempt.status, attempt.error)
        self._queue.send([{**failed, "not_before": step.due}], step.delay)
        return Outcome("retrying", attempts, attempt.status, attempt.error, step.due)
