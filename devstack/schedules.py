"""EventBridge schedules, emulated: each scheduled function invoked every N seconds with a Scheduled Event."""

from __future__ import annotations

import logging
import threading
import uuid
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
    """Invokes one function every `interval_seconds` until stopped."""

    def __init__(self, lambdas: LocalLambda, function: str, interval_seconds: float) -> None:
        self._lambdas = lambdas
        self.function = function
        self.interval_seconds = interval_seconds

    def run(self, stop: threading.Event) -> None:
        """Fire on every interval (the first one interval after start, as a rate rule does)."""
        while not stop.wait(self.interval_seconds):
            try:
                self._lambdas.invoke(self.function, scheduled_event(f"{self.function}-schedule"))
            except FunctionError as error:
                log.error("scheduled invocation of %s failed: %s", self.function, error)
