"""A tiny in-memory lease API on 127.0.0.1 for the client's unit tests, with scripted faults.

It speaks the wire shapes of openapi.yaml: the error envelope, API Gateway's own 401/403
bodies, Idempotency-Key (same key and body → same lease, different body → 409), paging, and who is calling in
each AUTH_MODE with the callers registry (`auth`, a `fake_callers.Registry`: `auth.mode` secret, token or iam). Faults
are queued per method and path pattern: answer with a status, drop the connection before doing
anything, or do the work and then drop the connection (the answer is lost on the way back).
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.client.fake_callers import Registry
from tests.client.fake_queue import FakeQueue

SECRET = "fake-secret"
_DROP = object()


def _time(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Recorded:
    """One request the fake received."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    raw_body: bytes
    raw_query: str = ""

    def header(self, name: str) -> str | None:
        """A header by name, case-insensitively."""
        return self.headers.get(name.lower())


@dataclass
class Fault:
    """A scripted misbehaviour for requests matching `method` and the `path` regex."""

    method: str
    path: str
    mode: str  # "respond" | "drop" | "apply_then_drop"
    status: int = 503
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    times: int = 1


@dataclass
class FakeScheduler(FakeQueue):
    """The in-memory service. `url` once started; `requests` records everything received. With `cap`, at most
    that many leases hold a slot and the rest may wait in its queue (`fake_queue`)."""

    secret: str = SECRET
    page_size: int = 1000
    acquire_delay: float = 0.0
    leases: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    idempotency: dict[str, tuple[bytes, str]] = field(default_factory=dict)
    # Readiness: with `boot_gets` set, new leases start `starting` and turn `ready` on that many reads
    # (or `failed` with `boot_failure` as the reason, when set).
    boot_gets: int | None = None
    boot_failure: str | None = None
    booting: dict[str, int] = field(default_factory=dict)
    output: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # lease id → (RFC 3339 time, line)
    auth: Registry = field(default_factory=Registry)
    cap: int | None = None
    queue_version: int = 0
    url: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    # --- control -----------------------------------------------------------------------------------

    def start(self) -> FakeScheduler:
        """Serve on a free loopback port in a background thread."""
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                parts = urlsplit(self.path)
                query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
                headers = {key.lower(): value for key, value in self.headers.items()}
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw
                recorded = Recorded(self.command, parts.path, query, headers, body, raw, parts.query)
                answer = fake._handle(recorded)
                if answer is _DROP:
                    self.close_connection = True
                    return
                status, extra_headers, payload = answer
                text = isinstance(payload, bytes)  # a worker's logs
                data = payload if text else b"" if payload is None else json.dumps(payload).encode()
                self.send_response(status)
                for key, value in extra_headers.items():
                    self.send_header(key, value)
                if text:
                    self.send_header("Content-Type", "text/plain; charset=utf-8")
                elif data:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = _serve

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-scheduler", daemon=True
        ).start()
        return self

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def fail(
        self,
        method: str,
        path: str,
        *,
        status: int = 503,
        code: str | None = None,
        body: Any = None,
        headers: dict[str, str] | None = None,
        times: int = 1,
        mode: str = "respond",
    ) -> None:
        """Queue a fault for the next `times` requests matching `method` and the `path` regex."""
        if body is None and code is not None:
            body = {"error": {"code": code, "message": f"scripted {code}"}}
        self.faults.append(Fault(method, path, mode, status, body, dict(headers or {}), times))

    def calls(self, method: str, path_pattern: str = ".*") -> list[Recorded]:
        """The recorded requests matching `method` and the path regex."""
        return [r for r in self.requests if r.method == method and re.fullmatch(path_pattern, r.path)]

    def add_lease(self, **fields: Any) -> dict[str, Any]:
        """Put a live lease straight into the store (for list/paging tests); `status` default active."""
        now = datetime.now(UTC)
        status = fields.pop("status", "active")
        lease = {**self._new_lease({"kind": "renderer", **fields}, now), "status": status}
        with self._lock:
            self.leases[lease["lease_id"]] = lease
        return lease

    # --- the API -----------------------------------------------------------------------------------

    def _handle(self, request: Recorded) -> Any:
        with self._lock:
            self.requests.append(request)
            fault = next(
                (f for f in self.faults if f.method == request.method and re.fullmatch(f.path, request.path)), None
            )
            if fault is not None:
                fault.times -= 1
                if fault.times <= 0:
                    self.faults.remove(fault)
        if fault is not None and fault.mode == "drop":
            return _DROP
        if fault is not None and fault.mode == "respond":
            return fault.status, fault.headers, fault.body
        answer = self._route(request)
        if fault is not None and fault.mode == "apply_then_drop":
            return _DROP
        return answer

    def _route(self, request: Recorded) -> tuple[int, dict[str, str], Any]:
        if request.path == "/health" and request.method == "GET":
            return 200, {}, {"status": "ok", "service": "openalice-scheduler"}
        with self._lock:
            role, refusal = self.auth.authenticate(request, self.secret)
            if refusal is not None:
                return refusal
            callers = self.auth.route(request, role)
        if callers is not None:
            return callers
        path = request.path
        if path == "/v1/lease" and request.method == "POST":
            return self._acquire(request)
        if path == "/v1/leases" and request.method == "GET":
            return self._list(request)
        if path == "/v1/leases" and request.method == "DELETE":
            return self._release_all(request)
        logs = re.fullmatch(r"/v1/lease/([^/]+)/logs", path)
        if logs and request.method == "GET":
            return self._logs(unquote(logs.group(1)), request)
        if path == "/v1/usage" and request.method == "GET":
            return self._usage(request)
        if path == "/v1/queue" and request.method == "GET":
            return self._queue(request)
        match = re.fullmatch(r"/v1/lease/([^/]+)(/renew)?", path)
        if match:
            lease_id = unquote(match.group(1))
            if match.group(2) and request.method == "POST":
                return self._renew(lease_id, request)
            if not match.group(2) and request.method == "GET":
                self._await_queue(lease_id, int(request.query.get("wait_ready", "0")))
                return self._get(lease_id)
            if not match.group(2) and request.method == "DELETE":
                return self._release(lease_id, request)
        return 404, {}, {"message": "Not Found"}

    @staticmethod
    def _error(status: int, code: str, message: str, details: dict[str, Any] | None = None) -> tuple[int, dict, Any]:
        error: dict[str, Any] = {"code": code, "message": message}
        if details:
            error["details"] = details
        return status, {}, {"error": error}

    def _new_lease(self, body: dict[str, Any], now: datetime) -> dict[str, Any]:
        ttl = int(body.get("ttl_seconds", 3600))
        lease_id = str(uuid.uuid4())
        return {
            "lease_id": lease_id,
            "provider": "fake",
            "kind": body["kind"],
            "gpu": body.get("gpu", "none"),
            "status": "active",
            "endpoint": f"http://127.0.0.1:9/{lease_id[:8]}",
            "created_at": _time(now),
            "expires_at": _time(now + timedelta(seconds=ttl)),
            "released_at": None,
            "provider_token": "c-" + lease_id[:12],
            "owner_id": body.get("owner_id"),
            "correlation_id": body.get("correlation_id"),
            "region": body.get("region"),
            "ttl_seconds": ttl,
            "cost_per_hour": None,
            "failure_reason": None,
            "worker_state": "ready" if self.boot_gets is None else "starting",
            "ready_at": _time(now) if self.boot_gets is None else None,
            "max_cost_per_hour": body.get("max_cost_per_hour"),
            "cost_usd": None,
            "created_by": "shared-secret",
            "ended_by": None,
            "priority": body.get("priority", 50),
            "preemptible": bool(body.get("preemptible", False)),
            "queued_at": None,
            "queued_until": None,
            "queue_reason": None,
            "admitted_at": None,
            "preempt_at": None,
            "preempt_priority": None,
            "env": body.get("env") or {},  # not a contract field: lets tests see what was sent
        }

    def _acquire(self, request: Recorded) -> tuple[int, dict[str, str], Any]:
        body = request.body
        if not isinstance(body, dict) or body.get("kind") not in ("renderer", "anim"):
            return self._error(400, "invalid_request", "invalid request body", {"problems": [{"field": "kind"}]})
        key = request.header("Idempotency-Key")
        with self._lock:
            if key and key in self.idempotency:
                seen_body, lease_id = self.idempotency[key]
                if seen_body != request.raw_body:
                    return self._error(409, "conflict", "Idempotency-Key reused with a different body")
                lease = self.leases[lease_id]
                if lease["status"] == "queued":
                    return 202, {}, {"lease": self._placed(lease), "provider": lease["provider"]}
                return 201, {}, {"lease": lease, "provider": lease["provider"]}
        if self.acquire_delay:
            time.sleep(self.acquire_delay)
        lease = self._new_lease(body, datetime.now(UTC))
        with self._lock:
            if self._full():
                if not body.get("queue_seconds"):
                    return self._error(503, "no_capacity", f"every provider is at its lease cap ({self.cap})")
                if key:
                    self.idempotency[key] = (request.raw_body, lease["lease_id"])
                return self._enqueue(lease, int(body["queue_seconds"]), datetime.now(UTC))
            self.leases[lease["lease_id"]] = lease
            if self.boot_gets is not None:
                self.booting[lease["lease_id"]] = self.boot_gets
            if key:
                self.idempotency[key] = (request.raw_body, lease["lease_id"])
        return 201, {}, {"lease": lease, "provider": lease["provider"]}

    def _usage(self, request: Recorded) -> tuple[int, dict[str, str], Any]:
        today = datetime.now(UTC).strftime("%Y-%m-%d")
        group = request.query.get("group_by", "owner")
        row: dict[str, Any] = {"owner_id": request.query.get("owner_id", "anim")}
        if group != "owner":
            row[group] = "renderer" if group == "kind" else "fake"
        row.update({"leases": 2, "lease_seconds": 1800, "cost_usd": 0.345})
        since = request.query.get("since", today)
        return 200, {}, {"usage": [row], "since": since, "until": request.query.get("until", max(today, since))}

    def _live(self, lease: dict[str, Any]) -> bool:
        expires = datetime.fromisoformat(lease["expires_at"])
        return lease["status"] == "active" and expires > datetime.now(UTC)

    def _listed(self, lease: dict[str, Any]) -> bool:
        """As the service lists: pending and active leases until they expire, releasing ones until they end."""
        expires = datetime.fromisoformat(lease["expires_at"])
        unexpired = lease["status"] in ("pending", "active", "queued") and expires > datetime.now(UTC)
        return unexpired or lease["status"] == "releasing"

    def _list(self, request: Recorded) -> tuple[int, dict[str, str], Any]:
        limit = int(request.query.get("limit", "100"))
        if not 1 <= limit <= 1000:
            return self._error(400, "invalid_request", "limit must be 1..1000")
        start = int(request.query.get("next_token", "0"))
        with self._lock:
            live = [
                lease
                for lease in self.leases.values()
                if self._listed(lease)
                and all(request.query.get(f) in (None, lease[f]) for f in ("owner_id", "kind", "provider"))
            ]
        size = min(limit, self.page_size)
        page = live[start : start + size]
        token = str(start + size) if start + size < len(live) else None
        return 200, {}, {"leases": page, "next_token": token}

    def _get(self, lease_id: str) -> tuple[int, dict[str, str], Any]:
        lease = self.leases.get(lease_id)
        with self._lock:
            if lease is not None and lease_id in self.booting and lease["status"] == "active":
                self.booting[lease_id] -= 1
                if self.booting[lease_id] <= 0:
                    del self.booting[lease_id]
                    if self.boot_failure is None:
                        lease.update(worker_state="ready", ready_at=_time(datetime.now(UTC)))
                    else:
                        lease.update(
                            status="failed", failure_reason=self.boot_failure, released_at=_time(datetime.now(UTC))
                        )
        if lease is None:
            return self._error(404, "not_found", f"lease {lease_id} not found")
        return 200, {}, {"lease": lease}

    def _owned(self, lease_id: str, request: Recorded) -> tuple[dict[str, Any] | None, Any]:
        lease = self.leases.get(lease_id)
        if lease is None or not self._live(lease):
            return None, self._error(404, "not_found", f"lease {lease_id} not found or not active")
        if lease["owner_id"] and request.header("X-Lease-Owner") != lease["owner_id"]:
            return None, self._error(403, "forbidden", f"lease {lease_id} belongs to another owner")
        return lease, None

    def _renew(self, lease_id: str, request: Recorded) -> tuple[int, dict[str, str], Any]:
        with self._lock:
            lease, refusal = self._owned(lease_id, request)
            if lease is None:
                return refusal
            ttl = (request.body or {}).get("ttl_seconds") or lease["ttl_seconds"]
            refusal = self._refuse_past_notice(lease, ttl)
            if refusal is not None:
                return refusal
            lease["ttl_seconds"] = ttl
            lease["expires_at"] = _time(datetime.now(UTC) + timedelta(seconds=ttl))
            return 200, {}, {"lease": dict(lease)}

    def _release(self, lease_id: str, request: Recorded) -> tuple[int, dict[str, str], Any]:
        with self._lock:
            queued = self.leases.get(lease_id)
            if queued is not None and queued["status"] == "queued":
                if queued["owner_id"] and request.header("X-Lease-Owner") != queued["owner_id"]:
                    return self._error(403, "forbidden", f"lease {lease_id} belongs to another owner")
                return self._cancel(queued)
            lease, refusal = self._owned(lease_id, request)
            if lease is None:
                return refusal
            lease["status"] = "released"
            lease["released_at"] = _time(datetime.now(UTC))
            self._admit_next()
            return 204, {}, None

    def write(self, lease_id: str, *lines: str, at: str | None = None) -> None:
        """What the lease's worker prints (stamped `at`, default now)."""
        stamp = at or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        with self._lock:
            self.output.setdefault(lease_id, []).extend((stamp, line) for line in lines)

    def _logs(self, lease_id: str, request: Recorded) -> tuple[int, dict[str, str], Any]:
        with self._lock:
            lease = self.leases.get(lease_id)
            if lease is None:
                return self._error(404, "not_found", f"lease {lease_id} not found")
            if lease["owner_id"] and request.header("X-Lease-Owner") != lease["owner_id"]:
                return self._error(403, "forbidden", f"lease {lease_id} belongs to another owner")
            if lease["status"] != "active":
                return self._error(410, "gone", f"lease {lease_id} is {lease['status']}; its worker is gone")
            since = request.query.get("since")
            lines = [(at, line) for at, line in self.output.get(lease_id, []) if since is None or at >= since]
        lines = lines[-int(request.query.get("tail", "200")) :]
        stamped = request.query.get("timestamps") == "true"
        text = "".join(f"{at} {line}\n" if stamped else f"{line}\n" for at, line in lines)
        return 200, {"X-Lease-Status": lease["status"]}, text.encode()

    def _release_all(self, request: Recorded) -> tuple[int, dict[str, str], Any]:
        owner = request.query.get("owner_id")
        if not owner:
            return self._error(400, "invalid_request", "owner_id is required")
        if request.header("X-Lease-Owner") != owner:
            return self._error(403, "forbidden", "X-Lease-Owner must equal owner_id")
        with self._lock:
            mine = [lease for lease in self.leases.values() if self._live(lease) and lease["owner_id"] == owner]
            batch, more = mine[: self.page_size], len(mine) > self.page_size
            for lease in batch:
                lease["status"] = "released"
                lease["released_at"] = _time(datetime.now(UTC))
            released = [dict(lease) for lease in batch]
            refused = [
                {"lease_id": lease["lease_id"], "status": "releasing", "code": "provider_error",
                 "message": "releasing: its worker could not be removed yet; the sweep retries until it is gone"}
                for lease in self.leases.values()
                if lease["status"] == "releasing" and lease["owner_id"] == owner
            ]  # fmt: skip
        return 200, {}, {"released": released, "not_released": refused, "next_token": "more" if more else None}

    def expire(self, lease_id: str) -> None:
        """End a lease behind the client's back (as the sweep would)."""
        with self._lock:
            self.leases[lease_id]["status"] = "expired"
