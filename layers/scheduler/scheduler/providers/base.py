"""The interface every provider driver implements, and the errors it may raise."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

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


class ProviderCapacityError(Exception):
    """This provider cannot serve the request now; the policy falls over to the next one."""


class ProviderUnreachable(ProviderCapacityError):
    """The provider's API cannot be reached at all."""


class ProviderRequestFailed(Exception):
    """The provider refused or failed the call; retrying on another provider won't help."""


class Provider(ABC):
    """A place that runs workers: create one per lease, remove it, list the ones we manage."""

    name: str

    @abstractmethod
    def available(self, request: LeaseRequest) -> bool:
        """Cheap, local check that this provider could serve the request (no network)."""

    @abstractmethod
    def provision(self, lease: Lease, env: Mapping[str, str]) -> ProvisionedWorker:
        """Start a worker for the lease, or raise leaving nothing running behind."""

    @abstractmethod
    def release(self, lease_id: str, token: str | None) -> None:
        """Remove the lease's worker and return only once it is confirmed gone; gone already is fine."""

    @abstractmethod
    def list_managed(self) -> list[ManagedWorker]:
        """Every worker on this provider that carries our managed marker."""
