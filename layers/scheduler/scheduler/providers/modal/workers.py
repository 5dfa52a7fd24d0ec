"""The Sandbox operations the driver makes, as coroutines on Modal's client (`.aio`), each run by `ModalSession`.

Calls (and the RPCs the client makes for them, read from its source): `App.lookup` (AppGetOrCreate),
`Sandbox.create` with `Image.from_registry` and `env` (EnvironmentGetOrCreate, ImageGetOrCreate,
SecretGetOrCreate, SandboxCreate, then SandboxGetTaskId until Modal schedules it), `Sandbox.tunnels`
(SandboxGetTunnels), `Sandbox.from_id`/`poll` (SandboxWait), `terminate` (SandboxTerminate), `Sandbox.list`
by tag (AuthTokenGet, SandboxListV2), `get_tags` (SandboxTagsGet), `logs.tail`/`logs.fetch` (AppFetchLogs,
AppCountLogs).
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

import modal
import modal.exception as modal_errors

from scheduler.providers.base import ManagedWorker, Readiness, WorkerGone
from scheduler.worker_logs import LogLine, LogQuery, select

if TYPE_CHECKING:
    from scheduler.providers.modal.session import ModalSession

# Modal's tag names are plain words: the lease, its kind, when it was made, and the GPU it asked for.
TAG_MANAGED, MANAGED = "openalice_scheduler", "managed"
TAG_LEASE = "openalice_lease_id"
TAG_KIND = "openalice_kind"
TAG_CREATED = "openalice_created"
TAG_GPU = "openalice_gpu"
# Sandbox return codes as the client reports them (modal.sandbox._common._result_returncode).
TIMED_OUT, TERMINATED = 124, 137
TUNNEL_WAIT_SECONDS = 55  # a server-side long poll; the session's deadline ends it sooner
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DAY_NS = 24 * 3600 * 1_000_000_000


class Found(NamedTuple):
    """A running Sandbox of a lease: its id, its tunnel's URL once up, the GPU type it asked for."""

    token: str
    endpoint: str | None
    gpu: str | None


def failure(error: BaseException) -> str:
    """What a client error means: `capacity`, `quota`, `exists`, `refused` or `unreachable`."""
    if isinstance(error, modal_errors.ResourceExhaustedError):
        # The client's own words when a Sandbox waited its 21 minutes unscheduled; else the workspace's quota.
        return "capacity" if "insufficient capacity" in str(error).lower() else "quota"
    if isinstance(error, modal_errors.AlreadyExistsError):
        return "exists"
    refused = (
        modal_errors.AuthError,
        modal_errors.PermissionDeniedError,
        modal_errors.ImageBuildError,
        modal_errors.InvalidError,
        modal_errors.NotFoundError,
    )
    if isinstance(error, refused):
        return "refused"
    return "unreachable"  # ConnectionError, ServiceError (UNAVAILABLE …), InternalError, timeouts, sockets


def describe(code: int) -> str:
    """Why a Sandbox finished, from the return code Modal's client reports."""
    if code == TIMED_OUT:
        return "timed out (Modal ended it at its timeout)"
    if code == TERMINATED:
        return "was terminated"
    return f"exited with code {code}"


async def _last_words(sandbox: Any) -> str:
    """The last line the Sandbox wrote to stderr, or Modal wrote about it: the reason a boot failed, in words."""
    try:
        entries = [entry async for entry in sandbox.logs.tail.aio(20)]
    except Exception:  # noqa: BLE001 - a reason to add, never a reason to fail the check
        return ""
    said = [str(entry.message).strip() for entry in entries if entry.source in ("stderr", "system")]
    return next((line for line in reversed(said) if line), "")[:300]


async def create_sandbox(client: Any, session: ModalSession, spec: dict[str, Any]) -> tuple[str, str]:
    """Make the Sandbox and wait for its port's tunnel: (Sandbox id, tunnel URL)."""
    app = await session.app_for(client)
    sandbox = await modal.Sandbox.create.aio(
        app=app,
        image=modal.Image.from_registry(spec["image"]),
        gpu=spec["gpu"],
        name=spec["name"],
        env=spec["env"],
        tags={**spec["tags"], TAG_GPU: spec["gpu"]},
        timeout=spec["timeout"],
        encrypted_ports=[spec["port"]],
        region=list(spec["regions"]) or None,
        client=client,
    )
    tunnels = await sandbox.tunnels.aio(timeout=TUNNEL_WAIT_SECONDS)
    return sandbox.object_id, tunnels[spec["port"]].url


async def find_tagged(client: Any, session: ModalSession, lease_id: str, port: int | None) -> list[Found]:
    """The lease's running Sandboxes (by its tag), with the tunnel URL of `port` where it is up."""
    app = await session.app_for(client)
    found = []
    async for sandbox in modal.Sandbox.list.aio(app_id=app.app_id, tags={TAG_LEASE: lease_id}, client=client):
        endpoint = None
        gpu = None
        if port is not None:
            endpoint = await _tunnel_url(sandbox, port)
            gpu = (await sandbox.get_tags.aio()).get(TAG_GPU)
        found.append(Found(sandbox.object_id, endpoint, gpu))
    return found


async def _tunnel_url(sandbox: Any, port: int) -> str | None:
    try:
        tunnels = await sandbox.tunnels.aio(timeout=1)
    except modal_errors.SandboxTimeoutError:
        return None
    tunnel = tunnels.get(port)
    return None if tunnel is None else str(tunnel.url)


async def terminate_and_confirm(client: Any, sandbox_id: str, confirm_seconds: float) -> bool:
    """Terminate the Sandbox and wait until Modal reports it finished: False once gone, True if it still runs."""
    try:
        sandbox = await modal.Sandbox.from_id.aio(sandbox_id, client=client)
    except modal_errors.NotFoundError:
        return False
    if sandbox.returncode is not None:
        return False
    await sandbox.terminate.aio()
    until = time.monotonic() + confirm_seconds
    pause = 0.05
    while time.monotonic() < until:
        if await sandbox.poll.aio() is not None:
            return False
        await asyncio.sleep(pause)
        pause = min(1.0, pause * 2)
    return await sandbox.poll.aio() is None


async def list_managed(client: Any, session: ModalSession) -> list[ManagedWorker]:
    """Every running Sandbox of the App tagged as ours, with its lease (from its tags)."""
    app = await session.app_for(client)
    sandboxes = [
        sandbox
        async for sandbox in modal.Sandbox.list.aio(app_id=app.app_id, tags={TAG_MANAGED: MANAGED}, client=client)
    ]
    tags = await asyncio.gather(*(sandbox.get_tags.aio() for sandbox in sandboxes))
    workers = []
    for sandbox, tagged in zip(sandboxes, tags, strict=True):
        if not tagged.get(TAG_LEASE):
            continue
        try:
            created = datetime.fromtimestamp(int(tagged.get(TAG_CREATED, "")), UTC)
        except ValueError:
            created = datetime.now(UTC)
        workers.append(ManagedWorker(lease_id=tagged[TAG_LEASE], token=sandbox.object_id, created_at=created))
    return workers


async def readiness(client: Any, sandbox_id: str, port: int) -> Readiness:
    """Ready: the Sandbox runs and `port`'s tunnel is up. Failed: it has finished, or Modal no longer knows it."""
    try:
        sandbox = await modal.Sandbox.from_id.aio(sandbox_id, client=client)
    except modal_errors.NotFoundError:
        return Readiness.failed(f"the Modal Sandbox {sandbox_id} no longer exists")
    code = sandbox.returncode
    if code is not None:
        said = await _last_words(sandbox)
        return Readiness.failed(
            f"the Modal Sandbox {sandbox_id} {describe(code)}{f'; last output: {said}' if said else ''}"
        )
    if await _tunnel_url(sandbox, port) is None:
        return Readiness.starting(f"Sandbox running, the tunnel of port {port} not up yet")
    return Readiness.ready()


async def readiness_many(client: Any, sandbox_ids: list[str], port: int) -> dict[str, Readiness]:
    """`readiness` of each, asked at once; a Sandbox Modal would not show is left out (asked again later)."""
    said = await asyncio.gather(
        *(readiness(client, sandbox_id, port) for sandbox_id in sandbox_ids), return_exceptions=True
    )
    answers = {sandbox_id: one for sandbox_id, one in zip(sandbox_ids, said, strict=True) if isinstance(one, Readiness)}
    errors = [one for one in said if isinstance(one, BaseException)]
    if errors and not answers:
        raise errors[0]
    return answers


def _fetch_since(since_ns: int) -> datetime:
    """What to ask Modal for lines since: `since_ns` kept within two days ago and a day ahead (in nanoseconds,
    before any datetime is made: RFC 3339 reaches from year 1 to past 9999, which datetime cannot hold), a
    millisecond early (the client carries it as float seconds; `select` is exact). Modal refuses ranges past
    35 days and a Sandbox lives at most a day, so older is the same as two days ago; later than a day ahead
    matches no line, as a day ahead does not."""
    now_ns = time.time_ns()
    kept = min(max(since_ns, now_ns - 2 * _DAY_NS), now_ns + _DAY_NS)
    return _EPOCH + timedelta(microseconds=kept // 1000) - timedelta(milliseconds=1)


async def read_logs(client: Any, sandbox_id: str, query: LogQuery) -> list[LogLine]:
    """The Sandbox's output and Modal's lines about it (`system`), per the query; WorkerGone once it finished."""
    try:
        sandbox = await modal.Sandbox.from_id.aio(sandbox_id, client=client)
    except modal_errors.NotFoundError as error:
        raise WorkerGone(f"Modal no longer knows Sandbox {sandbox_id}") from error
    code = sandbox.returncode
    if code is not None:
        raise WorkerGone(f"the Modal Sandbox {sandbox_id} {describe(code)}; a lease's worker goes with it")
    try:
        if query.since_ns is None:
            entries = [entry async for entry in sandbox.logs.tail.aio(max(1, query.tail))]
        else:
            entries = [entry async for entry in sandbox.logs.fetch.aio(since=_fetch_since(query.since_ns))]
    except modal_errors.ExecutionError:
        return []  # not scheduled yet: it has printed nothing
    lines: list[LogLine] = []
    for entry in entries:
        at_ns = (entry.timestamp - _EPOCH) // timedelta(microseconds=1) * 1000
        source = "system" if entry.source == "system" else str(entry.source)
        lines.extend(LogLine(at_ns, text, source) for text in str(entry.message).splitlines())
    return select(lines, query)
