"""A loopback proxy in front of the local stack for the console's browser tests, with a stand-in for the one route
the console reads that this build lacks yet: `GET /v1/queue` (issue 26), and the preemption notices that come with
it (`preempt_at` on a live lease).

Every request goes to the stack first; the stand-in answers only when the stack answers API Gateway's own 404 (no
such route), so once the route exists the stack's answer is the one the console sees and the stand-in is never
used. It answers in the shape issue 26 gives the route (openapi.yaml on i26-queue): `{"queue": [LiveLease with
queue_position, ...]}`; a lease named in `notices` gets its `preempt_at` where the stack's lease has no such field.

`hide_routes` makes the proxy answer `GET /v1/queue` and `GET /v1/lease/{id}/events` with API Gateway's 404
whatever the stack has: an API without them (an older deploy), as the console must degrade for. `slow_deletes`
holds a DELETE's answer a while after the stack has acted on it: a release whose answer is slow.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import requests

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "host", "server"}
_EVENTS = re.compile(r"^/v1/lease/([^/]+)/events$")
_ONE_LEASE = re.compile(r"^/v1/lease/([^/]+)$")
_GATEWAY_404 = {"message": "Not Found"}


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class StandIns:
    """What the stand-in answers, which of its parts were used, and whether the proxy hides the newer routes."""

    # stand-in (issue 26): these three go at its merge.
    queue: list[dict[str, Any]] = field(default_factory=list)  # queued leases, in admission order
    notices: dict[str, dict[str, Any]] = field(default_factory=dict)  # lease id → preempt_at, priority, preemptible
    used: set[str] = field(default_factory=set)
    hide_routes: bool = False
    # Seconds the proxy holds a DELETE's answer after the stack has given it: a release whose answer is slow.
    slow_deletes: float = 0.0


class ConsoleProxy(ThreadingHTTPServer):
    """The proxy on a loopback port; `url` is what the browser opens."""

    daemon_threads = True

    def __init__(self, upstream: str, stand_ins: StandIns | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.upstream = upstream
        self.stand_ins = stand_ins or StandIns()
        self.paths: list[str] = []
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_port}"

    def start(self) -> ConsoleProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: ConsoleProxy
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._proxy()

    def do_POST(self) -> None:
        self._proxy()

    def do_DELETE(self) -> None:
        self._proxy()

    def _forward(self, method: str, target: str, body: bytes | None = None) -> requests.Response:
        headers = {name: value for name, value in self.headers.items() if name.lower() not in _HOP_BY_HOP}
        return requests.request(
            method, self.server.upstream + target, headers=headers, data=body, timeout=60, allow_redirects=False
        )

    def _proxy(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        path = urlsplit(self.path).path
        self.server.paths.append(self.path)
        stand_ins = self.server.stand_ins
        hidden = self.command == "GET" and (path == "/v1/queue" or _EVENTS.match(path) is not None)
        if hidden and stand_ins.hide_routes:
            self._send(404, {"Content-Type": "application/json"}, json.dumps(_GATEWAY_404).encode())
            return
        is_stood_in = self.command == "GET" and path == "/v1/queue"  # stand-in (issue 26): goes at its merge
        try:
            answer = self._forward(self.command, self.path, body)
        except requests.ConnectionError:  # the stack stopped under a page still polling it
            self._send(502, {"Content-Type": "application/json"}, b'{"message":"Bad Gateway"}')
            return
        content = answer.content
        if self.command == "DELETE" and stand_ins.slow_deletes:
            time.sleep(stand_ins.slow_deletes)
        if is_stood_in and answer.status_code == 404 and _is_gateway_404(content):
            status, content = self._stand_in()
            self._send(status, {"Content-Type": "application/json"}, content)
            return
        if self.command == "GET" and answer.status_code == 200 and stand_ins.notices:  # stand-in (issue 26)
            content = self._with_notices(path, content)
        headers = {name: value for name, value in answer.headers.items() if name.lower() not in _HOP_BY_HOP}
        self._send(answer.status_code, headers, content)

    def _stand_in(self) -> tuple[int, bytes]:
        """`GET /v1/queue` where the stack has no such route (stand-in, issue 26: goes at its merge)."""
        if not (self.headers.get("Authorization") or self.headers.get("X-Internal-Secret")):
            return 401, json.dumps({"message": "Unauthorized"}).encode()
        self.server.stand_ins.used.add("queue")
        return 200, json.dumps({"queue": self.server.stand_ins.queue}).encode()

    def _with_notices(self, path: str, content: bytes) -> bytes:
        """A stack lease named in `notices` gets its preemption notice, where the stack gives none (stand-in, issue
        26: goes at its merge)."""
        if path != "/v1/leases" and not _ONE_LEASE.match(path):
            return content
        document = json.loads(content)
        leases = document.get("leases") or ([document["lease"]] if "lease" in document else [])
        for lease in leases:
            notice = self.server.stand_ins.notices.get(lease.get("lease_id"))
            if notice and "preempt_at" not in lease:
                lease.update(notice)
                self.server.stand_ins.used.add("notices")
        return json.dumps(document).encode()

    def _send(self, status: int, headers: dict[str, str], content: bytes) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)


def _is_gateway_404(content: bytes) -> bool:
    try:
        return bool(json.loads(content) == _GATEWAY_404)
    except ValueError:
        return False
