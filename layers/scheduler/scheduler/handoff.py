"""Handing a scheduled run's unfinished work on to another invocation of the same function, at once.

A sweep that meets its deadline (or reads a full batch) leaves the rest due and unclaimed; waiting
for the next scheduled run would keep those workers running, and billing, for another minute. So it
invokes its own function asynchronously (InvocationType=Event) with a hop count, and that invocation
carries on. The hop count bounds the chain: past `MAX_HOPS` the scheduled runs take over.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from scheduler.observability.log import Logger

logger = Logger(child=True)

MAX_HOPS = 10
HOP_KEY = "handoff_hop"


class Handoff(Protocol):
    """Where a run's remaining work goes."""

    def hand_on(self, function_name: str, hop: int) -> bool:
        """Start another invocation of `function_name` as hop `hop`; False when it could not be started."""


def hop_of(event: Any) -> int:
    """Which hand-off this invocation is (0: a scheduled run)."""
    hop = event.get(HOP_KEY) if isinstance(event, dict) else None
    return hop if isinstance(hop, int) and hop > 0 else 0


def continuation(hop: int) -> dict[str, Any]:
    """The event a hand-off sends."""
    return {"source": "openalice.scheduler.handoff", HOP_KEY: hop}


class LambdaHandoff:
    """Asynchronous self-invocation through the Lambda API (a client with short timeouts, built on first use)."""

    def __init__(self, client: Any = None) -> None:
        self._client = client

    def hand_on(self, function_name: str, hop: int) -> bool:
        if hop > MAX_HOPS:
            logger.warning("hand-off chain at its limit; the next scheduled run carries on", extra={"hop": hop})
            return False
        try:
            self.client.invoke(
                FunctionName=function_name,
                InvocationType="Event",
                Payload=json.dumps(continuation(hop)).encode(),
            )
        except Exception as error:  # noqa: BLE001 - the next scheduled run is the fallback
            logger.warning("could not hand the rest on", extra={"error": str(error), "hop": hop})
            return False
        logger.info("handed the rest on", extra={"function": function_name, "hop": hop})
        return True

    @property
    def client(self) -> Any:
        if self._client is None:
            import boto3
            from botocore.config import Config

            config = Config(connect_timeout=2, read_timeout=5, retries={"mode": "standard", "max_attempts": 3})
            self._client = boto3.client("lambda", config=config)
        return self._client
