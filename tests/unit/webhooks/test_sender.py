"""One attempt over HTTP (`scheduler/webhooks/sender.py`), against a receiver on loopback: delivered on 2xx, a
redirect not followed, a slow receiver given up on at the timeout, the connection made to the checked address
whatever the name."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from scheduler.webhooks.sender import post
from scheduler.webhooks.targets import Target


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", "0"))
        self.server.got.append((self.path, dict(self.headers), self.rfile.read(length)))  # type: ignore[attr-defined]
        mode = self.server.mode  # type: ignore[attr-defined]
        if mode == "slow":
            time.sleep(1.5)
        status = {"ok": 204, "redirect": 307, "slow": 200, "error": 503}[mode]
        self.send_response(status)
        if status == 307:
            self.send_header("location", "http://127.0.0.1:1/elsewhere")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.got = []  # type: ignore[attr-defined]
    httpd.mode = "ok"  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def target(server: ThreadingHTTPServer, host: str = "receiver.invalid") -> Target:
    return Target("http", host, server.server_port, "/hook?x=1", "127.0.0.1")


def test_a_2xx_is_delivered_with_the_body_and_headers(server: ThreadingHTTPServer) -> None:
    attempt = post(target(server), {"webhook-id": "evt_1", "content-type": "application/json"}, b'{"a":1}')

    ((path, headers, body),) = server.got  # type: ignore[attr-defined]
    assert attempt.delivered and attempt.status == 204
    assert (path, body, headers["webhook-id"]) == ("/hook?x=1", b'{"a":1}', "evt_1")


def test_the_connection_goes_to_the_checked_address_and_names_the_urls_host(server: ThreadingHTTPServer) -> None:
    post(target(server, "hooks.example.com"), {}, b"{}")

    ((_, headers, _),) = server.got  # type: ignore[attr-defined]
    assert headers["Host"] == f"hooks.example.com:{server.server_port}"


def test_a_redirect_is_not_followed_and_is_no_delivery(server: ThreadingHTTPServer) -> None:
    server.mode = "redirect"  # type: ignore[attr-defined]

    attempt = post(target(server), {}, b"{}")

    assert not attempt.delivered and attempt.status == 307 and "not followed" in str(attempt.error)
    assert len(server.got) == 1  # type: ignore[attr-defined]


def test_an_error_answer_is_no_delivery(server: ThreadingHTTPServer) -> None:
    server.mode = "error"  # type: ignore[attr-defined]

    assert post(target(server), {}, b"{}").error == "answered 503"


def test_a_slow_receiver_is_given_up_on_at_the_timeout(server: ThreadingHTTPServer) -> None:
    server.mode = "slow"  # type: ignore[attr-defined]
    started = time.monotonic()

    attempt = post(target(server), {}, b"{}", timeout=0.3)

    assert not attempt.delivered and attempt.status is None and time.monotonic() - started < 1.2


def test_nothing_listening_is_no_delivery() -> None:
    attempt = post(Target("http", "receiver.invalid", 1, "/", "127.0.0.1"), {}, b"{}", timeout=1)

    assert not attempt.delivered and "ConnectionRefusedError" in str(attempt.error)
