"""An in-memory provider that counts what it is asked to do, for use-case tests without Docker."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping
from datetime import datetime

from scheduler.config import Settings
from scheduler.deadline import Deadline
from scheduler.models import Lease, LeaseRequest
from scheduler.providers.base import (
    ManagedWorker,
    Provider,
    ProviderCapacityError,
    ProviderRequestFailed,
    ProvisionedWorker,
    StoppedWorker,
)
from scheduler.providers.registry import ProviderRegistry

from .builders import NOW


class CountingProvider(Provider):
    """Workers in a dict; every release call is counted; failures can be switched on."""

    name = "local-docker"

    def __init__(self, name: str = "local-docker", *, full: bool = False, fail: bool = False) -> None:
        self.name = name
        self.full = full  # every provision answers "no capacity"
        self.fail = fail  # every provision fails outright
        self.workers: dict[str, ManagedWorker] = {}
        self.release_calls: list[str] = []
        self.fail_releases = 0
        self.stopped: dict[str, str] = {}  # token -> why its worker stopped
        self.deadlines: list[Deadline | None] = []
        self._lock = threading.Lock()

    def available(self, request: LeaseRequest) -> bool:
        return True

    def provision(self, lease: Lease, env: Mapping[str, str], deadline: Deadline | None = None) -> ProvisionedWorker:
        self.deadlines.append(deadline)
        if self.full:
            raise ProviderCapacityError(f"{self.name} is full")
        if self.fail:
            raise ProviderRequestFailed(f"{self.name} refused the worker")
        token = f"w-{uuid.uuid4().hex[:10]}"
        self.add_worker(lease.lease_id, token, NOW)
        return ProvisionedWorker(token=token, endpoint=None)

    def add_worker(self, lease_id: str, token: str, created_at: datetime) -> None:
        with self._lock:
            self.workers[token] = ManagedWorker(lease_id=lease_id, token=token, created_at=created_at)

    def release(self, lease_id: str, token: str | None, deadline: Deadline | None = None) -> None:
        with self._lock:
            self.release_calls.append(lease_id)
            if self.fail_releases > 0:
                self.fail_releases -= 1
                raise ProviderRequestFailed("injected release failure")
            for key, worker in list(self.workers.items()):
                if key == token or (token is None and worker.lease_id == lease_id):
                    del self.workers[key]
                    self.stopped.pop(key, None)

    def list_managed(self, deadline: Deadline | None = None) -> list[ManagedWorker]:
        with self._lock:
            return [
                ManagedWorker(worker.lease_id, worker.token, worker.created_at, self.stopped.get(worker.token))
                for worker in self.workers.values()
            ]

    def stop_worker(self, token: str, reason: str = "the worker container exited with code 137, SIGKILL") -> None:
        """What `docker kill` does behind the service's back."""
        with self._lock:
            self.stopped[token] = reason

    def stopped_workers(self, deadline: Deadline | None = None) -> list[StoppedWorker]:
        with self._lock:
            return [
                StoppedWorker(self.workers[token].lease_id, token, reason)
                for token, reason in self.stopped.items()
                if token in self.workers
            ]

    def stopped_reason(self, lease_id: str, token: str, deadline: Deadline | None = None) -> str | None:
        with self._lock:
            if token not in self.workers:
                return "the worker no longer exists"
            return self.stopped.get(token)


def registry_of(*providers: CountingProvider) -> ProviderRegistry:
    """A registry of `providers`, in policy order."""
    return ProviderRegistry(
        Settings(providers=tuple(provider.name for provider in providers)),
        factories={provider.name: (lambda _, chosen=provider: chosen) for provider in providers},
    )
