"""Load: N acquire→release cycles at concurrency C against the local stack, then a leak check.

Each cycle is `POST /v1/lease {"kind":"renderer","ttl_seconds":300}` then `DELETE /v1/lease/{id}`.
The run is bounded in cycles (--cycles) and in time (--max-seconds): at the deadline no new cycle
starts, cycles in flight finish (a lease already acquired is still released) and the partial
results are reported. Ctrl-C stops the same way.

Reported: throughput, p50/p95/p99 of acquire, release and the whole cycle (successful calls only),
errors by operation, status and error code, and leaks after the run — containers labelled
`openalice.scheduler/managed=true` still on the Docker host and leases still listed by
`GET /v1/leases` (both must be 0). Results go to bench/results/load.json and load.md.

    .venv/bin/python bench/load.py --start-stack                    # self-contained: own stack, own Docker host
    .venv/bin/python bench/load.py --url http://127.0.0.1:3000       # against `make run`
    .venv/bin/python bench/load.py --start-stack --cycles 3 --concurrency 2    # smoke

The URL must be loopback. The secret comes from --secret, $INTERNAL_SECRET or .local/internal-secret.
The Docker host to inspect comes from --docker-host/--docker-tls-verify/--docker-cert-path, then
$DOCKER_HOST/$DOCKER_TLS_VERIFY/$DOCKER_CERT_PATH, then the dev host of `make run` (.local/docker).
With --start-stack it is the host the started stack uses (its own fresh TLS dev host unless
DOCKER_HOST is set). Exit status: 0 when no call failed and nothing leaked, 1 otherwise, 2 for a
refused argument.

The client is threads + `requests` (one keep-alive session per worker): 20 concurrent blocking
calls are cheap for threads, it adds no dependency, and the driver's own CPU time is reported so
it can be told apart from the server's.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import json
import math
import os
import platform
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # devstack and tests.support, when run as `python bench/load.py`

RESULTS = REPO / "bench" / "results"
MANAGED_LABEL = "openalice.scheduler/managed"  # scheduler.providers.base.MANAGED_LABEL
LEASE_ID_LABEL = "openalice.scheduler/lease-id"  # scheduler.providers.base.LEASE_ID_LABEL
DOCKER_API_VERSION = None  # negotiated with the engine, as the local-docker driver does
DEFAULT_DOCKER_STATE = REPO / ".local" / "docker"
LEASE_BODY = {"kind": "renderer", "ttl_seconds": 300}


class Refused(Exception):
    """An argument the driver will not act on (e.g. a non-loopback URL)."""


# --- arguments -----------------------------------------------------------------------------------


def require_loopback(url: str) -> str:
    """The URL without a trailing slash, if it is http(s) on a loopback address; Refused otherwise."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Refused(f"not an http(s) URL: {url!r}")
    host = parts.hostname
    try:
        addresses = [ipaddress.ip_address(host)]
    except ValueError:
        if host != "localhost":
            raise Refused(f"refusing {url!r}: only a loopback address (127.0.0.1, ::1, localhost) is allowed") from None
        try:
            infos = socket.getaddrinfo(host, parts.port or 80, proto=socket.IPPROTO_TCP)
        except OSError as error:
            raise Refused(f"cannot resolve {host!r}: {error}") from error
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    if not addresses or not all(address.is_loopback for address in addresses):
        raise Refused(f"refusing {url!r}: {host} is not a loopback address")
    return url.rstrip("/")


def read_secret(explicit: str | None) -> str:
    """--secret, else $INTERNAL_SECRET, else the secret `make run` generated."""
    if explicit:
        return explicit
    if os.environ.get("INTERNAL_SECRET"):
        return os.environ["INTERNAL_SECRET"]
    path = REPO / ".local" / "internal-secret"
    if path.is_file():
        return path.read_text().strip()
    raise Refused("no secret: pass --secret, set INTERNAL_SECRET, or run `make run` once to generate one")


def docker_settings(args: argparse.Namespace) -> dict[str, str]:
    """DOCKER_* from the arguments, else from the environment (only the ones that are set)."""
    chosen = {
        "DOCKER_HOST": args.docker_host or os.environ.get("DOCKER_HOST", ""),
        "DOCKER_TLS_VERIFY": args.docker_tls_verify or os.environ.get("DOCKER_TLS_VERIFY", ""),
        "DOCKER_CERT_PATH": args.docker_cert_path or os.environ.get("DOCKER_CERT_PATH", ""),
    }
    return {key: value for key, value in chosen.items() if value} if chosen["DOCKER_HOST"] else {}


# --- the load ------------------------------------------------------------------------------------


@dataclass
class Tally:
    """What the workers measured; every update happens under `lock`."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    issued: int = 0
    in_flight: int = 0
    finished: int = 0
    ok: int = 0
    requests: int = 0
    acquire_ms: list[float] = field(default_factory=list)
    release_ms: list[float] = field(default_factory=list)
    cycle_ms: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    lease_ids: set[str] = field(default_factory=set)
    first_start: float | None = None
    last_end: float | None = None

    def error_count(self) -> int:
        return sum(self.errors.values())


def _error_key(operation: str, response: requests.Response) -> str:
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


class LoadRun:
    """Workers that each run cycles until the budget of cycles or time is spent."""

    def __init__(self, url: str, secret: str, cycles: int, concurrency: int, timeout: float) -> None:
        self.url = url
        self.secret = secret
        self.cycles = cycles
        self.concurrency = concurrency
        self.timeout = timeout
        self.tally = Tally()
        self.stop = threading.Event()
        self.stack_pid: int | None = None  # when known, its memory is sampled with the progress

    def _session(self) -> requests.Session:
        session = requests.Session()
        session.trust_env = False  # no proxy from the environment: the calls stay on loopback
        session.headers["X-Internal-Secret"] = self.secret
        adapter = requests.adapters.HTTPAdapter(pool_connections=1, pool_maxsize=1)
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        return session

    def worker(self) -> None:
        """Run cycles until told to stop or every cycle has been issued."""
        with self._session() as session:
            while not self.stop.is_set():
                with self.tally.lock:
                    if self.tally.issued >= self.cycles:
                        return
                    self.tally.issued += 1
                    self.tally.in_flight += 1
                try:
                    self.cycle(session)
                finally:
                    with self.tally.lock:
                        self.tally.in_flight -= 1
                        self.tally.finished += 1

    def cycle(self, session: requests.Session) -> None:
        """One acquire → release; a lease that was acquired is released even after the deadline."""
        tally = self.tally
        started = time.perf_counter()
        with tally.lock:
            tally.first_start = started if tally.first_start is None else tally.first_start
        try:
            response = session.post(self.url + "/v1/lease", json=LEASE_BODY, timeout=self.timeout)
        except requests.RequestException as error:
            self._finish(requests=1, errors=[f"acquire exception {type(error).__name__}"])
            return
        acquired = time.perf_counter()
        if response.status_code != 201:
            self._finish(requests=1, errors=[_error_key("acquire", response)])
            return
        lease_id = str(response.json()["lease"]["lease_id"])
        with tally.lock:
            tally.lease_ids.add(lease_id)
        try:
            response = session.delete(f"{self.url}/v1/lease/{lease_id}", timeout=self.timeout)
        except requests.RequestException as error:
            self._finish(
                requests=2, acquire_ms=(acquired - started) * 1000, errors=[f"release exception {type(error).__name__}"]
            )
            return
        released = time.perf_counter()
        if response.status_code != 204:
            self._finish(requests=2, acquire_ms=(acquired - started) * 1000, errors=[_error_key("release", response)])
            return
        self._finish(
            requests=2,
            acquire_ms=(acquired - started) * 1000,
            release_ms=(released - acquired) * 1000,
            cycle_ms=(released - started) * 1000,
        )

    def _finish(
        self,
        *,
        requests: int,
        acquire_ms: float | None = None,
        release_ms: float | None = None,
        cycle_ms: float | None = None,
        errors: list[str] | None = None,
    ) -> None:
        with self.tally.lock:
            self.tally.last_end = time.perf_counter()
            self.tally.requests += requests
            if acquire_ms is not None:
                self.tally.acquire_ms.append(acquire_ms)
            if release_ms is not None:
                self.tally.release_ms.append(release_ms)
            if cycle_ms is not None:
                self.tally.cycle_ms.append(cycle_ms)
                self.tally.ok += 1
            self.tally.errors.update(errors or [])

    def run(self, max_seconds: float, progress_seconds: float) -> tuple[str, list[dict[str, Any]]]:
        """Run the load; returns why it stopped (done, max_seconds, interrupted) and the progress samples."""
        threads = [
            threading.Thread(target=self.worker, name=f"load-{index}", daemon=True) for index in range(self.concurrency)
        ]
        started = time.monotonic()
        deadline = started + max_seconds
        for thread in threads:
            thread.start()
        samples: list[dict[str, Any]] = []
        stopped_by = "done"
        next_report = started + progress_seconds
        last_time, last_done = started, 0
        while any(thread.is_alive() for thread in threads):
            try:
                time.sleep(0.1)
            except KeyboardInterrupt:
                if stopped_by == "interrupted":
                    print("[load] abandoning the cycles in flight", flush=True)
                    break
                print("[load] interrupted: finishing the cycles in flight (Ctrl-C again to abandon them)", flush=True)
                stopped_by = "interrupted"
                self.stop.set()
            now = time.monotonic()
            if now >= deadline and not self.stop.is_set():
                stopped_by = "max_seconds"
                self.stop.set()
                print(f"[load] --max-seconds {max_seconds:g} reached: finishing the cycles in flight", flush=True)
            if now >= next_report:
                last_time, last_done = self._report(samples, started, now, last_time, last_done)
                next_report = now + progress_seconds
        self._report(samples, started, time.monotonic(), last_time, last_done)
        return stopped_by, samples

    def _report(
        self, samples: list[dict[str, Any]], started: float, now: float, last_time: float, last_done: int
    ) -> tuple[float, int]:
        tally = self.tally
        with tally.lock:
            done, ok, errors, in_flight = tally.finished, tally.ok, tally.error_count(), tally.in_flight
        rate = (done - last_done) / (now - last_time) if now > last_time else 0.0
        sample = {
            "t": round(now - started, 1),
            "done": done,
            "ok": ok,
            "errors": errors,
            "in_flight": in_flight,
            "rate": round(rate, 2),
        }
        memory = ""
        if (rss := rss_mb(self.stack_pid)) is not None:
            sample["stack_rss_mb"] = rss
            memory = f"  stack RSS {rss:.0f} MB"
        samples.append(sample)
        print(
            f"[load] {sample['t']:6.1f} s  done {done}/{self.cycles}  rate {rate:6.2f}/s  "
            f"errors {errors}  in flight {in_flight}{memory}",
            flush=True,
        )
        return now, done


# --- figures -------------------------------------------------------------------------------------


def percentile(sorted_values: list[float], p: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if len(sorted_values) == 1:
        return sorted_values[0]
    rank = (len(sorted_values) - 1) * p / 100
    low = math.floor(rank)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (rank - low)


def latency_summary(values: list[float]) -> dict[str, float | int | None]:
    """count, mean, min, p50, p95, p99, max in ms (None when there is nothing to summarise)."""
    if not values:
        return {"count": 0, "mean": None, "min": None, "p50": None, "p95": None, "p99": None, "max": None}
    ordered = sorted(values)
    summary: dict[str, float | int | None] = {"count": len(ordered), "mean": round(sum(ordered) / len(ordered), 1)}
    summary["min"] = round(ordered[0], 1)
    for p in (50, 95, 99):
        summary[f"p{p}"] = round(percentile(ordered, p), 1)
    summary["max"] = round(ordered[-1], 1)
    return summary


def machine() -> dict[str, Any]:
    """nproc, uname -m, the Python version and the OS, as the results' context."""
    try:
        nproc: int | None = int(subprocess.run(["nproc"], capture_output=True, text=True, check=True).stdout)
    except (OSError, ValueError, subprocess.CalledProcessError):
        nproc = os.cpu_count()
    return {
        "nproc": nproc,
        "uname_m": platform.machine(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


# --- where the CPU went --------------------------------------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_DOCKER_COMMANDS = ("dockerd", "containerd", "runc", "docker-")
CPU_GROUPS = ("driver", "stack process", "function environments", "docker", "other processes", "exited processes")


@dataclass
class CpuSnapshot:
    """Per-process CPU seconds and the machine's busy/idle seconds, from /proc.

    Only a process's own time (utime + stime): reaped children's time lands in the parent's cutime all
    at once, run-time before the window included, so it would be counted twice.
    """

    processes: dict[int, tuple[str, int, float, int]]  # pid -> (comm, ppid, cpu seconds, start time)
    busy: float
    idle: float

    @classmethod
    def take(cls) -> CpuSnapshot | None:
        """None where /proc is not Linux's."""
        processes: dict[int, tuple[str, int, float, int]] = {}
        try:
            fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
            ticks = [int(value) for value in fields]
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit():
                    continue
                with contextlib.suppress(OSError, IndexError, ValueError):
                    text = (entry / "stat").read_text()
                    comm = text[text.index("(") + 1 : text.rindex(")")]
                    rest = text[text.rindex(")") + 2 :].split()
                    cpu = (int(rest[11]) + int(rest[12])) / _TICK  # utime + stime
                    processes[int(entry.name)] = (comm, int(rest[1]), cpu, int(rest[19]))
        except (OSError, ValueError):
            return None
        idle = (ticks[3] + ticks[4]) / _TICK  # idle + iowait
        busy = sum(ticks[:8]) / _TICK - idle  # user nice system idle iowait irq softirq steal
        return cls(processes, busy, idle)


def _group_of(pid: int, processes: dict[int, tuple[str, int, float, int]], stack_pid: int | None) -> str:
    if pid == os.getpid():
        return "driver"
    if pid == stack_pid:
        return "stack process"
    seen, current = 0, pid
    while current > 1 and current in processes and seen < 64:
        comm, parent, _, _ = processes[current]
        if comm.startswith(_DOCKER_COMMANDS):
            return "docker"
        if parent == stack_pid:
            return "function environments"
        current, seen = parent, seen + 1
    return "other processes"


def cpu_breakdown(before: CpuSnapshot | None, after: CpuSnapshot | None, stack_pid: int | None) -> dict[str, Any]:
    """CPU seconds each group used between the snapshots.

    `exited processes` is the machine's busy time no live process accounts for: processes that ended
    during the load (runc, short-lived container shims, other users' commands) and interrupts.
    """
    if before is None or after is None:
        return {}
    groups = dict.fromkeys(CPU_GROUPS, 0.0)
    for pid, (_, _, cpu, started) in after.processes.items():
        previous = before.processes.get(pid)
        used = cpu - previous[2] if previous is not None and previous[3] == started else cpu
        groups[_group_of(pid, after.processes, stack_pid)] += max(0.0, used)
    busy = after.busy - before.busy
    groups["exited processes"] = max(0.0, busy - sum(groups.values()))
    wall = (after.busy + after.idle) - (before.busy + before.idle)
    return {
        "busy_share": round(busy / wall, 3) if wall else None,
        "busy_cpu_seconds": round(busy, 1),
        "by_group_cpu_seconds": {name: round(value, 1) for name, value in groups.items()},
    }


def rss_mb(pid: int | None) -> float | None:
    """Resident memory of a process (the stack: gateway, moto's tables and streams live there)."""
    if pid is None:
        return None
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return None


def code_version() -> dict[str, Any]:
    """The commit measured, and whether the work tree differed from it."""

    def git(*arguments: str) -> str:
        done = subprocess.run(["git", *arguments], cwd=REPO, capture_output=True, text=True, check=False)
        return done.stdout.strip()

    with contextlib.suppress(OSError):
        return {"commit": git("rev-parse", "--short", "HEAD") or None, "dirty": bool(git("status", "--porcelain"))}
    return {"commit": None, "dirty": None}


def find_stack_pid(url: str) -> int | None:
    """The process listening on the URL's port (the stack, when the bench did not start it), from /proc."""
    port = urlsplit(url).port or 80
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                columns = line.split()
                if columns[3] == "0A" and int(columns[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                    inodes.add(f"socket:[{columns[9]}]")
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and inodes:
            with contextlib.suppress(OSError):
                if any(os.readlink(fd) in inodes for fd in (entry / "fd").iterdir()):
                    return int(entry.name)
    return None


# --- leak check ----------------------------------------------------------------------------------


def docker_client(settings: dict[str, str], state_dir: Path) -> tuple[Any, str]:
    """A Docker SDK client on the host to inspect, and that host's address."""
    import docker

    from devstack.docker_host import load_tls_docker_host, tls_client

    if settings.get("DOCKER_HOST"):
        host = settings["DOCKER_HOST"]
        cert_path = settings.get("DOCKER_CERT_PATH")
        if cert_path or settings.get("DOCKER_TLS_VERIFY"):
            # As the driver does: always verify the host against its own CA.
            return tls_client(host, Path(cert_path or Path.home() / ".docker"), DOCKER_API_VERSION, 30), host
        client = docker.DockerClient(base_url=host, version=DOCKER_API_VERSION or "auto", timeout=30)
        client.api.trust_env = False
        return client, host
    recorded = load_tls_docker_host(state_dir)
    if recorded is None:
        raise RuntimeError(
            f"no Docker host to inspect: no DOCKER_HOST and no dev host recorded in {state_dir} "
            "(start `make run`, or pass --docker-host)"
        )
    return recorded.client(timeout=30), recorded.host


def live_leases(url: str, secret: str, timeout: float) -> list[dict[str, Any]]:
    """Every lease `GET /v1/leases` lists, all pages."""
    leases: list[dict[str, Any]] = []
    token: str | None = None
    with requests.Session() as session:
        session.trust_env = False
        while True:
            params: dict[str, Any] = {"limit": 1000, **({"next_token": token} if token else {})}
            response = session.get(
                url + "/v1/leases", params=params, headers={"X-Internal-Secret": secret}, timeout=timeout
            )
            response.raise_for_status()
            body = response.json()
            leases.extend(body["leases"])
            token = body.get("next_token")
            if not token:
                return leases


def check_leaks(
    url: str, secret: str, docker_settings_: dict[str, str], state_dir: Path, ours: set[str], timeout: float
) -> dict[str, Any]:
    """Managed containers on the Docker host and leases the API still lists, right after the run.

    `*_of_acquired_leases` counts those whose lease id the driver got back in a 201: a lease whose
    acquire failed (500, 503) is still left behind by the run, but the driver never saw its id.
    """
    report: dict[str, Any] = {"checked_at": datetime.now(UTC).isoformat(timespec="seconds")}
    try:
        client, host = docker_client(docker_settings_, state_dir)
        try:
            containers = client.containers.list(all=True, filters={"label": f"{MANAGED_LABEL}=true"})
        finally:
            client.close()
        report["docker_host"] = host
        report["containers"] = len(containers)
        report["containers_of_acquired_leases"] = sum(
            1 for container in containers if container.labels.get(LEASE_ID_LABEL) in ours
        )
        report["container_names"] = sorted(container.name for container in containers)[:20]
    except Exception as error:  # noqa: BLE001 - an unusable host is reported, not a crash after a long run
        report["containers"] = None
        report["docker_error"] = f"{type(error).__name__}: {error}"
    try:
        leases = live_leases(url, secret, timeout)
        report["leases"] = len(leases)
        report["leases_of_acquired_leases"] = sum(1 for lease in leases if lease.get("lease_id") in ours)
        report["lease_statuses"] = dict(Counter(str(lease.get("status")) for lease in leases))
    except (requests.RequestException, ValueError, KeyError) as error:
        report["leases"] = None
        report["leases_error"] = f"{type(error).__name__}: {error}"
    return report


# --- the stack -----------------------------------------------------------------------------------


@contextlib.contextmanager
def started_stack(settings: dict[str, str], keep_state: bool) -> Any:
    """`python -m devstack` on a free port with a fresh state dir (tests.support.stack), stopped afterwards."""
    from tests.support.stack import start_stack

    state_dir = Path(tempfile.mkdtemp(prefix="openalice-load-"))
    print(f"[load] starting the local stack (state dir {state_dir}) ...", flush=True)
    began = time.monotonic()
    # The same periods as `make run`; start_stack's test defaults would differ only in the TTL lag.
    running = start_stack(state_dir, docker_env=settings, ttl_lag_seconds=10.0, timeout=120.0)
    startup = time.monotonic() - began
    print(f"[load] stack ready on {running.url} in {startup:.1f} s", flush=True)
    failed = True
    try:
        yield running, startup
        failed = False
    finally:
        stopping = time.monotonic()
        running.stop()
        print(f"[load] stack stopped in {time.monotonic() - stopping:.1f} s", flush=True)
        if keep_state or failed:
            print(f"[load] its state and log are kept in {state_dir}", flush=True)
        else:
            shutil.rmtree(state_dir, ignore_errors=True)


# --- results -------------------------------------------------------------------------------------


def markdown(result: dict[str, Any]) -> str:
    """The results as a Markdown table, with the parameters and leak counts."""
    parameters, run, leaks, host = result["parameters"], result["run"], result["leaks"], result["machine"]

    def cell(value: Any) -> str:
        return "–" if value is None else f"{value:g}" if isinstance(value, float) else str(value)

    lines = [
        "# Load: acquire → release cycles on the local stack",
        "",
        f"{result['date']} · {host['nproc']} CPU `{host['uname_m']}` · Python {host['python']} · "
        f"{parameters['cycles']} cycles at concurrency {parameters['concurrency']} "
        f"(max {parameters['max_seconds']:g} s) · `{json.dumps(parameters['body'])}` · "
        f"stack {'started by the bench' if parameters['start_stack'] else parameters['url']} · "
        f"code `{result['code']['commit']}`{' + uncommitted changes' if result['code']['dirty'] else ''}",
        "",
        f"**{cell(result['throughput']['cycles_per_second'])} cycles/s** — {run['cycles_ok']} of "
        f"{run['cycles_issued']} cycles succeeded in {cell(run['elapsed_seconds'])} s (stopped: {run['stopped_by']}).",
        "",
        "| latency (ms) | count | p50 | p95 | p99 | max | mean |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name in ("acquire", "release", "cycle"):
        figures = result["latency_ms"][name]
        row = [cell(figures[key]) for key in ("count", "p50", "p95", "p99", "max", "mean")]
        lines.append(f"| {name} | " + " | ".join(row) + " |")
    lines += ["", "| errors | count |", "| --- | ---: |"]
    by_kind = result["errors"]["by_kind"]
    lines += [f"| {key} | {count} |" for key, count in sorted(by_kind.items())] or ["| none | 0 |"]
    lines += [
        "",
        "| leaks after the run | count |",
        "| --- | ---: |",
        f"| managed containers on the Docker host | {cell(leaks.get('containers'))} |",
        f"| leases listed by `GET /v1/leases` | {cell(leaks.get('leases'))} |",
    ]
    if result["stack"].get("peak_rss_mb") is not None:
        lines += ["", f"Stack process (gateway, moto) peak RSS: {cell(result['stack']['peak_rss_mb'])} MB."]
    host_cpu = result["stack"].get("host_cpu") or {}
    if host_cpu.get("by_group_cpu_seconds"):
        finished = max(1, run["cycles_issued"])
        lines += [
            "",
            f"Machine CPU during the load: {cell(host_cpu['busy_share'])} busy "
            f"({cell(host_cpu['busy_cpu_seconds'])} CPU-s over {host['nproc']} CPUs).",
            "",
            "| CPU by process group | CPU-s | CPU-ms per cycle |",
            "| --- | ---: | ---: |",
        ]
        lines += [
            f"| {name} | {cell(seconds)} | {cell(round(seconds * 1000 / finished, 1))} |"
            for name, seconds in host_cpu["by_group_cpu_seconds"].items()
        ]
    lines += [
        "",
        f"Driver: threads + requests, {cell(result['driver']['cpu_seconds'])} s CPU "
        f"({cell(result['driver']['cpu_share_of_one_core'])} of one core over the run).",
        "",
    ]
    return "\n".join(lines)


def build_result(
    args: argparse.Namespace,
    url: str,
    load: LoadRun,
    stopped_by: str,
    samples: list[dict[str, Any]],
    leaks: dict[str, Any],
    stack: dict[str, Any],
    cpu_seconds: float,
) -> dict[str, Any]:
    """Everything the run measured, as the JSON document."""
    tally = load.tally
    elapsed = (tally.last_end - tally.first_start) if tally.first_start and tally.last_end else 0.0
    return {
        "benchmark": "load",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "code": code_version(),
        "parameters": {
            "cycles": args.cycles,
            "concurrency": args.concurrency,
            "max_seconds": args.max_seconds,
            "request_timeout_seconds": args.timeout,
            "body": LEASE_BODY,
            "url": url,
            "start_stack": args.start_stack,
        },
        "stack": stack,
        "run": {
            "stopped_by": stopped_by,
            "complete": tally.finished == args.cycles,
            "elapsed_seconds": round(elapsed, 2),
            "cycles_issued": tally.issued,
            "cycles_ok": tally.ok,
            "cycles_failed": tally.finished - tally.ok,
        },
        "throughput": {
            "cycles_per_second": round(tally.ok / elapsed, 2) if elapsed else None,
            "requests_per_second": round(tally.requests / elapsed, 2) if elapsed else None,
        },
        "latency_ms": {
            "acquire": latency_summary(tally.acquire_ms),
            "release": latency_summary(tally.release_ms),
            "cycle": latency_summary(tally.cycle_ms),
        },
        "errors": {"total": tally.error_count(), "by_kind": dict(sorted(tally.errors.items()))},
        "leaks": leaks,
        "progress": samples,
        "driver": {
            "client": "threads + requests (one keep-alive session per worker)",
            "cpu_seconds": round(cpu_seconds, 2),
            "cpu_share_of_one_core": round(cpu_seconds / elapsed, 2) if elapsed else None,
        },
    }


def _load_average() -> list[float] | None:
    with contextlib.suppress(OSError, AttributeError):
        return [round(value, 2) for value in os.getloadavg()]
    return None


def _driver_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench/load.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default=os.environ.get("SCHEDULER_URL"), help="default http://127.0.0.1:$PORT")
    parser.add_argument("--secret", help="default $INTERNAL_SECRET, else .local/internal-secret")
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--max-seconds", type=float, default=300.0, help="stop starting cycles after this long")
    parser.add_argument("--timeout", type=float, default=60.0, help="per-request timeout in seconds")
    parser.add_argument("--progress-seconds", type=float, default=5.0)
    parser.add_argument("--start-stack", action="store_true", help="start `python -m devstack` for the run")
    parser.add_argument("--keep-state", action="store_true", help="--start-stack: keep its state dir and log")
    parser.add_argument("--docker-host", help="Docker host to inspect for leaks (default $DOCKER_HOST)")
    parser.add_argument("--docker-tls-verify", help="default $DOCKER_TLS_VERIFY")
    parser.add_argument("--docker-cert-path", help="default $DOCKER_CERT_PATH")
    parser.add_argument(
        "--docker-state-dir", type=Path, default=DEFAULT_DOCKER_STATE, help="dev Docker host of `make run`"
    )
    parser.add_argument("--json", type=Path, default=RESULTS / "load.json", help="results file")
    parser.add_argument("--markdown", type=Path, default=RESULTS / "load.md", help="results table")
    args = parser.parse_args(argv)
    if args.cycles < 1 or args.concurrency < 1 or args.max_seconds <= 0 or args.timeout <= 0:
        parser.error("--cycles and --concurrency must be ≥ 1, --max-seconds and --timeout > 0")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the load, check for leaks, write the results; 0 only without errors and leaks."""
    args = parse_args(argv)
    settings = docker_settings(args)
    try:
        if args.start_stack:
            if args.url:
                raise Refused("--url and --start-stack exclude each other")
            context: Any = started_stack(settings, args.keep_state)
        else:
            url = require_loopback(args.url or f"http://127.0.0.1:{os.environ.get('PORT', '3000')}")
            secret = read_secret(args.secret)
            context = contextlib.nullcontext(None)
    except Refused as error:
        print(f"[load] {error}", file=sys.stderr)
        return 2
    with context as started:
        stack: dict[str, Any] = {"started_by_bench": started is not None}
        docker_state = args.docker_state_dir
        if started is not None:
            running, startup = started
            url, secret = require_loopback(running.url), running.secret
            # The host its functions use: the one given, or the dev host it started in its state dir.
            settings = {key: value for key, value in running.functions_env().items() if key.startswith("DOCKER_")}
            docker_state = running.state_dir / "docker"
            stack["startup_seconds"] = round(startup, 1)
        health = requests.get(url + "/health", timeout=10)
        if health.status_code != 200:
            print(f"[load] {url}/health answered {health.status_code}; is the stack running?", file=sys.stderr)
            return 1
        print(
            f"[load] {args.cycles} cycles at concurrency {args.concurrency} on {url} "
            f"(max {args.max_seconds:g} s, progress every {args.progress_seconds:g} s)",
            flush=True,
        )
        load = LoadRun(url, secret, args.cycles, args.concurrency, args.timeout)
        stack_pid = started[0].process.pid if started is not None else find_stack_pid(url)
        load.stack_pid = stack_pid
        stack["load_average_before"] = _load_average()
        cpu_before, host_before = _driver_cpu(), CpuSnapshot.take()
        stopped_by, samples = load.run(args.max_seconds, args.progress_seconds)
        cpu_seconds, host_after = _driver_cpu() - cpu_before, CpuSnapshot.take()
        stack["host_cpu"] = cpu_breakdown(host_before, host_after, stack_pid)
        memory = [sample["stack_rss_mb"] for sample in samples if "stack_rss_mb" in sample]
        stack["peak_rss_mb"] = max(memory) if memory else None
        if stack_pid is None:
            stack["host_cpu"]["note"] = "the stack process was not found: its CPU is under other processes"
        print("[load] checking for leaks ...", flush=True)
        leaks = check_leaks(url, secret, settings, docker_state, load.tally.lease_ids, args.timeout)
    result = build_result(args, url, load, stopped_by, samples, leaks, stack, cpu_seconds)
    for path, text in ((args.json, json.dumps(result, indent=2) + "\n"), (args.markdown, markdown(result))):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    print(markdown(result))
    print(f"[load] wrote {args.json} and {args.markdown}", flush=True)
    leaked = leaks.get("containers") != 0 or leaks.get("leases") != 0
    return 1 if leaked or result["errors"]["total"] else 0


if __name__ == "__main__":
    sys.exit(main())
