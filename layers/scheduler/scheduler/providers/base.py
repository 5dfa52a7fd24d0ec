"""The interface every provider driver implements, and the errors it may raise."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from scheduler.deadline import Deadline
from scheduler.models import Lease, LeaseRequest

MANAGED_LABEL = "openalice.scheduler/managed"
LEASE_ID_LABEL = "openalice.scheduler/lease-id"
KIND_LABEL = "openalice.scheduler/kind"
WORKER_NAME_PREFIX = "lease-"


def worker_name(lease_id: str) -> str:
    """The name a lease's container or pod carries, so it can be found without its token."""
    return f"{WORKER_NAME_PREFIX}{lease_id}"


@dataclass(frozen=True)
class ProvisionedWorker:
    """What a provider hands back for a running worker."""

    token: str
    endpoint: str | None
    cost_per_hour: float | None = None


@dataclass(frozen=True)
class ManagedWorker:
    """A worker the provider holds for some lease, as the reconciler sees it."""

    lease_id: str
    token: str
    created_at: datetime
    stopped_reason: str | None = None  # set when the worker no longer runs (exited, dead, stuck restarting)


@dataclass(frozen=True)
class StoppedWorker:
    """A managed worker that no longer runs, and why (recorded as its lease's failure reason)."""

    lease_id: str
    token: str
    reason: str


class ProviderCapacityError(Exception):
    """This provider cannot serve the request now; the policy falls over to the next one."""


class ProviderUnreachable(ProviderCapacityError):
    """The provider's API cannot be reached at all (or not within the caller's deadline)."""


class WorkerOutcomeUnknown(ProviderUnreachable):
    """The call failed after the provider may have made the worker, and its removal could not be confirmed.

    The lease stays `pending`: the reconciler removes any worker carrying its lease id once the
    pending deadline passes, and ends the lease as `failed`.
    """


class ProviderRequestFailed(Exception):
    """The provider refused or failed the call; retrying on another provider won't help."""


class Provider(ABC):
    """A place that runs workers: create one per lease, remove it, list the ones we manage.

    Every call that reaches the provider takes the caller's `deadline` (None: no limit) and gives
    up by then, raising as the method says.
    """

    name: str

    @abstractmethod
    def available(self, request: LeaseRequest) -> bool:
        """Cheap, local check that this provider could serve the request (no network)."""

    @abstractmethod
    def provision(self, lease: Lease, env: Mapping[str, str], deadline: Deadline | None = None) -> ProvisionedWorker:
        """Start a worker for the lease, or raise leaving nothing running behind.

        ProviderCapacityError (ProviderUnreachable included): try the next provider.
        WorkerOutcomeUnknown: as ProviderUnreachable, but a worker may exist; the lease stays pending.
        ProviderRequestFailed: the provider refused; no other provider is tried.
        """

    @abstractmethod
    def release(self, lease_id: str, token: str | None, deadline: Deadline | None = None) -> None:
        """Remove the lease's worker and return only once it is confirmed gone; gone already is fine.

        ProviderRequestFailed when it cannot be removed or confirmed gone (the caller retries later).
        """

    @abstractmethod
    def list_managed(self, deadline: Deadline | None = None) -> list[ManagedWorker]:
        """Every worker on this provider that carries our managed marker; ProviderRequestFailed if unlistable."""

    def stopped_workers(self, deadline: Deadline | None = None) -> list[StoppedWorker]:
        """Managed workers that no longer run, from one cheap call (the sweep asks every minute).

        A provider without such a call, or whose API quota must not be spent on it, finds none
        here: its stopped workers are left to the reconciler.
        """
        return []

    def stopped_reason(self, lease_id: str, token: str, deadline: Deadline | None = None) -> str | None:
        """Why the worker `token` no longer serves its lease (stopped, or gone), else None.

        None also when the provider cannot tell cheaply. ProviderRequestFailed if it cannot be asked.
        """
        return None
