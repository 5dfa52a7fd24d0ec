"""A webhook receiver on loopback that verifies every delivery with the Standard Webhooks specification's own
`standardwebhooks` package, as a caller's endpoint would: for the integration tests and the bench."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError


@dataclass
class Delivery:
    """One request the receiver took: when, what, and whether it verified."""

    received: float  # epoch seconds
    headers: dict[str, str]
    body: bytes
    status: int
    verified: bool

    @property
    def event(self) -> dict[str, Any]:
        return dict(json.loads(self.body))

    @property
    def event_id(self) -> str:
        return self.headers["webhook-id"]


@dataclass
class Receiver:
    """What it answers (`refuse_until`: 503 until then, epoch seconds) and what it got."""

    secret: str | None = None
    refuse_until: float = 0.0
    deliveries: list[Delivery] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""

    def take(self, headers: dict[str, str], body: bytes) -> int:
        now = time.time()
        verified = False
        if self.secret is not None:
            try:
                Webhook(self.secret).verify(body.decode(), headers)
                verified = True
            except (WebhookVerificationError, ValueError):
                verified = False
        status = 503 if now < self.refuse_until else (204 if verified else 400)
        with self.lock:
            self.deliveries.append(Delivery(now, headers, body, status, verified))
        return status

    def accepted(self) -> list[Delivery]:
        """The deliveries it answered 2xx (each verified), in the order they came."""
        with self.lock:
            return [delivery for delivery in self.deliveries if delivery.status == 204]

    def events_of(self, lease_id: str) -> list[dict[str, Any]]:
        """The accepted events of one lease, once each (by webhook-id), by sequence."""
        seen: dict[str, dict[str, Any]] = {}
        for delivery in self.accepted():
            event = delivery.event
            if event["data"]["lease_id"] == lease_id:
                seen.setdefault(delivery.event_id, event)
        return sorted(seen.values(), key=lambda event: event["data"]["sequence"])

    def wait_for(self, lease_id: str, types: list[str], timeout: float = 30.0) -> list[dict[str, Any]]:
        """The lease's accepted events once their types are `types` in order (AssertionError after `timeout`)."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.events_of(lease_id)
            if [event["type"] for event in found] == types or time.monotonic() > deadline:
                assert [event["type"] for event in found] == types, f"got {[e['type'] for e in found]}"
                return found
            time.sleep(0.1)


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            status = receiver.take({key.lower(): value for key, value in self.headers.items()}, body)
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@contextmanager
def receiving() -> Iterator[Receiver]:
    """A receiver listening on loopback (`receiver.url`) until the block ends."""
    receiver = Receiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
    receiver.url = f"http://127.0.0.1:{server.server_port}/hooks"
    thread = threading.Thread(target=server.serve_forever, name="webhook-receiver", daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
