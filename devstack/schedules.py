"""EventBridge schedules, emulated: each scheduled function invoked every N seconds with a Scheduled Event."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from devstack.lambdas import FunctionError, LocalLambda

log = logging.getLogger("devstack.schedules")


def scheduled_event(rule_name: str) -> dict[str, Any]:
    """An EventBridge "Scheduled Event" as a schedule rule delivers it."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "000000000000",
        "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": "us-east-1",
        "resources": [f"arn:aws:events:us-east-1:000000000000:rule/{rule_name}"],
        "detail": {},
    }


class Schedule:
    """Invokes one function every `interval_seconds` until stopped, start to start, as a rate rule does.

    A run's own length does not push the next one back (a sweep that spends two seconds warning must not release
    due leases two seconds later). A run that outlasts its interval is followed at once by the next: EventBridge
    would start that one alongside it, but `make run`'s runs of one schedule never overlap.
    """

    def __init__(self, lambdas: LocalLambda, function: str, interval_seconds: float) -> None:
        self._lambdas = lambdas
        self.function = function
        self.interval_seconds = interval_seconds

    def run(self, stop: threading.Event, clock: Callable[[], float] = time.monotonic) -> None:
        """Fire on every interval (the first one interval after start, as a rate rule does)."""
        next_run = clock() + self.interval_seconds
        while not stop.wait(max(0.0, next_run - clock())):
            try:
                self._lambdas.invoke(self.function, scheduled_event(f"{self.function}-schedule"))
            except FunctionError as error:
                log.error("scheduled invocation of %s failed: %s", self.function, error)
            next_run = max(next_run + self.interval_seconds, clock())
