"""Where events go besides the history: the stack's EventBridge bus, and the webhook delivery queue (SQS, with
its dead-letter queue). Each behind a small protocol with a boto3 implementation and an in-memory one for tests.
`make run` serves both from its embedded moto (devstack/messaging.py)."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any, Protocol

from scheduler.events.model import SOURCE

_PUT_EVENTS_ENTRIES = 10  # PutEvents' limit per call
_SEND_BATCH_ENTRIES = 10  # SendMessageBatch's limit per call


class ChannelFailed(Exception):
    """EventBridge or SQS did not take everything: the stream record (or the delivery) is retried."""


class Bus(Protocol):
    def put(self, documents: Sequence[dict[str, Any]]) -> None:
        """Publish each event (its document as the detail, its type as the detail-type); ChannelFailed otherwise."""


class DeliveryQueue(Protocol):
    def send(self, messages: Sequence[dict[str, Any]], delay_seconds: int = 0) -> None:
        """Queue each delivery, visible after `delay_seconds` (≤ 900); ChannelFailed otherwise."""

    def dead_letter(self, message: dict[str, Any]) -> None:
        """Keep a delivery that ran out of retries in the dead-letter queue."""


class EventBridgeBus:
    """PutEvents on the stack's own bus (EVENT_BUS_NAME), source `openalice.scheduler`."""

    def __init__(self, client: Any, bus_name: str | None) -> None:
        self._client = client
        self._bus = bus_name

    def put(self, documents: Sequence[dict[str, Any]]) -> None:
        if not self._bus:
            raise ChannelFailed("EVENT_BUS_NAME is not configured")
        for start in range(0, len(documents), _PUT_EVENTS_ENTRIES):
            chunk = documents[start : start + _PUT_EVENTS_ENTRIES]
            entries = [
                {
                    "Source": SOURCE,
                    "DetailType": document["type"],
                    "Detail": json.dumps(document, separators=(",", ":")),
                    "EventBusName": self._bus,
                }
                for document in chunk
            ]
            answer = self._client.put_events(Entries=entries)
            if answer.get("FailedEntryCount"):
                codes = {entry.get("ErrorCode") for entry in answer.get("Entries", []) if entry.get("ErrorCode")}
                raise ChannelFailed(f"EventBridge refused {answer['FailedEntryCount']} events: {sorted(codes)}")


class SqsDeliveryQueue:
    """The webhook delivery queue (WEBHOOK_QUEUE_URL) and its dead-letter queue (WEBHOOK_DEAD_LETTER_QUEUE_URL).

    `client` is an SQS client or what makes one when first needed: the events function sends only for owners with
    webhooks, the delivery function only when an attempt failed, and a client costs milliseconds of a cold start."""

    def __init__(self, client: Any, queue_url: str | None, dead_letter_url: str | None) -> None:
        self._made = client if hasattr(client, "send_message_batch") else None
        self._make = client
        self._url = queue_url
        self._dead_letter_url = dead_letter_url

    @property
    def _client(self) -> Any:
        if self._made is None:
            self._made = self._make()
        return self._made

    def send(self, messages: Sequence[dict[str, Any]], delay_seconds: int = 0) -> None:
        if not self._url:
            raise ChannelFailed("WEBHOOK_QUEUE_URL is not configured")
        for start in range(0, len(messages), _SEND_BATCH_ENTRIES):
            chunk = messages[start : start + _SEND_BATCH_ENTRIES]
            entries = [
                {
                    "Id": str(index),
                    "MessageBody": json.dumps(message, separators=(",", ":")),
                    "DelaySeconds": delay_seconds,
                }
                for index, message in enumerate(chunk)
            ]
            answer = self._client.send_message_batch(QueueUrl=self._url, Entries=entries)
            if answer.get("Failed"):
                raise ChannelFailed(f"SQS refused {len(answer['Failed'])} deliveries")

    def dead_letter(self, message: dict[str, Any]) -> None:
        if self._dead_letter_url is None:
            raise ChannelFailed("WEBHOOK_DEAD_LETTER_QUEUE_URL is not configured")
        self._client.send_message(
            QueueUrl=self._dead_letter_url, MessageBody=json.dumps(message, separators=(",", ":"))
        )


class MemoryBus:
    """The documents published, in order."""

    def __init__(self) -> None:
        self.published: list[dict[str, Any]] = []

    def put(self, documents: Sequence[dict[str, Any]]) -> None:
        self.published += [dict(document) for document in documents]


class MemoryQueue:
    """The deliveries queued (with their delays) and dead-lettered, in order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sent: list[tuple[dict[str, Any], int]] = []
        self.dead: list[dict[str, Any]] = []

    def send(self, messages: Sequence[dict[str, Any]], delay_seconds: int = 0) -> None:
        with self._lock:
            self.sent += [(json.loads(json.dumps(message)), delay_seconds) for message in messages]

    def dead_letter(self, message: dict[str, Any]) -> None:
        with self._lock:
            self.dead.append(json.loads(json.dumps(message)))
