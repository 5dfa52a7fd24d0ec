"""The in-memory reference driver: the provider contract with nothing behind it.

Workers are entries in a dict. It passes the same contract suite as the real drivers, and it is
what the unit tests and the in-process benchmarks provision on. Not a deployable provider (it is
not in the registry): a lease on it would have no worker anyone could use.

Faults are switched on by its attributes, as a test needs them: `full` (no capacity), `refuse`
(the provider refuses the worker), `unreachable` (no call gets through), `fail_releases` (the next
N releases fail), `stop(token)` (the worker stops behind the service's back), `boots` (workers
start `starting` until `boot(token)` or `fail_boot(token, why)`). `write(token, ...)` is what a worker
prints (its logs). `release_seconds` makes each release take that long (a slow provider), and
`most_releasing_at_once` shows how many overlapped. `ends_after_expiry_seconds` makes it a provider that
ends its workers itself, that long past their lease's expiry at acquire (as a Modal Sandbox's timeout).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from scheduler.clock import Clock, utc_now
from scheduler.deadline import Deadline
from scheduler.models import GpuClass, Lease
from scheduler.providers.base import (
    ManagedWorker,
    PriceAboveCeiling,
    Provider,
    ProviderCapacityError,
    ProviderRequestFailed,
    ProviderUnreachable,
    ProvisionedWorker,
    Readiness,
    StoppedWorker,
    WorkerGone,
    above_ceiling,
)
from scheduler.worker_logs import LogLine, LogQuery, select

if TYPE_CHECKING:  # only the acquire path builds one
    from scheduler.request_models import LeaseRequest

GONE = "the worker no longer exists"


@dataclass(eq=False)
class MemoryProvider(Provider):
    """Workers in a dict (token → worker), with every call it received recorded."""

    name: str = "local-docker"
    gpus: frozenset[GpuClass] = frozenset(GpuClass)
    cost_per_hour: float | None = None
    clock: Clock = utc_now
    full: bool = False
    refuse: bool = False
    unreachable: bool = False
    fail_releases: int = 0
    boots: bool = False
    endpoint: str | None = None
    booting: dict[str, Readiness] = field(default_factory=dict)  # token → what readiness answers
    readiness_calls: list[str] = field(default_factory=list)  # tokens asked about
    release_seconds: float = 0.0
    releases_meet: int = 0  # each release waits (at most 5 s) until this many have been in flight at once
    ends_after_expiry_seconds: float | None = None
    most_releasing_at_once: int = 0
    workers: dict[str, ManagedWorker] = field(default_factory=dict)
    stopped: dict[str, str] = field(default_factory=dict)  # token → why its worker stopped
    provisioned: list[tuple[str, dict[str, str]]] = field(default_factory=list)  # (lease id, env)
    release_calls: list[str] = field(default_factory=list)  # lease ids
    deadlines: list[Deadline | None] = field(default_factory=list)
    output: dict[str, list[LogLine]] = field(default_factory=dict)  # token → what its worker printed
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _releasing: int = field(default=0, repr=False)
    _in_flight: threading.Condition = field(default_factory=threading.Condition, repr=False)

    def available(self, request: LeaseRequest) -> bool:
        return request.gpu in self.gpus

    def provision(self, lease: Lease, env: Mapping[str, str], deadline: Deadline | None = None) -> ProvisionedWorker:
        with self._lock:
            self.deadlines.append(deadline)
            self.provisioned.append((lease.lease_id, dict(env)))
            self._reach()
            if self.full:
                raise ProviderCapacityError(f"{self.name} is full")
            if self.refuse:
                raise ProviderRequestFailed(f"{self.name} refused the worker")
            if above_ceiling(self.cost_per_hour, lease):
                raise PriceAboveCeiling(
                    f"{self.name} costs {self.cost_per_hour}/h, above the ceiling", self.cost_per_hour
                )
            token = f"w-{uuid.uuid4().hex[:12]}"
            self.workers[token] = ManagedWorker(lease_id=lease.lease_id, token=token, created_at=self.clock())
            if self.boots:
                self.booting[token] = Readiness.starting("booting")
        ends = self.ends_after_expiry_seconds
        return ProvisionedWorker(
            token=token,
            endpoint=self.endpoint,
            cost_per_hour=self.cost_per_hour,
            ready=not self.boots,
            ends_at=None if ends is None else lease.expires_at + timedelta(seconds=ends),
        )

    def boot(self, token: str) -> None:
        """The booting worker is up."""
        with self._lock:
            self.booting[token] = Readiness.ready()

    def fail_boot(self, token: str, reason: str = "the worker ended in ERROR while booting") -> None:
        """The booting worker will never serve."""
        with self._lock:
            self.booting[token] = Readiness.failed(reason)

    def readiness(self, lease_id: str, token: str, deadline: Deadline | None = None) -> Readiness:
        with self._lock:
            self.readiness_calls.append(token)
            self._reach()
            if token not in self.workers:
                return Readiness.failed(GONE)
            return self.booting.get(token, Readiness.ready())

    def price_bound(self, request: LeaseRequest, deadline: Deadline | None = None) -> float | None:
        return self.cost_per_hour

    def add_worker(self, lease_id: str, token: str | None = None, created_at: datetime | None = None) -> str:
        """A managed worker the service did not make through `provision` (an orphan, a crashed acquire's)."""
        token = token or f"w-{uuid.uuid4().hex[:12]}"
        with self._lock:
            self.workers[token] = ManagedWorker(lease_id, token, created_at or self.clock())
        return token

    def stop(self, token: str, reason: str = "the worker container exited with code 137, SIGKILL") -> None:
        """What `docker kill` does behind the service's back."""
        with self._lock:
            self.stopped[token] = reason

    def release(self, lease_id: str, token: str | None, deadline: Deadline | None = None) -> None:
        if self.release_seconds > 0 or self.releases_meet > 0:
            with self._in_flight:
                self._releasing += 1
                self.most_releasing_at_once = max(self.most_releasing_at_once, self._releasing)
                self._in_flight.notify_all()
                # Until `releases_meet` releases have been in flight at once (or a while): a test of concurrency
                # then sees it whatever the machine's speed, and a caller that never gets there still finishes.
                self._in_flight.wait_for(lambda: self.most_releasing_at_once >= self.releases_meet, timeout=5)
            try:
                time.sleep(self.release_seconds)  # outside the lock: slow releases overlap, as a provider's do
            finally:
                with self._in_flight:
                    self._releasing -= 1
        with self._lock:
            self.release_calls.append(lease_id)
            self._reach()
            if self.fail_releases > 0:
                self.fail_releases -= 1
                raise ProviderRequestFailed("injected release failure")
            for key, worker in list(self.workers.items()):
                if key == token or (token is None and worker.lease_id == lease_id):
                    del self.workers[key]
                    self.stopped.pop(key, None)

    def list_managed(self, deadline: Deadline | None = None) -> list[ManagedWorker]:
        with self._lock:
            self._reach()
            return [
                ManagedWorker(worker.lease_id, worker.token, worker.created_at, self.stopped.get(worker.token))
                for worker in self.workers.values()
            ]

    def stopped_workers(self, deadline: Deadline | None = None) -> list[StoppedWorker]:
        with self._lock:
            self._reach()
            return [
                StoppedWorker(self.workers[token].lease_id, token, reason)
                for token, reason in self.stopped.items()
                if token in self.workers
            ]

    def stopped_reason(self, lease_id: str, token: str, deadline: Deadline | None = None) -> str | None:
        with self._lock:
            self._reach()
            return GONE if token not in self.workers else self.stopped.get(token)

    def write(self, token: str, *lines: str) -> None:
        """What the worker `token` prints, stamped now."""
        self.write_lines(token, list(lines))

    def write_lines(self, token: str, lines: list[str]) -> None:
        """What the worker `token` prints, stamped now (each line a nanosecond after the one before)."""
        with self._lock:
            output = self.output.setdefault(token, [])
            at_ns = int(self.clock().timestamp() * 1_000_000_000)
            if output:
                at_ns = max(at_ns, output[-1].at_ns + 1)
            output.extend(LogLine(at_ns + offset, line) for offset, line in enumerate(lines))

    def logs(
        self, lease_id: str, token: str | None, query: LogQuery, deadline: Deadline | None = None
    ) -> list[LogLine]:
        with self._lock:
            self._reach()
            found = token if token in self.workers else None
            if token is None:
                found = next((key for key, worker in self.workers.items() if worker.lease_id == lease_id), None)
            if found is None:
                raise WorkerGone(f"no worker of lease {lease_id} on {self.name}")
            return select(self.output.get(found, []), query)

    def _reach(self) -> None:
        # Raised by every call alike: what it means depends on the call (see the contract in base.py).
        if self.unreachable:
            raise ProviderUnreachable(f"{self.name} cannot be reached")
