"""The TLS Docker host and the local stack for the end-to-end benchmarks, and where the machine's CPU went.

- `docker_target()`: the Docker host named by DOCKER_HOST/DOCKER_TLS_VERIFY/DOCKER_CERT_PATH (what
  `make bench` passes down, so every benchmark shares one host), else a fresh loopback TLS dev
  host (devstack.docker_host) started here and stopped afterwards. The busybox worker images are
  imported either way.
- `running_stack()`: `python -m devstack` (tests.support.stack.start_stack) on that host.
- `CpuSnapshot` / `cpu_by_group()`: CPU seconds per process group between two snapshots of /proc.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import REPO

DOCKER_API_VERSION = None  # negotiated with the engine, as the local-docker driver does
MANAGED_LABEL = "openalice.scheduler/managed"  # scheduler.providers.base.MANAGED_LABEL
LEASE_ID_LABEL = "openalice.scheduler/lease-id"  # scheduler.providers.base.LEASE_ID_LABEL


@dataclass
class DockerTarget:
    env: dict[str, str]  # DOCKER_HOST, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH
    images: dict[str, str]  # kind → image tag the stack runs
    started_here: bool

    def client(self, timeout: int = 60) -> Any:
        """A docker.DockerClient verifying the host against its own CA, as the driver does."""
        from devstack.docker_host import tls_client

        return tls_client(self.env["DOCKER_HOST"], Path(self.env["DOCKER_CERT_PATH"]), DOCKER_API_VERSION, timeout)

    def cli_env(self) -> dict[str, str]:
        """The environment for the `docker` CLI on this host."""
        return {**os.environ, **self.env}


def docker_prerequisites() -> str | None:
    """None when a TLS Docker host can be used here, else why not."""
    if os.environ.get("DOCKER_HOST") and os.environ.get("DOCKER_CERT_PATH"):
        return None
    try:
        from devstack.docker_host import check_prerequisites

        check_prerequisites()
    except Exception as error:  # noqa: BLE001 - any reason is reported as the skip reason
        return str(error)
    return None


@contextlib.contextmanager
def docker_target() -> Iterator[DockerTarget]:
    """The TLS Docker host from the environment, or one started (and stopped) here."""
    from devstack.docker_host import ensure_worker_images, start_tls_docker_host

    host = None
    state_dir = None
    if os.environ.get("DOCKER_HOST") and os.environ.get("DOCKER_CERT_PATH"):
        env = {
            "DOCKER_HOST": os.environ["DOCKER_HOST"],
            "DOCKER_TLS_VERIFY": "1",
            "DOCKER_CERT_PATH": os.environ["DOCKER_CERT_PATH"],
        }
    else:
        state_dir = Path(tempfile.mkdtemp(prefix="openalice-bench-docker-"))
        host = start_tls_docker_host(state_dir)
        env = host.env()
    target = DockerTarget(env, {}, started_here=host is not None)
    try:
        client = target.client()
        try:
            target.images = ensure_worker_images(client)
        finally:
            client.close()
        yield target
    finally:
        if host is not None:
            host.stop()
        if state_dir is not None:
            shutil.rmtree(state_dir, ignore_errors=True)


@contextlib.contextmanager
def running_stack(target: DockerTarget, extra_env: dict[str, str], ttl_lag_seconds: float = 3600.0) -> Iterator[Any]:
    """The local stack (`python -m devstack`) on the target host; stopped afterwards."""
    from tests.support.stack import start_stack

    state_dir = Path(tempfile.mkdtemp(prefix="openalice-bench-stack-"))
    env = {
        "RENDERER_IMAGE": target.images["renderer"],
        "ANIM_IMAGE": target.images["anim"],
        "RECONCILE_INTERVAL_SECONDS": "3600",
        **extra_env,
    }
    stack = start_stack(state_dir, docker_env=target.env, extra_env=env, ttl_lag_seconds=ttl_lag_seconds, timeout=180)
    try:
        yield stack
    finally:
        stack.stop()
        shutil.rmtree(state_dir, ignore_errors=True)


def repo() -> Path:
    return REPO


# --- where the CPU went --------------------------------------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK")
_DOCKER = ("dockerd", "containerd", "containerd-shim", "runc", "docker-init", "docker-proxy")


@dataclass
class CpuSnapshot:
    """Per-process CPU seconds (utime + stime), parent and start time, and the machine's busy/idle ticks."""

    processes: dict[int, tuple[str, int, float, int]]
    busy: float
    idle: float
    children: float  # this process's reaped children (the docker CLI runs)

    @classmethod
    def take(cls) -> CpuSnapshot:
        import resource

        processes: dict[int, tuple[str, int, float, int]] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, IndexError, ValueError):
                text = (entry / "stat").read_text()
                comm = text[text.index("(") + 1 : text.rindex(")")]
                rest = text[text.rindex(")") + 2 :].split()
                processes[int(entry.name)] = (
                    comm,
                    int(rest[1]),
                    (int(rest[11]) + int(rest[12])) / _TICK,
                    int(rest[19]),
                )
        ticks = [int(value) for value in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
        idle = (ticks[3] + ticks[4]) / _TICK
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return cls(processes, sum(ticks) / _TICK - idle, idle, usage.ru_utime + usage.ru_stime)


def _group(pid: int, processes: dict[int, tuple[str, int, float, int]], stack_pid: int | None) -> str:
    if pid == os.getpid():
        return "bench driver"
    if pid == stack_pid:
        return "local stack process (gateway, moto, pollers)"
    current, hops = pid, 0
    while current > 1 and current in processes and hops < 64:
        comm, parent, _, _ = processes[current]
        if current == stack_pid:
            return "local stack function environments"
        if comm.startswith(_DOCKER):
            return "docker engine (dockerd, containerd, shims)"
        if current == os.getpid():
            return "bench driver"
        current, hops = parent, hops + 1
    return "other processes on the machine"


def cpu_by_group(before: CpuSnapshot, after: CpuSnapshot, stack_pid: int | None) -> dict[str, Any]:
    """CPU seconds each group used between the snapshots, and the machine's busy share."""
    groups: dict[str, float] = {}
    for pid, (_, _, cpu, started) in after.processes.items():
        previous = before.processes.get(pid)
        used = cpu - previous[2] if previous is not None and previous[3] == started else cpu
        name = _group(pid, after.processes, stack_pid)
        groups[name] = groups.get(name, 0.0) + max(0.0, used)
    children = after.children - before.children
    if children > 0:
        groups["bench driver's exited children (docker CLI)"] = children
    busy = after.busy - before.busy
    groups["exited processes (runc, shims; not attributable)"] = max(0.0, busy - sum(groups.values()))
    wall = (after.busy + after.idle) - (before.busy + before.idle)
    return {
        "busy_share": round(busy / wall, 3) if wall else None,
        "busy_cpu_seconds": round(busy, 2),
        "by_group_cpu_seconds": {name: round(value, 2) for name, value in sorted(groups.items())},
    }


def wait_until(check: Any, timeout: float, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(interval)
    return bool(check())
