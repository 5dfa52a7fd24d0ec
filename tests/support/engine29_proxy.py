"""A stand-in for Docker Engine 29's API version gate, in front of a real Engine 20.10 (API 1.41).

Engine 29 (November 2025) speaks API 1.44–1.52: its `/version` says `ApiVersion` 1.52 and
`MinAPIVersion` 1.44, and it refuses a request whose path names an older version with 400
"client version 1.41 is too old. Minimum supported API version is 1.44, please upgrade your client to
a newer version". This proxy answers exactly that way, and forwards every other request to the real
engine with the path's version rewritten down to what that engine speaks, so containers are really
made. It terminates mutual TLS with the host's own server certificate (clients keep verifying the
host as before) and talks mutual TLS to the engine with the host's client certificate.

Loopback only. `mute=True` makes it an engine that completes the TLS handshake, reads the request
and never answers (a frozen dockerd). `delays` makes requests of a method take that much longer
(`{"DELETE": 0.5}`: an engine whose container removal takes half a second).
"""

from __future__ import annotations

import http.client
import json
import re
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlparse

MIN_API_VERSION = "1.44"
MAX_API_VERSION = "1.52"
ENGINE_VERSION = "29.0.0"
_VERSIONED = re.compile(r"^/v(\d+)\.(\d+)(/.*)$")
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "te", "trailer", "upgrade"}


def _parse(version: str) -> tuple[int, int]:
    major, minor = version.split(".")
    return int(major), int(minor)


@dataclass
class Engine29Proxy:
    """Listens on `address` (default 127.0.0.1, a free port); `host` is its DOCKER_HOST."""

    upstream: str  # tcp://127.0.0.1:PORT of the real engine
    cert_path: Path  # the host's TLS directory: ca.pem, server-cert.pem, server-key.pem, cert.pem, key.pem
    upstream_api_version: str = "1.41"
    address: str = "127.0.0.1"
    mute: bool = False
    delays: dict[str, float] = field(default_factory=dict)  # HTTP method → seconds added before forwarding
    requests_seen: list[str] = field(default_factory=list)
    most_in_flight: dict[str, int] = field(default_factory=dict)  # HTTP method → most requests of it at once
    _in_flight: dict[str, int] = field(default_factory=dict)
    _counting: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None
    _release: threading.Event = field(default_factory=threading.Event)

    @property
    def host(self) -> str:
        assert self._server is not None
        return f"tcp://{self.address}:{self._server.server_address[1]}"

    def env(self) -> dict[str, str]:
        """DOCKER_* variables that point a client at the proxy, with the host's own certificates."""
        return {"DOCKER_HOST": self.host, "DOCKER_CERT_PATH": str(self.cert_path), "DOCKER_TLS_VERIFY": "1"}

    def start(self) -> Engine29Proxy:
        server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(self.cert_path / "ca.pem"))
        server_context.verify_mode = ssl.CERT_REQUIRED  # as dockerd --tlsverify: clients must present a cert
        server_context.verify_flags &= ~ssl.VERIFY_X509_STRICT
        server_context.load_cert_chain(self.cert_path / "server-cert.pem", self.cert_path / "server-key.pem")
        upstream_context = ssl.create_default_context(cafile=str(self.cert_path / "ca.pem"))
        upstream_context.verify_flags &= ~ssl.VERIFY_X509_STRICT
        upstream_context.load_cert_chain(self.cert_path / "cert.pem", self.cert_path / "key.pem")
        proxy = self

        class Handler(_Engine29Handler):
            owner = proxy
            upstream_tls = upstream_context

        server = _QuietServer((self.address, 0), Handler)
        server.daemon_threads = True
        # The handshake happens in the handler thread, so one stuck client cannot block the accept loop.
        server.socket = server_context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="engine29-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


class _QuietServer(ThreadingHTTPServer):
    """Refused handshakes are what several tests provoke; no traceback on stderr for each."""

    def handle_error(self, request: object, client_address: object) -> None:
        return


class _Engine29Handler(BaseHTTPRequestHandler):
    owner: Engine29Proxy
    upstream_tls: ssl.SSLContext
    protocol_version = "HTTP/1.1"
    server_version = f"Docker/{ENGINE_VERSION} (linux)"
    sys_version = ""

    def log_message(self, format: str, *args: object) -> None:
        return

    def do_GET(self) -> None:
        self._handle()

    def do_HEAD(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def _handle(self) -> None:
        owner = self.owner
        with owner._counting:
            owner._in_flight[self.command] = owner._in_flight.get(self.command, 0) + 1
            owner.most_in_flight[self.command] = max(
                owner.most_in_flight.get(self.command, 0), owner._in_flight[self.command]
            )
        try:
            self._answer()
        finally:
            with owner._counting:
                owner._in_flight[self.command] -= 1

    def _answer(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.owner.requests_seen.append(f"{self.command} {self.path}")
        if self.owner.mute:
            self.owner._release.wait(600)  # a frozen engine: the request is read and never answered
            self.close_connection = True
            return
        delay = self.owner.delays.get(self.command, 0.0)
        if delay > 0:
            time.sleep(delay)
        path, _, query = self.path.partition("?")
        versioned = _VERSIONED.match(path)
        if versioned:
            asked = f"{versioned[1]}.{versioned[2]}"
            if _parse(asked) < _parse(MIN_API_VERSION):
                self._json(
                    400,
                    {
                        "message": f"client version {asked} is too old. Minimum supported API version is"
                        f" {MIN_API_VERSION}, please upgrade your client to a newer version"
                    },
                )
                return
            if _parse(asked) > _parse(MAX_API_VERSION):
                too_new = f"client version {asked} is too new. Maximum supported API version is {MAX_API_VERSION}"
                self._json(400, {"message": too_new})
                return
            path = f"/v{self.owner.upstream_api_version}{versioned[3]}"
        if (versioned[3] if versioned else path) == "/version":
            self._json(200, self._version())
            return
        status, headers, payload = self._forward(path + (f"?{query}" if query else ""), body)
        self.send_response(status)
        for name, value in headers:
            if name.lower() not in _HOP_BY_HOP and name.lower() not in ("server", "api-version"):
                self.send_header(name, value)
        self.send_header("Api-Version", MAX_API_VERSION)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _version(self) -> dict[str, object]:
        _, _, real = self._forward(f"/v{self.owner.upstream_api_version}/version", b"", method="GET")
        answer = dict(json.loads(real))
        answer.update({"Version": ENGINE_VERSION, "ApiVersion": MAX_API_VERSION, "MinAPIVersion": MIN_API_VERSION})
        return answer

    def _forward(self, path: str, body: bytes, method: str | None = None) -> tuple[int, list[tuple[str, str]], bytes]:
        upstream = urlparse(self.owner.upstream.replace("tcp://", "https://"))
        connection = http.client.HTTPSConnection(
            str(upstream.hostname), upstream.port, context=self.upstream_tls, timeout=60
        )
        headers = {name: value for name, value in self.headers.items() if name.lower() not in _HOP_BY_HOP}
        headers["Host"] = f"{upstream.hostname}:{upstream.port}"
        try:
            connection.request(method or self.command, path, body=body or None, headers=headers)
            response = connection.getresponse()
            return response.status, response.getheaders(), response.read()
        finally:
            connection.close()

    def _json(self, status: int, document: dict[str, object]) -> None:
        payload = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Api-Version", MAX_API_VERSION)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
