"""A loopback proxy in front of the local stack for the console's browser tests: the browser's one way to the stack,
so that a test can see every path the page asked for and change what it gets.

`hide_routes` makes the proxy answer `GET /v1/queue` and `GET /v1/lease/{id}/events` with API Gateway's 404
whatever the stack has: an API without them (an older deploy), as the console must degrade for. `slow_deletes`
holds a DELETE's answer a while after the stack has acted on it: a release whose answer is slow.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import requests

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "host", "server"}
_EVENTS = re.compile(r"^/v1/lease/([^/]+)/events$")
_GATEWAY_404 = {"message": "Not Found"}


@dataclass
class ProxyControls:
    """What a test changes in the proxy's answers: the newer routes hidden, a DELETE's answer held."""

    hide_routes: bool = False
    # Seconds the proxy holds a DELETE's answer after the stack has given it: a release whose answer is slow.
    slow_deletes: float = 0.0


class ConsoleProxy(ThreadingHTTPServer):
    """The proxy on a loopback port; `url` is what the browser opens."""

    daemon_threads = True

    def __init__(self, upstream: str, controls: ProxyControls | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.upstream = upstream
        self.controls = controls or ProxyControls()
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
        controls = self.server.controls
        hidden = self.command == "GET" and (path == "/v1/queue" or _EVENTS.match(path) is not None)
        if hidden and controls.hide_routes:
            self._send(404, {"Content-Type": "application/json"}, json.dumps(_GATEWAY_404).encode())
            return
        try:
            answer = self._forward(self.command, self.path, body)
        except requests.ConnectionError:  # the stack stopped under a page still polling it
            self._send(502, {"Content-Type": "application/json"}, b'{"message":"Bad Gateway"}')
            return
        if self.command == "DELETE" and controls.slow_deletes:
            time.sleep(controls.slow_deletes)
        headers = {name: value for name, value in answer.headers.items() if name.lower() not in _HOP_BY_HOP}
        self._send(answer.status_code, headers, answer.content)

    def _send(self, status: int, headers: dict[str, str], content: bytes) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)
