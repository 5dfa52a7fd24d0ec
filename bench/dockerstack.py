"""The TLS Docker host and the local stack for the end-to-end benchmarks, and the HTTP calls they make.

- `docker_target()`: the Docker host named by DOCKER_HOST/DOCKER_CERT_PATH (what `make bench` passes
  down, so every benchmark shares one host), else a fresh loopback TLS dev host (devstack.docker_host)
  started here and stopped afterwards. The busybox worker images are imported either way.
- `running_stack()`: `python -m devstack` (tests.support.stack.start_stack) on that host.
- `api_session()`, `lease_cycle()`, `live_leases()`: the lease API as the load benchmarks drive it;
  `run_cycles()`: N create → remove cycles at a concurrency, each thread with its own connection.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from scheduler.providers.base import LEASE_ID_LABEL, MANAGED_LABEL

LEASE_BODY = {"kind": "renderer", "ttl_seconds": 300}


@dataclass
class DockerTarget:
    env: dict[str, str]  # DOCKER_HOST, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH
    images: dict[str, str]  # kind → image tag the stack runs

    def client(self, timeout: int = 60) -> Any:
        """A docker.DockerClient verifying the host against its own CA, its API version negotiated."""
        from devstack.docker_clients import tls_client

        return tls_client(self.env["DOCKER_HOST"], Path(self.env["DOCKER_CERT_PATH"]), None, timeout)

    def managed_containers(self) -> dict[str, str]:
        """Lease id (or container id) → container name of every managed container, running or not."""
        client = self.client()
        try:
            listed = client.containers.list(all=True, filters={"label": f"{MANAGED_LABEL}=true"})
            return {container.labels.get(LEASE_ID_LABEL, container.id): container.name for container in listed}
        finally:
            client.close()


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
    from devstack.docker_host import start_tls_docker_host
    from devstack.worker_image import ensure_worker_images

    host, state_dir = None, None
    if os.environ.get("DOCKER_HOST") and os.environ.get("DOCKER_CERT_PATH"):
        env = {key: os.environ[key] for key in ("DOCKER_HOST", "DOCKER_CERT_PATH")} | {"DOCKER_TLS_VERIFY": "1"}
    else:
        state_dir = Path(tempfile.mkdtemp(prefix="openalice-bench-docker-"))
        host = start_tls_docker_host(state_dir)
        env = host.env()
    target = DockerTarget(env, {})
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
    env = {"RENDERER_IMAGE": target.images["renderer"], "ANIM_IMAGE": target.images["anim"]}
    env |= {"RECONCILE_INTERVAL_SECONDS": "3600", **extra_env}
    stack = start_stack(state_dir, docker_env=target.env, extra_env=env, ttl_lag_seconds=ttl_lag_seconds, timeout=180)
    try:
        yield stack
    finally:
        stack.stop()
        stack.final_log = stack.logs()  # what it printed on stop too, before its state dir goes
        shutil.rmtree(state_dir, ignore_errors=True)


def api_session(secret: str, pool: int = 1) -> requests.Session:
    """A keep-alive session with the internal secret, never a proxy (the calls stay on loopback)."""
    session = requests.Session()
    session.trust_env = False
    session.headers["X-Internal-Secret"] = secret
    adapter = requests.adapters.HTTPAdapter(pool_connections=pool, pool_maxsize=pool)
    session.mount("http://", adapter)
    return session


class CycleFailed(Exception):
    """An acquire or release answered another status than 201 / 204 (`.key`: `acquire 503 no_capacity`)."""

    def __init__(self, key: str, acquire_ms: float | None = None) -> None:
        super().__init__(key)
        self.key = key
        self.acquire_ms = acquire_ms


def error_key(operation: str, response: requests.Response) -> str:
    """`acquire 503 no_capacity`; API Gateway's own answers carry a message instead of a code."""
    try:
        body = response.json()
    except ValueError:
        body = None
    code = None
    if isinstance(body, dict):
        error = body.get("error")
        code = error.get("code") if isinstance(error, dict) else None
        code = code or (f"gateway: {body['message']}" if "message" in body else None)
    return f"{operation} {response.status_code} {code or 'no error body'}"


def lease_cycle(session: requests.Session, url: str, timeout: float = 60.0) -> tuple[str, float, float]:
    """One acquire → release: (lease id, acquire ms, release ms); CycleFailed names a refused step."""
    started = time.perf_counter()
    response = session.post(url + "/v1/lease", json=LEASE_BODY, timeout=timeout)
    acquired = time.perf_counter()
    if response.status_code != 201:
        raise CycleFailed(error_key("acquire", response))
    lease_id = str(response.json()["lease"]["lease_id"])
    response = session.delete(f"{url}/v1/lease/{lease_id}", timeout=timeout)
    if response.status_code != 204:
        raise CycleFailed(error_key("release", response), (acquired - started) * 1000)
    return lease_id, (acquired - started) * 1000, (time.perf_counter() - acquired) * 1000


def live_leases(session: requests.Session, url: str, timeout: float = 60.0) -> list[dict[str, Any]]:
    """Every lease `GET /v1/leases` lists, all pages."""
    leases: list[dict[str, Any]] = []
    params: dict[str, Any] = {"limit": 1000}
    while True:
        response = session.get(url + "/v1/leases", params=params, timeout=timeout)
        response.raise_for_status()
        body = response.json()
        leases.extend(body["leases"])
        if not body.get("next_token"):
            return leases
        params["next_token"] = body["next_token"]


@dataclass
class Cycles:
    """What a run of create → remove cycles measured; every update happens under `lock`."""

    create_ms: list[float] = field(default_factory=list)
    remove_ms: list[float] = field(default_factory=list)
    cycle_ms: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    lease_ids: set[str] = field(default_factory=set)
    issued: int = 0
    finished: int = 0
    in_flight: int = 0
    seconds: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


def run_cycles(
    step: Callable[[Any], tuple[str | None, float, float]],
    count: int,
    concurrency: int,
    resource: Callable[[], Any] = lambda: None,
    tick: Callable[[Cycles, threading.Event], None] | None = None,
) -> Cycles:
    """`count` cycles of `step(resource)` → (lease id, create ms, remove ms) on `concurrency` threads.

    A failed step is counted by its error and the run goes on. `tick` is called every 0.1 s from this
    thread; setting the event it gets stops new cycles (those in flight finish). Ctrl-C does the same;
    a second Ctrl-C abandons the cycles in flight.
    """
    result, stop = Cycles(), threading.Event()

    def worker() -> None:
        handle = resource()
        try:
            while not stop.is_set():
                with result.lock:
                    if result.issued >= count:
                        return
                    result.issued += 1
                    result.in_flight += 1
                started = time.perf_counter()
                try:
                    lease_id, create, remove = step(handle)
                except Exception as error:  # noqa: BLE001 - counted, the run goes on
                    with result.lock:
                        result.errors[
                            error.key
                            if isinstance(error, CycleFailed)
                            else f"{type(error).__name__}: {str(error)[:100]}"
                        ] += 1
                        if isinstance(error, CycleFailed) and error.acquire_ms is not None:
                            result.create_ms.append(error.acquire_ms)
                        result.in_flight, result.finished = result.in_flight - 1, result.finished + 1
                    continue
                with result.lock:
                    result.create_ms.append(create)
                    result.remove_ms.append(remove)
                    result.cycle_ms.append((time.perf_counter() - started) * 1000)
                    result.lease_ids.update([lease_id] if lease_id else [])
                    result.in_flight, result.finished = result.in_flight - 1, result.finished + 1
        finally:
            if handle is not None:
                handle.close()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        try:
            time.sleep(0.1)
        except KeyboardInterrupt:
            if stop.is_set():
                break
            print("[bench] interrupted: finishing the cycles in flight (Ctrl-C again to abandon them)", flush=True)
            stop.set()
        if tick is not None:
            tick(result, stop)
    result.seconds = time.perf_counter() - began
    return result
