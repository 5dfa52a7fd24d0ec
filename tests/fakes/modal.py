"""A local fake of Modal's API server for Sandboxes, built on `modal_proto`'s own generated service base.

Tests only: nothing under `layers/` or `functions/` may import this module. The unmodified `modal` client talks
to it over gRPC (grpclib, HTTP/2 cleartext on loopback) when pointed at its `url` (`MODAL_SERVER_URL`, or a
client made with that server URL). Every RPC of `modal_proto.api_grpc.ModalClientBase` exists; those this fake
does not implement answer UNIMPLEMENTED naming themselves, so a client path that needs one says so.

Implemented (what the `modal` driver's calls make, read from the client's own source):

- auth: every RPC checks `x-modal-token-id` / `x-modal-token-secret` (UNAUTHENTICATED "Invalid token" else);
- `ClientHello`; `EnvironmentGetOrCreate` (the image builder version); `AppGetOrCreate` (an App by name, made
  with CREATE_IF_MISSING, else NOT_FOUND); `ImageGetOrCreate` (`Image.from_registry`: the `FROM` tag; a tag not
  in `known_images` fails its build as a registry pull does); `SecretGetOrCreate` (the `env` of a Sandbox);
- `SandboxCreate` (the definition: image, secrets, GPU, timeout, ports, regions, name, tags; a name already held
  by a live Sandbox of the App → ALREADY_EXISTS; a repeated `x-idempotency-key` returns the same Sandbox),
  `SandboxGetTaskId`, `SandboxWait` (a long poll of `timeout` seconds), `SandboxGetTunnels` (a long poll; tunnels
  up → the encrypted tunnel of each open port), `SandboxTerminate`, `SandboxList` (by App, tags — "at least
  these" —, `include_finished`, paged by `before_timestamp`), `SandboxTagsGet`/`SandboxTagsSet`,
  `SandboxGetFromName`, `AppFetchLogs` and `AppCountLogs` (a Sandbox's task logs: stdout, stderr and Modal's
  own lines on `FILE_DESCRIPTOR_INFO`).

A Sandbox's life, as Modal documents it: created → scheduled (it gets a task; `schedule_seconds` later, never
while its GPU type is in `no_capacity_gpus` or none of its regions in `regions`) → running, its tunnels up
`tunnel_seconds` after scheduling → finished: terminated (`SandboxTerminate`; it takes `terminate_seconds`,
meanwhile it still lists and runs), timed out (`timeout_secs` after creation: GENERIC_STATUS_TIMEOUT), or exited
(`exit_code` set: `boot_exit_code` makes new Sandboxes exit `boot_exit_after_seconds` after they start, with
`boot_exit_message`). A Sandbox that timed out unscheduled ends too. Time is the fake's clock (`advance`).

Failure switches (`FakeModalConfig`, set with `configure` or `POST /_fake/config` on the control port):
`quota_max_sandboxes` (a create past that many live Sandboxes → RESOURCE_EXHAUSTED with Modal's words),
`throttle_next` (that many next RPCs answer RESOURCE_EXHAUSTED carrying an `RPCRetryPolicy`, which the client
waits out and retries), `unavailable` (every RPC answers UNAVAILABLE), `hang_next_creates` (that many next
`SandboxCreate` make the Sandbox, then never answer: an outcome the caller cannot know), and `deny_token`.

Control over HTTP (for a separately running fake, e.g. behind `make run`), on `control_url`: `GET /_fake/state`,
`POST /_fake/config` (JSON of switches), `POST /_fake/reset`, `POST /_fake/sandboxes/{id}/logs`
`{"lines": [...], "source": "stdout"}`, `POST /_fake/sandboxes/{id}/exit` `{"code": 1}`.

CLI: `python -m tests.fakes.modal --port 8090 --control-port 8091` prints the server URL (`MODAL_SERVER_URL`)
and serves until SIGTERM or Ctrl-C; the token is `--token-id` / `--token-secret` (default ak-dev / as-dev).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import re
import secrets
import signal
import string
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType, TracebackType
from typing import Any, Final

from google.protobuf import empty_pb2
from google.protobuf.timestamp_pb2 import Timestamp
from grpclib import GRPCError, Status
from grpclib.server import Server, Stream
from modal._utils.grpc_utils import CustomProtoStatusDetailsCodec
from modal_proto import api_pb2
from modal_proto.api_grpc import ModalClientBase

TOKEN_ID: Final = "ak-test"
TOKEN_SECRET: Final = "as-test"
IMAGE_BUILDER_VERSION: Final = "2025.06"
# What Modal answers (its client maps each status to an exception: modal._grpc_client._STATUS_TO_EXCEPTION).
AUTH_DETAIL: Final = "Invalid token: the token id or secret is wrong, or the token was revoked"
QUOTA_DETAIL: Final = "Sandbox limit reached: your workspace may run at most {limit} Sandboxes at once"
THROTTLE_DETAIL: Final = "Too many requests: rate limit exceeded"
UNAVAILABLE_DETAIL: Final = "Modal is temporarily unavailable"
PULL_FAILURE: Final = "Failed to pull image {tag}: manifest unknown (the tag is not in the registry, or is private)"
_ID_ALPHABET: Final = string.ascii_letters + string.digits
_FROM: Final = re.compile(r"^FROM\s+(\S+)", re.IGNORECASE)


def _object_id(prefix: str) -> str:
    """A Modal object id (`sb-` + 22 characters for a V1 Sandbox, as the client recognises it)."""
    return f"{prefix}-" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(22))


@dataclass
class FakeModalConfig:
    """Switches: time the lifecycle takes, and what fails. Every field has a default that behaves well."""

    schedule_seconds: float = 0.0  # created → scheduled (a slow start)
    tunnel_seconds: float = 0.0  # scheduled → tunnels up
    terminate_seconds: float = 0.3  # terminate → finished (it takes a moment)
    no_capacity_gpus: set[str] = field(default_factory=set)  # GPU types never scheduled while listed
    regions: set[str] | None = None  # regions with capacity (None: all); a Sandbox placed elsewhere waits
    boot_exit_code: int | None = None  # new Sandboxes exit with this code after they start
    boot_exit_after_seconds: float = 0.0
    boot_exit_message: str = "the entrypoint exited"
    quota_max_sandboxes: int | None = None  # live Sandboxes the workspace may hold (RESOURCE_EXHAUSTED past it)
    throttle_next: int = 0  # next RPCs answered RESOURCE_EXHAUSTED with an RPCRetryPolicy
    throttle_retry_after: float = 0.2
    unavailable: bool = False  # every RPC answers UNAVAILABLE
    hang_next_creates: int = 0  # next SandboxCreate calls make the Sandbox and never answer
    deny_token: bool = False  # every RPC answers UNAUTHENTICATED, whatever the token
    list_page_size: int = 100

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for spec in fields(self):
            value = getattr(self, spec.name)
            out[spec.name] = sorted(value) if isinstance(value, set) else value
        return out


def _coerce(changes: Mapping[str, Any]) -> dict[str, Any]:
    known = {spec.name: spec for spec in fields(FakeModalConfig)}
    unknown = set(changes) - set(known)
    if unknown:
        raise ValueError(f"unknown switch(es): {', '.join(sorted(unknown))}")
    return {
        name: set(value) if name in ("no_capacity_gpus", "regions") and value is not None else value
        for name, value in changes.items()
    }


@dataclass
class LogEntry:
    at_ns: int
    fd: int
    text: str


@dataclass
class FakeSandbox:
    """One Sandbox and everything the fake knows of it."""

    sandbox_id: str
    app_id: str
    created_at: float
    name: str
    image_tag: str
    gpu: str
    timeout_secs: int
    ports: tuple[int, ...]
    regions: tuple[str, ...]
    tags: dict[str, str]
    env: dict[str, str]
    args: tuple[str, ...]
    task_id: str = ""
    scheduled_at: float | None = None
    terminate_at: float | None = None
    exit_at: float | None = None
    exit_code: int | None = None
    exit_message: str = ""
    result: api_pb2.GenericResult | None = None
    finished_at: float | None = None
    logs: list[LogEntry] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.result is not None

    def render(self) -> dict[str, Any]:
        """The Sandbox as a test (or `GET /_fake/state`) sees it."""
        status = "pending"
        if self.finished:
            status = "finished"
        elif self.terminate_at is not None:
            status = "terminating"
        elif self.task_id:
            status = "running"
        return {
            "id": self.sandbox_id,
            "app_id": self.app_id,
            "name": self.name,
            "status": status,
            "image": self.image_tag,
            "gpu": self.gpu,
            "timeout_secs": self.timeout_secs,
            "ports": list(self.ports),
            "regions": list(self.regions),
            "tags": dict(self.tags),
            "env": dict(self.env),
            "created_at": self.created_at,
            "result": None if self.result is None else {"status": self.result.status, "exitcode": self.result.exitcode},
        }


def _unimplemented(name: str) -> Callable[..., Any]:
    async def handler(self: Any, stream: Stream[Any, Any]) -> None:
        raise GRPCError(Status.UNIMPLEMENTED, f"the fake Modal server does not implement {name}")

    handler.__name__ = name
    return handler


# The generated base declares every RPC abstract: those not overridden below answer UNIMPLEMENTED.
_ServiceBase: type = type(
    "_ServiceBase",
    (ModalClientBase,),
    {name: _unimplemented(name) for name in ModalClientBase.__abstractmethods__},
)


class FakeModal(_ServiceBase):  # type: ignore[misc]
    """The Modal API fake on a loopback port (its own event loop thread). A context manager, or `start`/`stop`."""

    def __init__(
        self,
        token_id: str = TOKEN_ID,
        token_secret: str = TOKEN_SECRET,
        known_images: Iterable[str] | None = None,
        *,
        port: int = 0,
        control_port: int | None = None,
    ) -> None:
        self.token = (token_id, token_secret)
        self.known_images = None if known_images is None else set(known_images)
        self.config = FakeModalConfig()
        self._lock = threading.RLock()
        self._offset = 0.0
        self._apps: dict[str, str] = {}  # name → app id
        self._secrets: dict[str, dict[str, str]] = {}
        self._images: dict[str, str] = {}  # image id → registry tag
        self._sandboxes: dict[str, FakeSandbox] = {}
        self._idempotent: dict[str, str] = {}  # x-idempotency-key → sandbox id
        self._auth_tokens: set[str] = set()
        self.calls: list[str] = []  # RPC names, in order
        self._port = port
        self._control_port = control_port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: Server | None = None
        self._thread: threading.Thread | None = None
        self._control: ThreadingHTTPServer | None = None

    # --- lifecycle -------------------------------------------------------------------------------------

    def start(self) -> FakeModal:
        started = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                # Error details (an RPCRetryPolicy) go out as Modal's server sends them: an RPCStatus of Anys.
                self._server = Server([self], status_details_codec=CustomProtoStatusDetailsCodec())
                loop.run_until_complete(self._server.start("127.0.0.1", self._port))
            except BaseException as error:  # reported to start()'s caller
                failure.append(error)
                started.set()
                return
            started.set()
            loop.run_forever()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        self._thread = threading.Thread(target=run, name="fake-modal", daemon=True)
        self._thread.start()
        started.wait(10)
        if failure:
            raise failure[0]
        if self._control_port is not None:
            self._control = _ControlServer(("127.0.0.1", self._control_port), _ControlHandler)
            self._control.fake = self  # type: ignore[attr-defined]
            threading.Thread(target=self._control.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def stop(self) -> None:
        if self._control is not None:
            self._control.shutdown()
            self._control.server_close()
            self._control = None
        loop, server = self._loop, self._server
        if loop is None or server is None:
            return

        async def close() -> None:
            server.close()  # cancels running requests; a client's idle connection may stay open
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(server.wait_closed(), 1.0)
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(close(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._loop = self._server = None

    def __enter__(self) -> FakeModal:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None and self._server._server is not None
        return int(self._server._server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        """The server URL the client is pointed at (`MODAL_SERVER_URL`)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def control_url(self) -> str | None:
        return None if self._control is None else f"http://127.0.0.1:{self._control.server_address[1]}"

    # --- control (tests) -------------------------------------------------------------------------------

    def now(self) -> float:
        return time.time() + self._offset

    def advance(self, seconds: float) -> None:
        """Move the fake's clock on: schedules, tunnels, terminations, exits and timeouts come due."""
        with self._lock:
            self._offset += seconds

    def configure(self, **changes: Any) -> None:
        values = _coerce(changes)
        with self._lock:
            for name, value in values.items():
                setattr(self.config, name, value)

    def reset(self) -> None:
        """Forget Sandboxes, secrets, calls and the clock offset; switches back to defaults (Apps stay)."""
        with self._lock:
            self.config = FakeModalConfig()
            self._sandboxes.clear()
            self._secrets.clear()
            self._idempotent.clear()
            self.calls.clear()
            self._offset = 0.0

    def sandboxes(self, *, live_only: bool = False) -> list[dict[str, Any]]:
        """Every Sandbox (settled to now), oldest first."""
        with self._lock:
            found = []
            for sandbox in self._sandboxes.values():
                self._settle(sandbox)
                if not (live_only and sandbox.finished):
                    found.append(sandbox.render())
            return sorted(found, key=lambda item: item["created_at"])

    def sandbox(self, sandbox_id: str) -> dict[str, Any]:
        with self._lock:
            found = self._sandboxes[sandbox_id]
            self._settle(found)
            return found.render()

    def write_logs(self, sandbox_id: str, lines: Iterable[str], source: str = "stdout") -> None:
        """What the Sandbox's process printed (`stdout`/`stderr`), stamped now."""
        fd = {"stdout": api_pb2.FILE_DESCRIPTOR_STDOUT, "stderr": api_pb2.FILE_DESCRIPTOR_STDERR}[source]
        with self._lock:
            sandbox = self._sandboxes[sandbox_id]
            for line in lines:
                self._log(sandbox, fd, line)

    def exit(self, sandbox_id: str, code: int, message: str = "") -> None:
        """The Sandbox's entrypoint exits with `code` now."""
        with self._lock:
            sandbox = self._sandboxes[sandbox_id]
            sandbox.exit_at, sandbox.exit_code, sandbox.exit_message = self.now(), code, message
            self._settle(sandbox)

    def app_id(self, name: str) -> str | None:
        with self._lock:
            return self._apps.get(name)

    def state(self) -> dict[str, Any]:
        with self._lock:
            return {
                "apps": dict(self._apps),
                "sandboxes": self.sandboxes(),
                "config": self.config.to_json(),
                "calls": list(self.calls),
            }

    # --- the lifecycle --------------------------------------------------------------------------------

    def _log(self, sandbox: FakeSandbox, fd: int, text: str, at: float | None = None) -> None:
        at_ns = int((self.now() if at is None else at) * 1e9)
        if sandbox.logs and at_ns <= sandbox.logs[-1].at_ns:
            at_ns = sandbox.logs[-1].at_ns + 1  # strictly increasing, as one task's log is
        sandbox.logs.append(LogEntry(at_ns, fd, text))

    def _finish(self, sandbox: FakeSandbox, at: float, status: int, exitcode: int, exception: str) -> None:
        sandbox.result = api_pb2.GenericResult(status=status, exitcode=exitcode, exception=exception)
        sandbox.finished_at = at
        self._log(sandbox, api_pb2.FILE_DESCRIPTOR_INFO, exception or f"Sandbox finished with code {exitcode}", at)

    def _schedulable(self, sandbox: FakeSandbox) -> bool:
        if sandbox.gpu and sandbox.gpu in self.config.no_capacity_gpus:
            return False
        regions = self.config.regions
        return not (regions is not None and sandbox.regions and not set(sandbox.regions) & regions)

    def _settle(self, sandbox: FakeSandbox) -> None:
        """Bring the Sandbox up to the fake's now: scheduled, exited, terminated or timed out, in time order."""
        if sandbox.finished:
            return
        now = self.now()
        if not sandbox.task_id and self._schedulable(sandbox):
            due = sandbox.created_at + self.config.schedule_seconds
            if due <= now and (sandbox.terminate_at is None or due < sandbox.terminate_at):
                sandbox.task_id, sandbox.scheduled_at = _object_id("ta"), due
                where = f" on {sandbox.gpu}" if sandbox.gpu else ""
                self._log(sandbox, api_pb2.FILE_DESCRIPTOR_INFO, f"Sandbox scheduled{where}", due)
                if self.config.boot_exit_code is not None and sandbox.exit_at is None:
                    sandbox.exit_at = due + self.config.boot_exit_after_seconds
                    sandbox.exit_code, sandbox.exit_message = self.config.boot_exit_code, self.config.boot_exit_message
        ends = []
        if sandbox.terminate_at is not None:
            ends.append(
                (sandbox.terminate_at, api_pb2.GenericResult.GENERIC_STATUS_TERMINATED, 137, "Sandbox terminated")
            )
        if sandbox.task_id and sandbox.exit_at is not None and sandbox.exit_code is not None:
            status = (
                api_pb2.GenericResult.GENERIC_STATUS_SUCCESS
                if sandbox.exit_code == 0
                else api_pb2.GenericResult.GENERIC_STATUS_FAILURE
            )
            message = sandbox.exit_message or f"the entrypoint exited with code {sandbox.exit_code}"
            ends.append((max(sandbox.exit_at, sandbox.scheduled_at or 0.0), status, sandbox.exit_code, message))
        timeout_at = sandbox.created_at + sandbox.timeout_secs
        ends.append((timeout_at, api_pb2.GenericResult.GENERIC_STATUS_TIMEOUT, 124, "Sandbox timed out"))
        at, status, code, message = min(ends, key=lambda end: end[0])
        if at <= now:
            self._finish(sandbox, at, status, code, message)

    def _tunnels_up(self, sandbox: FakeSandbox) -> bool:
        return (
            bool(sandbox.task_id)
            and not sandbox.finished
            and sandbox.scheduled_at is not None
            and self.now() >= sandbox.scheduled_at + self.config.tunnel_seconds
        )

    # --- RPC plumbing ---------------------------------------------------------------------------------

    def _admit(self, name: str, stream: Stream[Any, Any]) -> None:
        """Auth, outages and throttling, before any RPC is served (raises GRPCError as Modal's server would)."""
        with self._lock:
            self.calls.append(name)
            config = self.config
            if config.unavailable:
                raise GRPCError(Status.UNAVAILABLE, UNAVAILABLE_DETAIL)
            metadata = stream.metadata or {}
            offered = (metadata.get("x-modal-token-id"), metadata.get("x-modal-token-secret"))
            if config.deny_token or offered != self.token:
                raise GRPCError(Status.UNAUTHENTICATED, AUTH_DETAIL)
            if config.throttle_next > 0:
                config.throttle_next -= 1
                raise GRPCError(
                    Status.RESOURCE_EXHAUSTED,
                    THROTTLE_DETAIL,
                    [api_pb2.RPCRetryPolicy(retry_after_secs=config.throttle_retry_after)],
                )

    async def _request(self, name: str, stream: Stream[Any, Any]) -> Any:
        request = await stream.recv_message()
        self._admit(name, stream)
        return request

    def _find(self, sandbox_id: str) -> FakeSandbox:
        sandbox = self._sandboxes.get(sandbox_id)
        if sandbox is None:
            raise GRPCError(Status.NOT_FOUND, f"Sandbox {sandbox_id} not found")
        self._settle(sandbox)
        return sandbox

    async def _poll(self, seconds: float, ready: Callable[[], bool]) -> bool:
        """A server-side long poll: True as soon as `ready()`, False after `seconds`."""
        until = time.monotonic() + max(0.0, seconds)
        while True:
            with self._lock:
                if ready():
                    return True
            if time.monotonic() >= until:
                return False
            await asyncio.sleep(0.05)

    # --- RPCs ---------------------------------------------------------------------------------------------

    async def ClientHello(self, stream: Stream[Any, Any]) -> None:  # noqa: N802 - the RPC's name
        await self._request("ClientHello", stream)
        await stream.send_message(api_pb2.ClientHelloResponse(image_builder_version=IMAGE_BUILDER_VERSION))

    async def EnvironmentGetOrCreate(self, stream: Stream[Any, Any]) -> None:  # noqa: N802
        request = await self._request("EnvironmentGetOrCreate", stream)
        settings = api_pb2.EnvironmentSettings(image_builder_version=IMAGE_BUILDER_VERSION)
        metadata = api_pb2.EnvironmentMetadata(name=request.deployment_name or "main", settings=settings)
        await stream.send_message(api_pb2.EnvironmentGetOrCreateResponse(environment_id="en-fake", metadata=metadata))

    async def AppGetOrCreate(self, stream: Stream[Any, Any]) -> None:  # noqa: N802
        request = await self._request("AppGetOrCreate", stream)
        with self._lock:
            app_id = self._apps.get(request.app_name)
            if app_id is None:
                if request.object_creation_type != api_pb2.OBJECT_CREATION_TYPE_CREATE_IF_MISSING:
                    raise GRPCError(Status.NOT_FOUND, f"App {request.app_name!r} not found")
                app_id = self._apps[request.app_name] = _object_id("ap")
        metadata = api_pb2.AppHandleMetadata(app_id=app_id, environment_name=request.environment_name or "main")
        await stream.send_message(api_pb2.AppGetOrCreateResponse(app_id=app_id, handle_metadata=metadata))

    async def ImageGetOrCreate(self, stream: Stream[Any, Any]) -> None:  # noqa: N802
        request = await self._request("ImageGetOrCreate", stream)
        tags = [match.group(1) for line in request.image.dockerfile_commands if (match := _FROM.match(line))]
        tag = tags[0] if tags else ""
        image_id = _object_id("im")
        with self._lock:
            self._images[image_id] = tag
        if self.known_images is not None and tag not in self.known_images:
            result = api_pb2.GenericResult(
                status=api_pb2.GenericResult.GENERIC_STATUS_FAILURE, exception=PULL_FAILURE.format(tag=tag)
            )
        else:
            result = api_pb2.GenericResult(status=api_pb2.GenericResult.GENERIC_STATUS_SUCCESS)
        metadata = api_pb2.ImageMetadata(image_builder_version=IMAGE_BUILDER_VERSION)
        await stream.send_message(api_pb2.ImageGetOrCreateResponse(image_id=image_id, result=result, metadata=metadata))

    async def SecretGetOrCreate(self, stream: Stream[Any, Any]) -> None:  # noqa: N802
        request = await self._request("SecretGetOrCreate", stream)
        secret_id = _object_id("st")
        with self._lock:
            self._secrets[secret_id] = dict(request.env_dict)
        metadata = api_pb2.SecretMetadata(keys=sorted(request.env_dict))
        await stream.send_message(api_pb2.SecretGetOrCreateResponse(secret_id=secret_id, metadata=metadata))

    async def SandboxCreate(self, stream: Stream[Any, Any]) -> None:  # noqa: N802
        request = await self._request("SandboxCreate", stream)
        key = str((stream.metadata or {}).get("x-idempotency-key", ""))
        definition = request.definition
        with self._lock:
            if key and key in self._idempotent:
                sandbox_id = self._idempotent[key]
            else:
                sandbox_id = self._create(request, definition)
                if key:
                    self._idempotent[key] = sandbox_id
            hang = self.config.hang_next_creates > 0
            if hang:
                self.config.hang_next_creates -= 1
        if hang:
            await asyncio.sleep(3600)  # made, but the answer never comes: the caller gives up
        metadata = api_pb2.SandboxHandleMetadata(app_id=request.app_id)
        await stream.send_message(api_pb2.SandboxCreateResponse(sandbox_id=sandbox_id, metadata=metadata))

    def _create(self, request: api_pb2.SandboxCreateRequest, definition: api_pb2.Sandbox) -> str:
        if request.app_id not in self._apps.values():
            raise GRPCError(Status.NOT_FOUND, f"App {request.app_id} not found")
        live = [sandbox for sandbox in self._sandboxes.values() if (self._settle(sandbox), not sandbox.finished)[1]]
        limit = self.config.quota_max_sandboxes
        if limit is not None and len(live) >= limit:
            raise GRPCError(Status.RESOURCE_EXHAUSTED, QUOTA_DETAIL.format(limit=limit))
        if definition.name and any(
            sandbox.name == definition.name and sandbox.app_id == request.app_id for sandbox in live
        ):
            raise GRPCError(Status.ALREADY_EXISTS, f"Sandbox with name {definition.name!r} already exists")
        if definition.image_id not in self._images:
            raise GRPCError(Status.NOT_FOUND, f"Image {definition.image_id} not found")
        env: dict[str, str] = {}
        for secret_id in definition.secret_ids:
            env.update(self._secrets.get(secret_id, {}))
        sandbox = FakeSandbox(
            sandbox_id=_object_id("sb"),
            app_id=request.app_id,
            created_at=self.now(),
            name=definition.name,
            image_tag=self._images[definition.image_id],
            gpu=definition.resources.gpu_config.gpu_type,
            timeout_secs=definition.timeout_secs,
            ports=tuple(spec.port for spec in definition.open_ports.ports),
            regions=tuple(definition.scheduler_placement.regions),
            tags={tag.tag_name: tag.tag_value for tag in request.tags},
            env=env,
            args=tuple(definition.entrypoint_args),
        )
        self._sandboxes[sandbox.sandbox_id] = sandbox
        self._log(sandbox, api_pb2.FILE_DESCRIPTOR_INFO, f"Sandbox created from {sandbox.image_tag}")
        return sandbox.sandbox_id

    async def SandboxGetTaskId(self, stream: Stream[Any, Any]) -> None:  # noqa: N802
        request = await self._request("SandboxGetTaskId", stream)
        with self._lock:
            sandbox = self._find(request.sandbox_id)
            answer = api_pb2.SandboxGetTaskIdResponse(task_id=sandbox.task_id)
            if not sandbox.task_id and sandbox.result is not None:
                answer.task_result.CopyFrom(sandbox.result)
        await stream.send_message(answer)

    async def SandboxWait(self, stream: Stream[Any, Any]) -> None:  # noqa: N802
        request = await self._request("SandboxWait", stream)
        with self._lock:
            sandbox = self._find(request.sandbox_id)

        def done() -> bool:
            self._settle(sandbox)
            return sandbox.finished

        await self._poll(request.timeout, done)
        with self._lock:
            answer = api_pb2.SandboxWaitResponse(metadata=api_pb2.SandboxHandleMetadata(app_id=sandbox.app_id))
            if sandbox.result is not None:
                answer.result.CopyFrom(sandbox.result)
        await stream.send_message(answer)

    async def SandboxGetTunnels(self, stream: Stream[Any, Any]) -> None:  # noqa: N802
        request = await self._request("SandboxGetTunnels", stream)
        with self._lock:
            sandbox = self._find(request.sandbox_id)

        def up() -> bool:
            self._settle(sandbox)
            return sandbox.finished or self._tunnels_up(sandbox)

        await self._poll(request.timeout, up)
        with self._lock:
            if not self._tunnels_up(sandbox):
                status = api_pb2.GenericResult.GENERIC_STATUS_TIMEOUT
                await stream.send_message(
                    api_pb2.SandboxGetTunnelsResponse(result=api_pb2.GenericResult(status=status))
                )
                return
            tunnels = [
                api_pb2.TunnelData(host=tunnel_host(sandbox.sandbox_id, port), port=443, container_port=port)
                for port in sandbox.ports
            ]
        success = api_pb2.GenericResult(status=api_pb2.GenericResult.GENERIC_STATUS_SUCCESS)
        await stream.send_message(api_pb2.SandboxGetTunnelsResponse(result=success, tunnels=tunnels))

    async def SandboxTerminate(self, stream: Stream[Any, Any]) -> None:  # noqa: N802
        request = await self._request("SandboxTerminate", stream)
        with self._lock:
            sandbox = self._find(request.sandbox_id)
            if not sandbox.finished and sandbox.terminate_at is None:
                sandbox.terminate_at = self.now() + self.config.terminate_seconds
                self._log(sandbox, api_pb2.FILE_DESCRIPTOR_INFO, "Sandbox termination requested")
                self._settle(sandbox)
        await stream.send_message(api_pb2.SandboxTerminateResponse())

    async def AuthTokenGet(self, stream: Stream[Any, Any]) -> None:  # noqa: N802
        await self._request("AuthTokenGet", stream)
        claims = {"exp": int(time.time()) + 3600, "sub": self.token[0]}
        token = ".".join(_b64(part) for part in ({"alg": "none"}, claims)) + ".fake"
        with self._lock:
            self._auth_tokens.add(token)
        await stream.send_message(api_pb2.AuthTokenGetResponse(token=token))

    def _check_auth_token(self, stream: Stream[Any, Any]) -> None:
        """The V2 RPCs carry the short-lived token AuthTokenGet handed out (`x-modal-auth-token`)."""
        if (stream.metadata or {}).get("x-modal-auth-token") not in self._auth_tokens:
            raise GRPCError(Status.UNAUTHENTICATED, "missing or invalid auth token")

    async def SandboxListV2(self, stream: Stream[Any, Any]) -> None:  # noqa: N802
        # The client lists V1 (GPU) and V2 Sandboxes alike through this one.
        request = await self._request("SandboxListV2", stream)
        self._check_auth_token(stream)
        await self._list(request, stream)

    async def SandboxList(self, stream: Stream[Any, Any]) -> None:  # noqa: N802
        request = await self._request("SandboxList", stream)
        await self._list(request, stream)

    async def _list(self, request: api_pb2.SandboxListRequest, stream: Stream[Any, Any]) -> None:
        wanted = {tag.tag_name: tag.tag_value for tag in request.tags}
        with self._lock:
            found = []
            for sandbox in self._sandboxes.values():
                self._settle(sandbox)
                if request.app_id and sandbox.app_id != request.app_id:
                    continue
                if sandbox.finished and not request.include_finished:
                    continue
                if any(sandbox.tags.get(name) != value for name, value in wanted.items()):
                    continue
                if request.before_timestamp and sandbox.created_at >= request.before_timestamp:
                    continue
                found.append(sandbox)
            found.sort(key=lambda sandbox: sandbox.created_at, reverse=True)
            page = [self._info(sandbox) for sandbox in found[: self.config.list_page_size]]
        await stream.send_message(api_pb2.SandboxListResponse(sandboxes=page))

    def _info(self, sandbox: FakeSandbox) -> api_pb2.SandboxInfo:
        task_info = api_pb2.TaskInfo(id=sandbox.task_id, sandbox_id=sandbox.sandbox_id, gpu_type=sandbox.gpu)
        if sandbox.result is not None:
            task_info.result.CopyFrom(sandbox.result)
        return api_pb2.SandboxInfo(
            id=sandbox.sandbox_id,
            created_at=sandbox.created_at,
            task_info=task_info,
            app_id=sandbox.app_id,
            tags=[api_pb2.SandboxTag(tag_name=name, tag_value=value) for name, value in sandbox.tags.items()],
            name=sandbox.name,
            regions=list(sandbox.regions),
            timeout_secs=sandbox.timeout_secs,
            metadata=api_pb2.SandboxHandleMetadata(app_id=sandbox.app_id),
        )

    async def SandboxTagsGet(self, stream: Stream[Any, Any]) -> None:  # noqa: N802
        request = await self._request("SandboxTagsGet", stream)
        with self._lock:
            sandbox = self._find(request.sandbox_id)
            tags = [api_pb2.SandboxTag(tag_name=name, tag_value=value) for name, value in sandbox.tags.items()]
        await stream.send_message(api_pb2.SandboxTagsGetResponse(tags=tags))

    async def SandboxTagsSet(self, stream: Stream[Any, Any]) -> None:  # noqa: N802
        request = await self._request("SandboxTagsSet", stream)
        with self._lock:
            self._find(request.sandbox_id).tags = {tag.tag_name: tag.tag_value for tag in request.tags}
        await stream.send_message(empty_pb2.Empty())

    async def SandboxGetFromName(self, stream: Stream[Any, Any]) -> None:  # noqa: N802
        request = await self._request("SandboxGetFromName", stream)
        with self._lock:
            app_id = self._apps.get(request.app_name)
            for sandbox in self._sandboxes.values():
                self._settle(sandbox)
                if sandbox.app_id == app_id and sandbox.name == request.sandbox_name:
                    if sandbox.finished and not request.include_terminated:
                        continue
                    metadata = api_pb2.SandboxHandleMetadata(app_id=sandbox.app_id)
                    answer = api_pb2.SandboxGetFromNameResponse(sandbox_id=sandbox.sandbox_id, metadata=metadata)
                    break
            else:
                raise GRPCError(Status.NOT_FOUND, f"Sandbox {request.sandbox_name!r} not found")
        await stream.send_message(answer)

    def _entries(self, request: Any) -> list[tuple[FakeSandbox, LogEntry]]:
        """The log entries an AppFetchLogs/AppCountLogs request selects, oldest first."""
        since = _nanos(request.since) if request.HasField("since") else 0
        until = _nanos(request.until) if request.HasField("until") else 2**63
        chosen = []
        for sandbox in self._sandboxes.values():
            self._settle(sandbox)
            if sandbox.app_id != request.app_id:
                continue
            if request.sandbox_id and sandbox.sandbox_id != request.sandbox_id:
                continue
            if request.task_id and sandbox.task_id != request.task_id:
                continue
            for entry in sandbox.logs:
                if request.source and entry.fd != request.source:
                    continue
                if since <= entry.at_ns < until:
                    chosen.append((sandbox, entry))
        return sorted(chosen, key=lambda pair: pair[1].at_ns)

    async def AppFetchLogs(self, stream: Stream[Any, Any]) -> None:  # noqa: N802
        request = await self._request("AppFetchLogs", stream)
        with self._lock:
            chosen = self._entries(request)
            if request.limit:
                chosen = chosen[-request.limit :]  # the most recent `limit`, oldest first
            batches = [
                api_pb2.TaskLogsBatch(
                    task_id=sandbox.task_id,
                    sandbox_id=sandbox.sandbox_id,
                    items=[
                        api_pb2.TaskLogs(
                            data=entry.text + "\n",
                            timestamp=entry.at_ns / 1e9,
                            timestamp_ns=entry.at_ns,
                            file_descriptor=entry.fd,  # type: ignore[arg-type]
                            container_id=sandbox.task_id,
                        )
                    ],
                )
                for sandbox, entry in chosen
            ]
        await stream.send_message(api_pb2.AppFetchLogsResponse(batches=batches))

    async def AppCountLogs(self, stream: Stream[Any, Any]) -> None:  # noqa: N802
        request = await self._request("AppCountLogs", stream)
        bucket = max(1, request.bucket_secs)
        with self._lock:
            counts: dict[int, list[int]] = {}
            for _, entry in self._entries(request):
                start = int(entry.at_ns / 1e9) // bucket * bucket
                slot = counts.setdefault(start, [0, 0, 0])
                slot[{1: 0, 2: 1}.get(entry.fd, 2)] += 1
        buckets = [
            api_pb2.AppCountLogsResponse.LogBucket(
                bucket_start_at=Timestamp(seconds=start), stdout_logs=out, stderr_logs=err, system_logs=system
            )
            for start, (out, err, system) in sorted(counts.items())
        ]
        await stream.send_message(api_pb2.AppCountLogsResponse(app_id=request.app_id, buckets=buckets))


def tunnel_host(sandbox_id: str, port: int) -> str:
    """The host of a Sandbox port's encrypted tunnel (Modal's look: a random name under its tunnel domain)."""
    return f"{sandbox_id[3:].lower()}-{port}.w.modal-fake.test"


def _b64(part: Mapping[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(part).encode()).rstrip(b"=").decode()


def _nanos(stamp: Timestamp) -> int:
    return stamp.seconds * 1_000_000_000 + stamp.nanos


# --- control over HTTP ------------------------------------------------------------------------------------


class _ControlServer(ThreadingHTTPServer):
    daemon_threads = True


class _ControlHandler(BaseHTTPRequestHandler):
    server: _ControlServer

    def do_GET(self) -> None:
        if self.path == "/_fake/state":
            self._answer(200, self.server.fake.state())  # type: ignore[attr-defined]
        else:
            self._answer(404, {"error": "unknown path"})

    def do_POST(self) -> None:
        fake: FakeModal = self.server.fake  # type: ignore[attr-defined]
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
            match = re.match(r"^/_fake/sandboxes/([^/]+)/(logs|exit)$", self.path)
            if self.path == "/_fake/config":
                fake.configure(**body)
                self._answer(200, {"config": fake.config.to_json()})
            elif self.path == "/_fake/reset":
                fake.reset()
                self._answer(204, None)
            elif match and match.group(2) == "logs":
                fake.write_logs(match.group(1), body.get("lines", []), body.get("source", "stdout"))
                self._answer(200, fake.sandbox(match.group(1)))
            elif match:
                fake.exit(match.group(1), int(body.get("code", 1)), str(body.get("message", "")))
                self._answer(200, fake.sandbox(match.group(1)))
            else:
                self._answer(404, {"error": "unknown path"})
        except (ValueError, KeyError, TypeError) as error:
            self._answer(400, {"error": str(error)})

    def _answer(self, status: int, payload: object) -> None:
        body = b"" if payload is None else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def start_fake_modal(
    token_id: str = TOKEN_ID,
    token_secret: str = TOKEN_SECRET,
    known_images: Iterable[str] | None = None,
    *,
    port: int = 0,
    control_port: int | None = None,
) -> FakeModal:
    """A started fake; `.url` is what `MODAL_SERVER_URL` names."""
    return FakeModal(token_id, token_secret, known_images, port=port, control_port=control_port).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fakes.modal", description="Serve a fake Modal API.")
    parser.add_argument("--port", type=int, default=8090, help="gRPC port (0: any free one; default 8090)")
    parser.add_argument("--control-port", type=int, default=8091, help="HTTP control port (default 8091)")
    parser.add_argument("--token-id", default="ak-dev")
    parser.add_argument("--token-secret", default="as-dev")
    parser.add_argument("--image", action="append", default=None, metavar="TAG", help="a known image (default: any)")
    parser.add_argument("--schedule-seconds", type=float, default=0.0, help="a slow start: created → scheduled")
    parser.add_argument("--tunnel-seconds", type=float, default=0.0, help="scheduled → tunnels up")
    parser.add_argument("--no-capacity-gpu", action="append", default=[], metavar="GPU", help="a GPU type out of stock")
    args = parser.parse_args(argv)
    fake = FakeModal(args.token_id, args.token_secret, args.image, port=args.port, control_port=args.control_port)
    fake.configure(
        schedule_seconds=args.schedule_seconds,
        tunnel_seconds=args.tunnel_seconds,
        no_capacity_gpus=[gpu.upper() for gpu in args.no_capacity_gpu],
    )
    done = threading.Event()

    def finish(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, finish)
    signal.signal(signal.SIGINT, finish)
    fake.start()
    print(fake.url, flush=True)
    print(
        f"fake Modal: token {args.token_id}/{args.token_secret}; control at {fake.control_url}/_fake/", file=sys.stderr
    )
    done.wait()
    fake.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
