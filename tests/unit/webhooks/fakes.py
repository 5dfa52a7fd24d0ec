"""What the courier's tests arrange: a registry with one webhook, a fake clock, a receiver that answers as told,
a queue that records (and can be drained as SQS would hand the messages back once due)."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

from scheduler.events.channels import MemoryQueue
from scheduler.store.memory.webhooks import MemoryWebhooks
from scheduler.webhooks.deliver import Courier
from scheduler.webhooks.model import WebhookRecord
from scheduler.webhooks.sender import Attempt
from scheduler.webhooks.signing import new_secret
from scheduler.webhooks.targets import Target

START = 1_796_011_200.0
PUBLIC = "93.184.215.14"
URL = "https://hooks.example.com/in"
DOCUMENT = {
    "id": "evt_" + "ab" * 16,
    "type": "lease.ready",
    "timestamp": "2026-11-30T04:00:03Z",
    "data": {"lease_id": "3f2b8c1e-6d4a-4f7b-9c2e-1a5d7e9b0c42", "owner_id": "anim", "sequence": 2},
}


class Clock:
    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Receiver:
    """Answers each attempt with the next of `statuses` (the last one from then on); records what it got."""

    def __init__(self, *statuses: int | None) -> None:
        self.statuses = list(statuses) or [200]
        self.got: list[tuple[Target, dict[str, str], bytes]] = []

    def __call__(self, target: Target, headers: dict[str, str], body: bytes) -> Attempt:
        self.got.append((target, headers, body))
        status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        if status is None:
            return Attempt(None, "TimeoutError: timed out")
        return Attempt(status, None if 200 <= status < 300 else f"answered {status}")


class Arranged:
    def __init__(
        self, receiver: Receiver, *, retry_seconds: int = 86_400, addresses: Sequence[str] = (PUBLIC,)
    ) -> None:
        self.webhooks = MemoryWebhooks()
        self.secret = new_secret()
        self.record = WebhookRecord("wh_" + "0" * 32, URL, ("lease.ready", "lease.failed"), "anim", int(START), "anim")
        self.webhooks.create(self.record, self.secret)
        self.queue = MemoryQueue()
        self.clock = Clock()
        self.addresses = list(addresses)
        self.receiver = receiver
        self.courier = Courier(
            self.webhooks,
            self.queue,
            retry_seconds=retry_seconds,
            allow_loopback=False,
            clock=self.clock,
            rng=random.Random(7),
            resolver=lambda host, port: self.addresses,
            send=receiver,
        )

    def message(self) -> dict[str, Any]:
        return {"webhook_id": self.record.webhook_id, "event": DOCUMENT, "first": self.clock.now, "attempt": 0}

    def run_until_settled(self, most: int = 500) -> list[tuple[float, str]]:
        """Deliver the first message, then each message queued again at the time SQS would hand it back; the
        (time, state) of every hand-over."""
        states: list[tuple[float, str]] = []
        pending: list[tuple[float, dict[str, Any]]] = [(self.clock.now, self.message())]
        while pending and len(states) < most:
            pending.sort(key=lambda entry: entry[0])
            at, message = pending.pop(0)
            self.clock.now = max(self.clock.now, at)
            before = len(self.queue.sent)
            outcome = self.courier.deliver(json.loads(json.dumps(message)))
            states.append((self.clock.now, outcome.state))
            for sent, delay in self.queue.sent[before:]:
                pending.append((self.clock.now + delay, sent))
        return states
